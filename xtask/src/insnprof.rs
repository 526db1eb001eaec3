//! `vm-bench --profile`: where a guest's instructions go, per function, counted by QEMU.
//!
//! The measured guest's QEMU loads the TCG plugin `qemu-card/plugin/onic_insn.c`, which counts
//! the executions of every translated block; the guest's bench script marks each measured
//! window with `onic_prof start` / `onic_prof stop` (`os-linux/vm/onic_prof.c`), and the plugin
//! writes the window's counts to `window-N` in the profile directory. Through QEMU's debug
//! console (I/O port 0xe9, a file here) the guest writes what the host needs to read them:
//!
//! ```text
//! @kernel                                  the kernel's text symbols, once per boot
//! <address> <name>
//! @window <N>                              after window N: the modules' text symbols now
//! <address> <name> [<module>]
//! @figure <table> <config> <what> <count> <unit>   the figure window N measured, and its divisor
//! ```
//!
//! Each block's instructions (its length times its executions) go to the function whose symbol
//! is the nearest at or below the block's start; user-space addresses go to "user space". The
//! counts are the guest's instructions exactly (one vCPU; the plugin adds host work, not guest
//! instructions), so the table of a figure is the same whether the host was busy or not.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, run};

/// Where user space ends on x86-64 (the canonical lower half).
const USER_END: u64 = 0x0000_8000_0000_0000;

/// Functions listed per figure.
const TOP: usize = 30;

/// Compiles the plugin into `out` against the plugin API of the card's QEMU tree (the same
/// version as Debian's QEMU 7.2, which `sim` and `virtio` run on).
pub fn build_plugin(out: &Path) -> Result<PathBuf, String> {
    let api = crate::qemucard::plugin_api_dir()?;
    let so = out.join("onic_insn.so");
    let glib = Command::new("pkg-config")
        .args(["--cflags", "glib-2.0"])
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    let mut c = Command::new("gcc");
    c.args(["-O2", "-Wall", "-Werror", "-shared", "-fPIC"])
        .args(String::from_utf8_lossy(&glib.stdout).split_whitespace())
        .arg(format!("-I{}", api.display()))
        .arg(root().join("qemu-card/plugin/onic_insn.c"))
        .arg("-o")
        .arg(&so);
    run("gcc -shared onic_insn.c (QEMU plugin)", c)?;
    Ok(so)
}

/// QEMU's arguments for a profiled guest: the plugin writing into `dir`, and the debug console
/// into `dir/debugcon`. Empties `dir` first.
pub fn qemu_args(plugin: &Path, dir: &Path) -> Result<Vec<String>, String> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(vec![
        "-plugin".into(),
        format!("{},out={}", plugin.display(), dir.display()),
        "-chardev".into(),
        format!("file,id=onicprof,path={}", dir.join("debugcon").display()),
        "-device".into(),
        "isa-debugcon,iobase=0xe9,chardev=onicprof".into(),
    ])
}

/// A text symbol: its address, its name, its module (`None`: the kernel's own).
#[derive(Clone)]
struct Symbol {
    addr: u64,
    name: String,
    module: Option<String>,
}

/// A measured figure and the window that measured it.
struct Labelled {
    window: usize,
    label: String,
    count: u64,
    unit: String,
    modules: Vec<Symbol>,
}

/// What the guest wrote to the debug console.
struct Console {
    kernel: Vec<Symbol>,
    figures: Vec<Labelled>,
}

fn parse_symbol(line: &str) -> Option<Symbol> {
    let mut w = line.split_whitespace();
    let addr = u64::from_str_radix(w.next()?, 16).ok()?;
    let name = w.next()?.to_string();
    let module = w
        .next()
        .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string());
    Some(Symbol { addr, name, module })
}

fn parse_console(text: &str) -> Console {
    let mut kernel = Vec::new();
    let mut figures = Vec::new();
    // The modules' symbols of the last window, and its number.
    let mut window: Option<(usize, Vec<Symbol>)> = None;
    let mut section = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix('@') {
            let w: Vec<&str> = rest.split_whitespace().collect();
            match w[..] {
                ["kernel"] => section = "kernel",
                ["window", n] => {
                    section = "window";
                    window = n.parse().ok().map(|n| (n, Vec::new()));
                }
                ["figure", table, config, what, count, unit] => {
                    section = "";
                    if let (Some((n, mods)), Ok(count)) = (window.take(), count.parse()) {
                        figures.push(Labelled {
                            window: n,
                            label: format!("{table} {config} {what}"),
                            count,
                            unit: unit.to_string(),
                            modules: mods,
                        });
                    }
                }
                _ => section = "",
            }
            continue;
        }
        match section {
            "kernel" => kernel.extend(parse_symbol(line)),
            "window" => {
                if let (Some((_, mods)), Some(s)) = (window.as_mut(), parse_symbol(line)) {
                    mods.push(s);
                }
            }
            _ => {}
        }
    }
    Console { kernel, figures }
}

/// Who a function belongs to: the Rust crate for onic.ko's Rust code (its `onic_rs_*` entry
/// points apart), "onic.ko C glue" for its C, a module's name, "kernel" or "user space".
fn owner(s: Option<&Symbol>, demangled: &str) -> String {
    let Some(s) = s else {
        return "user space".into();
    };
    match s.module.as_deref() {
        None => "kernel".into(),
        Some("onic") if s.name.starts_with("_R") || s.name.starts_with("_ZN") => {
            let path = demangled.trim_start_matches('<');
            let krate: String = path
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            format!("onic.ko Rust {krate}")
        }
        // The Rust side's `extern "C"` entry points (os-linux/src/kernel/entry.rs), where the
        // core's inlined datapath runs.
        Some("onic") if s.name.starts_with("onic_rs_") => "onic.ko Rust entry (onic_linux)".into(),
        Some("onic") => "onic.ko C glue".into(),
        Some(m) => format!("module {m}"),
    }
}

/// A demangled Rust name without its generic arguments: `a::B<T>::c::<U>` reads `a::B::c`;
/// qualified heads stay, simplified the same way (`<a::B<T> as c::D>::e` reads `<a::B as
/// c::D>::e`, `a::<impl a::B<T>>::c` reads `a::<impl a::B>::c`). Other names are unchanged.
fn short_name(name: &str) -> String {
    simplify(&format!("{:#}", rustc_demangle::demangle(name)))
}

fn simplify(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'<' {
            let next = s[i..].find('<').map_or(s.len(), |k| i + k);
            out.push_str(&s[i..next]);
            i = next;
            continue;
        }
        let close = matching(b, i);
        let inner = &s[i + 1..close];
        if out.is_empty() || inner.starts_with("impl ") || top_level_as(inner) {
            out.push('<');
            out.push_str(&simplify(inner));
            out.push('>');
        } else if out.ends_with("::") {
            out.truncate(out.len() - 2);
        }
        i = close + 1;
    }
    out
}

/// The index of the `>` closing the `<` at `open` (an arrow's `>` is not one), or the end.
fn matching(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'<' => depth += 1,
            b'>' if k > 0 && b[k - 1] == b'-' => {}
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    b.len()
}

/// Whether ` as ` occurs in `s` outside nested `<...>`.
fn top_level_as(s: &str) -> bool {
    let b = s.as_bytes();
    let mut depth = 0usize;
    for (k, &c) in b.iter().enumerate() {
        match c {
            b'<' => depth += 1,
            b'>' if k > 0 && b[k - 1] == b'-' => {}
            b'>' => depth = depth.saturating_sub(1),
            b' ' if depth == 0 && s[k..].starts_with(" as ") => return true,
            _ => {}
        }
    }
    false
}

/// Instructions and calls of a function in a window. A call is an execution of the block that
/// starts at the function's own address (a loop back to the first instruction would count too;
/// compilers do not emit those for the functions that matter here).
#[derive(Clone, Copy, Default)]
struct Cost {
    insns: u64,
    calls: u64,
}

/// Instructions and calls of window `f` per function (name, owner), from its block counts.
fn attribute(
    dir: &Path,
    f: &Labelled,
    kernel: &[Symbol],
) -> Result<BTreeMap<(String, String), Cost>, String> {
    let path = dir.join(format!("window-{}", f.window));
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut syms: Vec<Symbol> = kernel.iter().chain(&f.modules).cloned().collect();
    syms.sort_by_key(|s| s.addr);
    let mut names: BTreeMap<usize, (String, String)> = BTreeMap::new();
    let mut per: BTreeMap<(String, String), Cost> = BTreeMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [addr, insns, execs] = w[..] else { continue };
        let (Ok(addr), Ok(insns), Ok(execs)) = (
            u64::from_str_radix(addr, 16),
            insns.parse::<u64>(),
            execs.parse::<u64>(),
        ) else {
            continue;
        };
        let (key, entry) = if addr < USER_END {
            (("(user space)".to_string(), "user space".to_string()), false)
        } else {
            let i = syms.partition_point(|s| s.addr <= addr);
            match i.checked_sub(1) {
                Some(i) => {
                    let key = names
                        .entry(i)
                        .or_insert_with(|| {
                            let short = short_name(&syms[i].name);
                            let o = owner(Some(&syms[i]), &short);
                            (short, o)
                        })
                        .clone();
                    (key, syms[i].addr == addr)
                }
                None => (("(below every symbol)".to_string(), "kernel".to_string()), false),
            }
        };
        let c = per.entry(key).or_default();
        c.insns += insns * execs;
        if entry {
            c.calls += execs;
        }
    }
    Ok(per)
}

/// The report of one guest's profile directory: a table per figure, by owner then by function,
/// in instructions per counted unit. `dev` prefixes the titles.
pub fn report(dev: &str, dir: &Path) -> Result<String, String> {
    let con = dir.join("debugcon");
    let text = fs::read(&con).map_err(|e| format!("{}: {e}", con.display()))?;
    let console = parse_console(&String::from_utf8_lossy(&text));
    if console.kernel.is_empty() {
        return Err(format!("{}: no kernel symbols from the guest", con.display()));
    }
    let mut out = String::new();
    for f in &console.figures {
        if f.count == 0 {
            continue;
        }
        let per = attribute(dir, f, &console.kernel)?;
        let total: u64 = per.values().map(|c| c.insns).sum();
        let mut owners: BTreeMap<&str, u64> = BTreeMap::new();
        for ((_, o), c) in &per {
            *owners.entry(o).or_default() += c.insns;
        }
        let per_unit = |v: u64| v as f64 / f.count as f64;
        let unit = f.unit.trim_start_matches("insn/");
        out.push_str(&format!(
            "\n**profile {dev} {}**: {:.0} instructions per {unit} in the window ({} {unit}s)\n\n| owner | per {unit} | share |\n| --- | --- | --- |\n",
            f.label,
            per_unit(total),
            f.count
        ));
        let mut by_owner: Vec<_> = owners.into_iter().collect();
        by_owner.sort_by_key(|(_, v)| std::cmp::Reverse(*v));
        for (o, v) in by_owner {
            out.push_str(&format!(
                "| {o} | {:.0} | {:.1} % |\n",
                per_unit(v),
                100.0 * v as f64 / total.max(1) as f64
            ));
        }
        let mut funcs: Vec<_> = per.into_iter().collect();
        funcs.sort_by_key(|(_, c)| std::cmp::Reverse(c.insns));
        out.push_str(&format!(
            "\n| function | owner | per {unit} | share | calls per 1000 {unit}s |\n| --- | --- | --- | --- | --- |\n"
        ));
        for ((name, o), c) in funcs.into_iter().take(TOP) {
            out.push_str(&format!(
                "| `{name}` | {o} | {:.0} | {:.1} % | {:.0} |\n",
                per_unit(c.insns),
                100.0 * c.insns as f64 / total.max(1) as f64,
                1000.0 * per_unit(c.calls)
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_arguments_are_dropped_from_rust_names() {
        assert_eq!(short_name("memcpy"), "memcpy");
        // onic_core::queue::rx::RxQueue<u8>::poll (legacy mangling, hash dropped by {:#}).
        let n = short_name("_ZN9onic_core5queue2rx17RxQueue$LT$u8$GT$4poll17h0123456789abcdefE");
        assert_eq!(n, "onic_core::queue::rx::RxQueue::poll");
        assert_eq!(
            simplify("<a::B<T, u8> as c::D<E>>::f::<G<H>>"),
            "<a::B as c::D>::f"
        );
        assert_eq!(simplify("a::<impl a::B<T>>::c"), "a::<impl a::B>::c");
        assert_eq!(simplify("a::f::<fn() -> u8>"), "a::f");
    }

    #[test]
    fn windows_take_their_modules_symbols_and_figure() {
        let text = "@kernel\nffffffff81000000 _stext\nffffffff81001000 napi_poll\n\
                    @window 0\nffffffffc0000000 onic_poll [onic]\n\
                    @figure memory page_pool udp64 1000 insn/datagram\n\
                    @window 1\n@figure memory page_pool udp500 0 insn/datagram\n";
        let c = parse_console(text);
        assert_eq!(c.kernel.len(), 2);
        assert_eq!(c.figures.len(), 2);
        assert_eq!(c.figures[0].window, 0);
        assert_eq!(c.figures[0].modules[0].module.as_deref(), Some("onic"));
        assert_eq!(c.figures[0].count, 1000);
        assert!(c.figures[1].modules.is_empty());
    }

    #[test]
    fn blocks_go_to_the_nearest_symbol_below() {
        let dir = std::env::temp_dir().join(format!("onic-insnprof-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("window-0"),
            "ffffffff81001010 4 10\nffffffffc0000004 2 5\n401000 3 3\nffffffff81001000 1 7\n",
        )
        .unwrap();
        let c = parse_console(
            "@kernel\nffffffff81001000 napi_poll\n@window 0\nffffffffc0000000 onic_poll [onic]\n\
             @figure t c w 10 insn/packet\n",
        );
        let per = attribute(&dir, &c.figures[0], &c.kernel).unwrap();
        let napi = per[&("napi_poll".to_string(), "kernel".to_string())];
        assert_eq!((napi.insns, napi.calls), (47, 7));
        let onic = per[&("onic_poll".to_string(), "onic.ko C glue".to_string())];
        assert_eq!((onic.insns, onic.calls), (10, 0));
        assert_eq!(
            per[&("(user space)".to_string(), "user space".to_string())].insns,
            9
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
