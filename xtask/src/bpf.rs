//! `cargo xtask bpf-objects [--check]`: the XDP objects the repository ships prebuilt in
//! `bpf/objects/` (the engine's tests, `onic run` examples and the bare-metal image use them, so
//! none of those needs clang), built from the repository's C sources, and the `MANIFEST` that ties
//! each object to its source: the clang version, the flags, a hash of the source and of the
//! object. `onic-bpf`'s `objects` test checks the hashes on every run and, where the same clang
//! is installed, rebuilds every object and compares the bytes; `--check` does the rebuild here.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::root;

/// (object, source relative to the repository root, extra clang flags).
pub const OBJECTS: [(&str, &str, &str); 23] = [
    ("xdp_drop.o", "os-linux/xdp/xdp_drop.c", ""),
    ("xdp_pass.o", "os-linux/xdp/xdp_pass.c", ""),
    ("xdp_tx.o", "os-linux/xdp/xdp_tx.c", ""),
    ("xdp_redirect.o", "os-linux/xdp/xdp_redirect.c", ""),
    ("xdp_hash.o", "os-linux/xdp/xdp_hash.c", ""),
    ("xdp_swap.o", "os-linux/xdp/xdp_swap.c", ""),
    ("xdp_redirect_map.o", "os-linux/xdp/xdp_redirect_map.c", ""),
    ("xdp_drop_udp.o", "os-linux/xdp/xdp_drop_udp.c", ""),
    ("xdp_count.o", "os-linux/xdp/xdp_count.c", ""),
    ("xdp_features.o", "os-linux/xdp/xdp_features.c", "-mcpu=v3"),
    ("faults.o", "bpf/tests/c/faults.c", ""),
    ("refused.o", "bpf/tests/c/refused.c", ""),
    ("refused_map.o", "bpf/tests/c/refused_map.c", ""),
    ("legacy.o", "bpf/tests/c/legacy.c", "-mcpu=v2"),
    ("kernel_like.o", "bpf/tests/c/kernel_like.c", "-mcpu=v3"),
    ("core_types.o", "bpf/src/core_types.c", ""),
    ("more_maps.o", "bpf/tests/c/more_maps.c", ""),
    ("kernel_refuses.o", "bpf/tests/c/kernel_refuses.c", ""),
    (
        "ringbuf_records.o",
        "bpf/examples/kernel_diff/ringbuf_records.c",
        "",
    ),
    ("push_head.o", "bpf/tests/c/push_head.c", ""),
    ("broadcast.o", "bpf/tests/c/broadcast.c", ""),
    ("meta_out.o", "bpf/tests/c/meta_out.c", ""),
    ("fib_probe.o", "bpf/tests/c/fib_probe.c", ""),
];

/// FNV-1a, 64 bits (the manifest's change detector, not a security measure).
fn fnv64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn clang_version() -> Result<String, String> {
    let out = Command::new("clang")
        .arg("--version")
        .output()
        .map_err(|e| format!("clang: {e} (install clang, llvm and libbpf-dev)"))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

fn multiarch() -> String {
    Command::new("gcc")
        .arg("-print-multiarch")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "x86_64-linux-gnu".into())
}

/// Compiles one object into `out` (run from the repository root, with the root mapped to `.` in
/// the debug info, so the bytes do not depend on where the repository lies).
fn compile(src: &str, extra: &str, out: &Path) -> Result<(), String> {
    let r = root();
    let mut c = Command::new("clang");
    c.current_dir(&r)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I/usr/include/{}", multiarch()))
        .arg(format!("-fdebug-prefix-map={}=.", r.display()));
    if !extra.is_empty() {
        c.arg(extra);
    }
    c.args(["-c", src, "-o"]).arg(out);
    let o = c.output().map_err(|e| format!("clang: {e}"))?;
    if !o.status.success() {
        return Err(format!("clang {src}: {}", String::from_utf8_lossy(&o.stderr)));
    }
    Ok(())
}

/// Builds the objects into `bpf/objects/` and writes the manifest; with `--check`, builds them
/// into a scratch directory and compares with the committed ones.
pub fn bpf_objects(args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => return Err("usage: cargo xtask bpf-objects [--check]".into()),
    };
    let r = root();
    let dir = r.join("bpf/objects");
    let out_dir = if check {
        r.join("target/bpf-objects-check")
    } else {
        dir.clone()
    };
    fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let version = clang_version()?;
    let mut manifest = format!(
        "# Prebuilt XDP objects: written by `cargo xtask bpf-objects`, checked by onic-bpf's objects test.\n# clang: {version}\n# object source flags source-fnv64 object-fnv64\n"
    );
    let mut differ = Vec::new();
    for (obj, src, extra) in OBJECTS {
        let out = out_dir.join(obj);
        compile(src, extra, &out)?;
        let s = fs::read(r.join(src)).map_err(|e| format!("{src}: {e}"))?;
        let o = fs::read(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let flags = if extra.is_empty() { "-" } else { extra };
        let _ = writeln!(
            manifest,
            "{obj} {src} {flags} {:016x} {:016x}",
            fnv64(&s),
            fnv64(&o)
        );
        if check && fs::read(dir.join(obj)).ok().as_deref() != Some(o.as_slice()) {
            differ.push(obj);
        }
    }
    if check {
        if differ.is_empty() {
            println!(
                "bpf-objects: all {} objects rebuild byte for byte ({version})",
                OBJECTS.len()
            );
            return Ok(());
        }
        return Err(format!(
            "objects differ from a rebuild with {version}: {} (run cargo xtask bpf-objects)",
            differ.join(", ")
        ));
    }
    fs::write(dir.join("MANIFEST"), manifest).map_err(|e| format!("MANIFEST: {e}"))?;
    println!(
        "bpf-objects: wrote {} objects and MANIFEST to {}",
        OBJECTS.len(),
        dir.display()
    );
    Ok(())
}
