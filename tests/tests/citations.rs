//! Every hardware citation in the repository resolves: each section sign followed by a number in
//! a `.rs`, `.md`, `.c` or `.h` file (outside `target/` and `.git/`) must name a heading of
//! `docs/hardware.md`, and the old citation forms that pointed at a reference outside the
//! repository ("spec" plus a section number, or that reference's path outside the repository)
//! must be gone.
//!
//! The section sign and the outside path are spelled in pieces in this file, so that the file
//! does not trip its own checks.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The section sign.
const SECTION: char = '\u{a7}';
/// A placeholder letter that may follow the section sign in prose about the citation form itself.
const PLACEHOLDER: char = 'N';
/// The directory of the old hardware reference, outside the repository.
const OUTSIDE_PATH: &str = concat!("shared/", "spec/");
/// Extensions of the files whose citations are checked.
const EXTENSIONS: [&str; 4] = ["rs", "md", "c", "h"];
/// Directories never scanned: build output and git's own.
const SKIPPED_DIRS: [&str; 2] = ["target", ".git"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The files to scan under `dir`, in a stable order.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name) {
                source_files(&path, out);
            }
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e))
        {
            out.push(path);
        }
    }
}

/// A section number read at the start of `s`: `N` or `N.M`, with the number of bytes it takes. A
/// trailing dot that ends a sentence ("see §5.") is not part of the number.
fn section_number(s: &str) -> Option<(String, usize)> {
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let major = digits(s);
    if major == 0 {
        return None;
    }
    let rest = &s[major..];
    let minor = rest.strip_prefix('.').map_or(0, digits);
    let len = if minor > 0 { major + 1 + minor } else { major };
    Some((s[..len].to_string(), len))
}

/// The section numbers of `docs/hardware.md`: headings such as `## 9. ...` and `### 9.4 ...`.
fn headings(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|line| {
            let title = line.trim_start_matches('#');
            if title.len() == line.len() || !title.starts_with(' ') {
                return None;
            }
            section_number(title.trim_start()).map(|(n, _)| n)
        })
        .collect()
}

/// One citation problem: file, line, what is wrong.
type Problem = (PathBuf, usize, String);

/// The section numbers cited on `line`, and any section sign not followed by one.
fn cited_sections(line: &str) -> (Vec<String>, Vec<String>) {
    let mut cited = Vec::new();
    let mut unreadable = Vec::new();
    for (at, _) in line.match_indices(SECTION) {
        let after = &line[at + SECTION.len_utf8()..];
        match section_number(after) {
            Some((number, _)) => cited.push(number),
            None if after.starts_with(PLACEHOLDER) => {}
            None => unreadable.push(after.chars().take(12).collect()),
        }
    }
    (cited, unreadable)
}

/// Whether `text` still holds the stale form: "spec" followed by a section sign or a section
/// number, possibly on the next comment line.
fn stale_spec_citation(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    for (at, _) in lower.match_indices("spec") {
        let before_ok = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
        let after = &text[at + 4..];
        let rest = after.trim_start_matches(|c: char| c.is_whitespace() || "/!*".contains(c));
        let spaced = rest.len() < after.len();
        let cites = rest.starts_with(SECTION) || section_number(rest).is_some_and(|(n, _)| n.contains('.'));
        if before_ok && spaced && cites {
            return Some(text[..at].matches('\n').count() + 1);
        }
    }
    None
}

fn check_file(path: &Path, text: &str, sections: &BTreeSet<String>, problems: &mut Vec<Problem>) {
    for (index, line) in text.lines().enumerate() {
        let (cited, unreadable) = cited_sections(line);
        for number in cited.into_iter().filter(|n| !sections.contains(n)) {
            let message = format!("cites section {number}, which docs/hardware.md does not have");
            problems.push((path.to_path_buf(), index + 1, message));
        }
        for text in unreadable {
            let message = format!("section sign without a section number: {text:?}");
            problems.push((path.to_path_buf(), index + 1, message));
        }
        if line.contains(OUTSIDE_PATH) {
            let message = "names the spec outside the repository; cite docs/hardware.md".to_string();
            problems.push((path.to_path_buf(), index + 1, message));
        }
    }
    if let Some(line) = stale_spec_citation(text) {
        let message = "stale \"spec\" citation; write hardware.md and the section".to_string();
        problems.push((path.to_path_buf(), line, message));
    }
}

/// All citation problems of the repository rooted at `root`.
fn problems_in(root: &Path) -> Vec<Problem> {
    let page = fs::read_to_string(root.join("docs/hardware.md")).expect("docs/hardware.md exists");
    let sections = headings(&page);
    let mut files = Vec::new();
    source_files(root, &mut files);
    let mut problems = Vec::new();
    for path in files {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        check_file(
            path.strip_prefix(root).unwrap_or(&path),
            &text,
            &sections,
            &mut problems,
        );
    }
    problems
}

#[test]
fn every_hardware_citation_names_a_section_of_hardware_md() {
    let problems = problems_in(&repo_root());
    let report: Vec<String> = problems
        .iter()
        .map(|(path, line, what)| format!("{}:{line}: {what}", path.display()))
        .collect();
    assert!(
        report.is_empty(),
        "citations that do not resolve:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_page_has_the_sections_the_code_cites_most() {
    let page = fs::read_to_string(repo_root().join("docs/hardware.md")).expect("docs/hardware.md exists");
    let sections = headings(&page);
    for number in ["1", "1.4", "5.1", "5.8", "9.4", "10.5", "15"] {
        assert!(
            sections.contains(number),
            "docs/hardware.md lacks section {number}"
        );
    }
    assert!(!sections.contains("16"), "no section 16 exists");
}

#[test]
fn the_checker_catches_what_it_must() {
    let sections = headings("## 3. Three\n### 3.1 One\n");
    let check = |text: &str| {
        let mut problems = Vec::new();
        check_file(Path::new("x.rs"), text, &sections, &mut problems);
        problems
            .into_iter()
            .map(|(_, line, what)| (line, what))
            .collect::<Vec<_>>()
    };
    let cite = |n: &str| format!("// see hardware.md {SECTION}{n}.\n");
    assert!(check(&cite("3")).is_empty());
    assert!(check(&cite("3.1")).is_empty());
    assert!(check(&format!(
        "// {SECTION}3-{SECTION}3.1 and {SECTION}{PLACEHOLDER}\n"
    ))
    .is_empty());
    assert_eq!(check(&cite("3.2")).len(), 1, "a missing subsection");
    assert_eq!(check(&cite("4")).len(), 1, "a missing section");
    assert_eq!(
        check(&format!("// {SECTION}x\n")).len(),
        1,
        "a sign without a number"
    );
    assert_eq!(
        check(&format!("// see spec {SECTION}3.1\n")).len(),
        1,
        "the stale form"
    );
    assert_eq!(
        check(&format!("/* Spec\n * {SECTION}3 */\n"))[0].0,
        1,
        "the stale form over two lines"
    );
    assert_eq!(
        check(&format!("/* spec {}: */\n", "3.1")).len(),
        1,
        "the stale form of the C glue"
    );
    assert_eq!(
        check(&format!("// see ../{OUTSIDE_PATH}hardware.md\n")).len(),
        1,
        "the outside path"
    );
    assert!(
        check("// the spec tables, spec 3 of them\n").is_empty(),
        "plain prose"
    );
}
