//! The prebuilt objects in `bpf/objects/` match their sources: every source and object hash in
//! `MANIFEST` holds, and, where the manifest's clang is installed, a rebuild gives the same
//! bytes (`cargo xtask bpf-objects` rebuilds and rewrites the manifest).

use std::path::{Path, PathBuf};
use std::process::Command;

fn fnv64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct Entry {
    object: String,
    source: String,
    flags: String,
    source_hash: String,
    object_hash: String,
}

fn manifest() -> (String, Vec<Entry>) {
    let text = std::fs::read_to_string(root().join("bpf/objects/MANIFEST")).unwrap();
    let clang = text
        .lines()
        .find_map(|l| l.strip_prefix("# clang: "))
        .unwrap()
        .to_string();
    let entries = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 5, "MANIFEST line: {l}");
            Entry {
                object: f[0].into(),
                source: f[1].into(),
                flags: f[2].into(),
                source_hash: f[3].into(),
                object_hash: f[4].into(),
            }
        })
        .collect();
    (clang, entries)
}

#[test]
fn sources_and_objects_match_the_manifest() {
    let (_, entries) = manifest();
    assert!(entries.len() >= 10);
    for e in &entries {
        let src = std::fs::read(root().join(&e.source)).unwrap();
        assert_eq!(
            format!("{:016x}", fnv64(&src)),
            e.source_hash,
            "{} changed since {} was built: run cargo xtask bpf-objects",
            e.source,
            e.object
        );
        let obj = std::fs::read(root().join("bpf/objects").join(&e.object)).unwrap();
        assert_eq!(
            format!("{:016x}", fnv64(&obj)),
            e.object_hash,
            "{} differs from its manifest entry",
            e.object
        );
    }
    // Every C program of os-linux/xdp has its object.
    for f in std::fs::read_dir(root().join("os-linux/xdp")).unwrap() {
        let name = f.unwrap().file_name().into_string().unwrap();
        if name.starts_with("xdp_") && name.ends_with(".c") {
            assert!(
                entries.iter().any(|e| e.source.ends_with(&name)),
                "{name} has no prebuilt object"
            );
        }
    }
}

#[test]
fn objects_rebuild_byte_for_byte_with_the_same_clang() {
    let (clang, entries) = manifest();
    let Ok(out) = Command::new("clang").arg("--version").output() else {
        eprintln!("clang not installed: objects not rebuilt (hashes checked)");
        return;
    };
    let version = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if version != clang {
        eprintln!("clang is '{version}', the objects were built with '{clang}': not rebuilt");
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bpf-objects");
    std::fs::create_dir_all(&dir).unwrap();
    let r = root();
    for e in &entries {
        let out = dir.join(&e.object);
        let mut c = Command::new("clang");
        c.current_dir(&r)
            .args([
                "-O2",
                "-g",
                "-Wall",
                "-Werror",
                "-target",
                "bpf",
                "-I/usr/include/x86_64-linux-gnu",
            ])
            .arg(format!("-fdebug-prefix-map={}=.", r.display()));
        if e.flags != "-" {
            c.arg(&e.flags);
        }
        let st = c.args(["-c", &e.source, "-o"]).arg(&out).status().unwrap();
        assert!(st.success(), "clang {}", e.source);
        let built = std::fs::read(&out).unwrap();
        let committed = std::fs::read(r.join("bpf/objects").join(&e.object)).unwrap();
        assert!(
            built == committed,
            "{} does not rebuild to the committed bytes",
            e.object
        );
    }
}
