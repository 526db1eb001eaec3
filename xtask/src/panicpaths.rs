//! `cargo xtask panic-paths`: where the module can still panic. A Rust panic in the kernel
//! module ends in `onic_rust_panic`, which panics the kernel, so a path from an entry point to it
//! is a way to take the machine down from a packet or an `ethtool` call (issue 33, finding 4).
//!
//! The pass reads the module's Rust object (built as for `cargo xtask kmod`): its sections,
//! symbols and relocations (`readelf`), makes a graph of which code section refers to which (a
//! call, a jump table, a function pointer taken: every relocation counts, so the graph
//! over-approximates the calls), walks it from every entry point the C glue calls (each
//! exported `onic_rs_*`: the datapath's and the control path's, probe, open, stop, ethtool) and
//! lists every reachable function that calls into Rust's panic machinery, with the path that
//! reaches it. All entries are walked, not only the datapath's: a call through a pointer stored
//! at run time (the `log` facade's logger, set by `onic_rs_init`) is an edge only from where the
//! pointer is taken. Code that only simulation mode runs (its entry points `onic_rs_sim_*` and
//! `onic_rs_port_new_sim`, the in-kernel model `onic-sim`, and the module's `simcard` windows,
//! which are never inlined into the real path) is not followed: the model is a test device
//! whose own checks may panic. Every module build runs the pass (`kmod::build_rust_object`,
//! which `cargo xtask panic-paths` runs alone) and fails on a site.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::process::Command;

/// The module's entry points that run per packet or in atomic context (`entry.rs`): they must
/// be in the object (a renamed one would otherwise drop out of the walk unnoticed).
pub const DATAPATH_ENTRIES: [&str; 11] = [
    "onic_rs_poll",
    "onic_rs_xmit",
    "onic_rs_tx_flush",
    "onic_rs_tx_free",
    "onic_rs_tx_clean",
    "onic_rs_xmit_clean",
    "onic_rs_tx_state",
    "onic_rs_xdp_xmit",
    "onic_rs_stats64",
    "onic_rs_link_up",
    "onic_rs_error_report",
];

/// Parts of the mangled names of Rust's panic entry points (`core::panicking`, the slice and
/// `RefCell` failures, `Option`/`Result` unwraps, allocation failure).
const PANICKING: [&str; 7] = [
    "9panicking",
    "16slice_index_fail",
    "22panic_already_borrowed",
    "26panic_already_mut_borrowed",
    "13unwrap_failed",
    "17capacity_overflow",
    "18handle_alloc_error",
];

/// Prefix of the entry points the C glue calls.
const ENTRY_PREFIX: &str = "onic_rs_";

/// Entry points only simulation mode calls.
const SIMULATION_ENTRIES: [&str; 2] = ["onic_rs_sim_", "onic_rs_port_new_sim"];

/// Parts of mangled names (Rust's v0 scheme: a length, then the identifier) of code only
/// simulation mode runs.
const SIMULATION_ONLY: [&str; 2] = ["8onic_sim", "7simcard"];

/// The object as a graph of code sections.
struct Graph {
    /// Section (or `UNDEF:symbol`) to the sections its relocations name.
    edges: HashMap<String, BTreeSet<String>>,
    /// Section to the first symbol defined in it, for messages.
    label: HashMap<String, String>,
    /// Defined symbol to its section.
    home: HashMap<String, String>,
}

fn readelf(flag: &str, obj: &Path) -> Result<String, String> {
    let out = Command::new("readelf")
        .arg(flag)
        .arg(obj)
        .output()
        .map_err(|e| format!("readelf {flag}: {e}"))?;
    if !out.status.success() {
        return Err(format!("readelf {flag} {} failed", obj.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Section index to name, from `readelf -SW` (`  [ 5] .text.foo PROGBITS ...`).
fn section_names(text: &str) -> HashMap<usize, String> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix('[')?;
            let (idx, rest) = rest.split_once(']')?;
            let name = rest.split_whitespace().next()?;
            Some((idx.trim().parse().ok()?, name.to_string()))
        })
        .collect()
}

impl Graph {
    fn read(obj: &Path) -> Result<Self, String> {
        let secs = section_names(&readelf("-SW", obj)?);
        let mut home = HashMap::new();
        let mut label: HashMap<String, String> = HashMap::new();
        // `Num: Value Size Type Bind Vis Ndx Name`
        for l in readelf("-sW", obj)?.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(ndx), Some(name)) = (f.get(6), f.get(7)) else {
                continue;
            };
            let Some(sec) = ndx.parse::<usize>().ok().and_then(|i| secs.get(&i)) else {
                continue;
            };
            home.insert((*name).to_string(), sec.clone());
            label.entry(sec.clone()).or_insert_with(|| (*name).to_string());
        }
        let known: BTreeSet<&String> = secs.values().collect();
        let mut edges: HashMap<String, BTreeSet<String>> = HashMap::new();
        let mut from: Option<String> = None;
        // `Relocation section '.rela.text.foo' at ...`, then `Offset Info Type Value Name + Addend`
        for l in readelf("-rW", obj)?.lines() {
            if let Some(rest) = l.strip_prefix("Relocation section '.rela") {
                from = rest.split('\'').next().map(str::to_string);
                continue;
            }
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(from), Some(kind), Some(target)) = (&from, f.get(2), f.get(4)) else {
                continue;
            };
            if !kind.starts_with("R_X86_64_") {
                continue;
            }
            let to = if known.contains(&(*target).to_string()) {
                (*target).to_string()
            } else if let Some(sec) = home.get(*target) {
                sec.clone()
            } else {
                format!("UNDEF:{target}")
            };
            edges.entry(from.clone()).or_default().insert(to);
        }
        Ok(Self { edges, label, home })
    }

    fn name(&self, node: &str) -> String {
        let raw = self.label.get(node).map_or(node, String::as_str);
        let raw = raw.strip_prefix(".text.").unwrap_or(raw);
        format!("{:#}", rustc_demangle::demangle(raw))
    }

    /// Breadth-first walk from the entry points, simulation-only code not entered: each reached
    /// node with the node it was reached from.
    fn reach(&self, entries: &[&str]) -> BTreeMap<String, Option<String>> {
        let mut parent: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut queue = VecDeque::new();
        for e in entries {
            if let Some(sec) = self.home.get(*e) {
                parent.insert(sec.clone(), None);
                queue.push_back(sec.clone());
            }
        }
        while let Some(n) = queue.pop_front() {
            if SIMULATION_ONLY.iter().any(|s| n.contains(s)) || is_panicking(&n) {
                continue;
            }
            for t in self.edges.get(&n).into_iter().flatten() {
                if !parent.contains_key(t) {
                    parent.insert(t.clone(), Some(n.clone()));
                    queue.push_back(t.clone());
                }
            }
        }
        parent
    }

    /// Every reachable function outside the panic machinery that refers to it, with its path
    /// from an entry point (entry first).
    fn panic_sites(&self, entries: &[&str]) -> Vec<Vec<String>> {
        let parent = self.reach(entries);
        let mut sites = Vec::new();
        for n in parent.keys() {
            if is_panicking(n) || SIMULATION_ONLY.iter().any(|s| n.contains(s)) {
                continue;
            }
            if self.edges.get(n).into_iter().flatten().any(|t| is_panicking(t)) {
                let mut path = vec![n.clone()];
                let mut at = n.clone();
                while let Some(Some(p)) = parent.get(&at) {
                    path.push(p.clone());
                    at = p.clone();
                }
                path.reverse();
                sites.push(path);
            }
        }
        sites
    }
}

fn is_panicking(node: &str) -> bool {
    PANICKING.iter().any(|p| node.contains(p))
}

/// The entry points the C glue calls, simulation mode's left out, in name order.
fn entry_points(g: &Graph) -> Vec<&str> {
    let mut entries: Vec<&str> = g
        .home
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with(ENTRY_PREFIX))
        .filter(|k| !SIMULATION_ENTRIES.iter().any(|s| k.starts_with(s)))
        .collect();
    entries.sort_unstable();
    entries
}

/// Lists the panic sites reachable from the entry points of `obj`; an error when there is one
/// (or a datapath entry point is missing).
pub fn check(obj: &Path) -> Result<(), String> {
    let g = Graph::read(obj)?;
    let missing: Vec<&str> = DATAPATH_ENTRIES
        .iter()
        .copied()
        .filter(|e| !g.home.contains_key(*e))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{}: datapath entry points not found: {}",
            obj.display(),
            missing.join(", ")
        ));
    }
    let entries = entry_points(&g);
    let sites = g.panic_sites(&entries);
    for path in &sites {
        let names: Vec<String> = path.iter().map(|n| g.name(n)).collect();
        let site = names.last().map_or("", String::as_str);
        println!("panic site: {site}\n    reached by: {}", names.join(" -> "));
    }
    if sites.is_empty() {
        println!(
            "no panic reachable from the module's {} entry points ({} of the datapath)",
            entries.len(),
            DATAPATH_ENTRIES.len()
        );
        Ok(())
    } else {
        Err(format!(
            "{} functions reachable from the module's entry points can panic (a Rust panic panics the kernel)",
            sites.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_table_lines_are_read() {
        let t =
            "  [ 0]                   NULL            0000000000000000 000000 000000 00      0   0  0\n  \
                 [12] .text.onic_rs_poll PROGBITS        0000000000000000 000040 000123 00  AX  0   0 16\n";
        let s = section_names(t);
        assert_eq!(s.get(&12).map(String::as_str), Some(".text.onic_rs_poll"));
    }

    #[test]
    fn sites_are_found_and_simulation_code_is_not_entered() {
        let mut g = Graph {
            edges: HashMap::new(),
            label: HashMap::new(),
            home: HashMap::new(),
        };
        g.home.insert("entry".into(), ".text.entry".into());
        let edge = |g: &mut Graph, a: &str, b: &str| {
            g.edges.entry(a.to_string()).or_default().insert(b.to_string());
        };
        let panic = ".text._RNvNtCs1_4core9panicking18panic_bounds_check";
        edge(&mut g, ".text.entry", ".text._RNvCs1_8onic_sim5model");
        edge(&mut g, ".text._RNvCs1_8onic_sim5model", panic);
        assert!(g.panic_sites(&["entry"]).is_empty());
        edge(&mut g, ".text.entry", ".text.helper");
        edge(&mut g, ".text.helper", panic);
        assert_eq!(
            g.panic_sites(&["entry"]),
            vec![vec![".text.entry".to_string(), ".text.helper".to_string()]]
        );
    }

    #[test]
    fn every_entry_but_simulation_modes_is_walked() {
        let mut g = Graph {
            edges: HashMap::new(),
            label: HashMap::new(),
            home: HashMap::new(),
        };
        for name in [
            "onic_rs_poll",
            "onic_rs_open",
            "onic_rs_sim_tick",
            "onic_rs_port_new_sim",
            "onic_rs_port_new_pci",
            "memcpy",
        ] {
            g.home.insert(name.into(), format!(".text.{name}"));
        }
        assert_eq!(
            entry_points(&g),
            ["onic_rs_open", "onic_rs_poll", "onic_rs_port_new_pci"]
        );
    }
}
