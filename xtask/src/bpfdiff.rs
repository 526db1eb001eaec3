//! `cargo xtask bpf-diff [--update | --bare BUNDLE]`: the onic-bpf engine measured against the host kernel on XDP
//! programs nobody in this project wrote (docs/bpf-differential.md).
//!
//! This side gathers the programs and builds them; `bpf/examples/kernel_diff` loads and runs
//! them on both sides and compares. The programs:
//!
//! - Linux 6.1's BPF selftests `tools/testing/selftests/bpf/progs/*xdp*.c` and samples
//!   `samples/bpf/xdp*_kern.c` and `xdp*.bpf.c`, from Debian's `linux-source-6.1`, compiled
//!   unmodified with clang, against a `vmlinux.h` bpftool dumps from the running kernel's BTF,
//!   `bpf_helper_defs.h` generated from the same tree's `bpf.h` (its own `scripts/bpf_doc.py`), and
//!   one shim header of the kernel-internal names the samples' `*_kern.c` take from a configured
//!   kernel tree ([`KERN_SHIM`]). The samples' `.bpf.c` programs are linked with
//!   `xdp_sample.bpf.o` by `bpftool gen object`, as their Makefile does.
//! - xdp-tools' prebuilt objects: the `.o` files Debian's `libxdp1` and `xdp-tools` install, and
//!   the objects the xdp-tools programs carry inside their executables (skeletons), cut out of
//!   them byte for byte.
//! - One program of this project ([`OWN`]): none of the above writes to a ring buffer, so
//!   `ringbuf_records` does, and its records are compared (the object `bpf/objects` ships).
//!
//! A source that does not compile is listed with clang's first error, not left out. Everything
//! lives in `$ONIC_CACHE/bpfdiff/<key>` (default `/var/cache/onic-rs`), the key a hash of every
//! input: the package versions, clang's, the running kernel's BTF, the flags and the shim.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{cargo, kmod, qemu, qemucard, root, run};

/// Debian packages the job needs (installed when missing, as the VM test does).
const PACKAGES: [&str; 8] = [
    "linux-source-6.1",
    "bpftool",
    "clang",
    "llvm",
    "libbpf-dev",
    "xdp-tools",
    "python3",
    "xz-utils",
];

/// The source tarball `linux-source-6.1` installs.
const TARBALL: &str = "/usr/src/linux-source-6.1.tar.xz";
/// The tree's top directory inside the tarball.
const TOP: &str = "linux-source-6.1";

/// What is taken out of the tarball (one `tar` pass: the tarball is 130 MB of xz).
const EXTRACT: [&str; 8] = [
    "tools/testing/selftests/bpf/*.h",
    "tools/testing/selftests/bpf/progs/*",
    "tools/lib/bpf/*",
    "tools/include/*",
    "include/uapi/*",
    "scripts/bpf_doc.py",
    "samples/bpf/*",
    "arch/x86/include/uapi/*",
];

/// The kernel-internal names `samples/bpf/*_kern.c` take from a configured kernel tree (their
/// Makefile builds them inside one): short integer types, `__force`, `__packed`, the address
/// families, the byte-order macros, `likely`/`unlikely`, `min`/`max`, `memcpy`/`memset` as the
/// compiler's builtins and the VLAN header, and the UAPI headers the kernel's `if_vlan.h` brings
/// in along the way. Nothing here changes what a program does. (An empty `gnu/stubs-32.h` lets
/// a UAPI header that reaches into glibc compile for the BPF target, which is neither 32- nor
/// 64-bit x86 to glibc.)
const KERN_SHIM: &str = "\
/* onic-rs bpf-diff: what samples/bpf/*_kern.c expect from the kernel's internal headers. */
#include <linux/types.h>
#include <asm/byteorder.h>
#include <linux/tcp.h>
#include <linux/udp.h>
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s8 s8;
typedef __s16 s16;
typedef __s32 s32;
typedef __s64 s64;
#define __force
#define __packed __attribute__((packed))
#define AF_INET 2
#define AF_INET6 10
#define htons(x) __cpu_to_be16(x)
#define ntohs(x) __be16_to_cpu(x)
#define htonl(x) __cpu_to_be32(x)
#define ntohl(x) __be32_to_cpu(x)
#define cpu_to_be16(x) __cpu_to_be16(x)
#define cpu_to_be32(x) __cpu_to_be32(x)
#define be16_to_cpu(x) __be16_to_cpu(x)
#define be32_to_cpu(x) __be32_to_cpu(x)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define memcpy(d, s, n) __builtin_memcpy(d, s, n)
#define memset(d, c, n) __builtin_memset(d, c, n)
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};
";

/// Flags every program is compiled with; a call to an undeclared function is an error (clang
/// would otherwise emit a call to a kernel function that does not exist).
const CFLAGS: [&str; 7] = [
    "-g",
    "-O2",
    "-target",
    "bpf",
    "-D__TARGET_ARCH_x86",
    "-Werror=implicit-function-declaration",
    "-Wno-compare-distinct-pointer-types",
];

/// Samples built from `.bpf.c` and linked with `xdp_sample.bpf.o` (their Makefile's list).
const LINKED_SAMPLES: [&str; 6] = [
    "xdp_redirect_cpu",
    "xdp_redirect_map_multi",
    "xdp_redirect_map",
    "xdp_redirect",
    "xdp_monitor",
    "xdp_router_ipv4",
];

/// Selftests taken beside the `*xdp*.c` ones, for what they use: XDP programs with maps of maps,
/// and the tail call tests (tc programs that read nothing of their context, loaded as XDP).
const MORE_SELFTESTS: [&str; 8] = [
    "test_map_in_map",
    "test_map_in_map_invalid",
    "tailcall1",
    "tailcall2",
    "tailcall3",
    "tailcall4",
    "tailcall5",
    "tailcall6",
];

/// The programs of this project in the set, from `bpf/objects/` (`cargo xtask bpf-objects`
/// builds them): what no program of the others does.
const OWN: [&str; 1] = ["ringbuf_records"];

/// The expectations file the comparison checks against.
const EXPECT: &str = "bpf/examples/kernel_diff/expected.txt";
/// How long the bare-metal image may take over the set (TCG).
const BARE_TIMEOUT_S: u64 = 900;

/// FNV-1a, 64 bits (a cache key, not a security measure).
fn fnv64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The standard output of `cmd`, or why it failed (with its standard error).
fn stdout_of(cmd: &mut Command) -> Result<String, String> {
    let o = cmd.output().map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn version_of(package: &str) -> String {
    stdout_of(Command::new("dpkg-query").args(["-W", "-f=${Version}", package])).unwrap_or_default()
}

/// The cache key: everything the built set depends on.
fn cache_key() -> Result<String, String> {
    let mut k = String::new();
    for p in [
        "linux-source-6.1",
        "bpftool",
        "clang",
        "libbpf-dev",
        "xdp-tools",
        "libxdp1",
    ] {
        let _ = writeln!(k, "{p} {}", version_of(p));
    }
    k.push_str(&stdout_of(Command::new("clang").arg("--version"))?);
    let btf = fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default();
    let _ = writeln!(k, "btf {:016x}", fnv64(&btf));
    for o in OWN {
        let obj = fs::read(own_object(o)).unwrap_or_default();
        let _ = writeln!(k, "{o} {:016x}", fnv64(&obj));
    }
    let _ = writeln!(
        k,
        "{CFLAGS:?} {LINKED_SAMPLES:?} {EXTRACT:?} {KERN_SHIM} {MORE_SELFTESTS:?} recipe 1"
    );
    Ok(format!("{:016x}", fnv64(k.as_bytes())))
}

/// Runs `kernel_diff` after making sure the objects are built; with `--bare FILE`, only boots
/// the bare-metal image with bundle FILE (say, one changed by hand to see the image fail).
pub fn bpf_diff(args: &[String]) -> Result<(), String> {
    let update = match args {
        [] => false,
        [a] if a == "--update" => true,
        [a, file] if a == "--bare" => return bare_metal(PathBuf::from(file)),
        _ => return Err("usage: cargo xtask bpf-diff [--update | --bare BUNDLE]".into()),
    };
    let start = Instant::now();
    kmod::ensure_packages(&PACKAGES)?;
    let mut c = cargo();
    // Optimised: a debug build spends minutes copying and sorting the 65536-entry maps of
    // xdp-filter after every frame.
    c.args([
        "build",
        "-q",
        "--release",
        "-p",
        "onic-bpf",
        "--example",
        "kernel_diff",
    ]);
    run("cargo build --release -p onic-bpf --example kernel_diff", c)?;
    let runner = kmod::target_dir().join("release/examples/kernel_diff");
    let probe = stdout_of(Command::new(&runner).arg("--probe"))?;
    if probe.contains("SKIPPED") {
        print!("{probe}");
        return Ok(());
    }
    let dir = qemucard::cache_root().join("bpfdiff").join(cache_key()?);
    if dir.join("manifest.tsv").exists() {
        println!("bpf-diff: objects from {}", dir.display());
    } else {
        build_all(&dir)?;
    }
    let bundle = kmod::target_dir().join("bpfdiff").join("bundle.bin");
    if let Some(d) = bundle.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let mut c = Command::new(&runner);
    c.arg("--manifest")
        .arg(dir.join("manifest.tsv"))
        .arg("--expect")
        .arg(root().join(EXPECT))
        .arg("--bundle")
        .arg(&bundle);
    if update {
        c.arg("--update");
    }
    let r = run("kernel_diff (engine against BPF_PROG_TEST_RUN)", c);
    // The same set on bare metal, even when the comparison failed: its report says as much.
    let bare = bare_metal(bundle);
    println!("bpf-diff: {:.1} s in all", start.elapsed().as_secs_f64());
    r.and(bare)
}

/// Boots the bare-metal image with the bundle embedded: every program it can run must agree
/// with the kernel's outcome (or the host engine's, where that is a listed difference).
fn bare_metal(bundle: PathBuf) -> Result<(), String> {
    let o = qemu::Options {
        bpf_bundle: Some(bundle),
        timeout: std::time::Duration::from_secs(BARE_TIMEOUT_S),
        ..qemu::Options::default()
    };
    if qemu::qemu(&o)? == std::process::ExitCode::SUCCESS {
        Ok(())
    } else {
        Err("the bare-metal image's run of the differential set failed (its report above)".into())
    }
}

/// The CI job: the comparison against the expectations file.
pub fn ci_job() -> Result<(), String> {
    bpf_diff(&[])
}

/// The prebuilt object of [`OWN`] program `name`.
fn own_object(name: &str) -> PathBuf {
    root().join("bpf/objects").join(format!("{name}.o"))
}

/// Builds the whole set into `dir` (through a scratch directory renamed at the end, so an
/// interrupted build is never taken for a finished one).
fn build_all(dir: &Path) -> Result<(), String> {
    let start = Instant::now();
    let tmp = dir.with_extension("tmp");
    let _ = fs::remove_dir_all(&tmp);
    for d in ["src", "shim/bpf", "obj"] {
        fs::create_dir_all(tmp.join(d)).map_err(|e| format!("{}: {e}", tmp.display()))?;
    }
    extract(&tmp)?;
    shims(&tmp)?;
    let mut manifest = String::from("# id\tobject\tstatus (written by cargo xtask bpf-diff)\n");
    build_selftests(&tmp, &mut manifest)?;
    build_samples(&tmp, &mut manifest)?;
    xdp_tools(&tmp, &mut manifest)?;
    for o in OWN {
        let out = tmp.join("obj").join(format!("onic-{o}.o"));
        let r = fs::copy(own_object(o), &out)
            .map(|_| ())
            .map_err(|e| format!("{o}.o: {e}"));
        record(&mut manifest, &format!("onic/{o}"), &out, r);
    }
    fs::write(tmp.join("manifest.tsv"), &manifest).map_err(|e| format!("manifest: {e}"))?;
    let _ = fs::remove_dir_all(dir);
    fs::rename(&tmp, dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Builds for other inputs (an older kernel, clang or package) are not used again.
    if let Some(parent) = dir.parent() {
        for e in fs::read_dir(parent).into_iter().flatten().flatten() {
            if e.path() != dir {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    println!(
        "bpf-diff: built {} objects into {} in {:.1} s",
        manifest.lines().count() - 1,
        dir.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn extract(tmp: &Path) -> Result<(), String> {
    let mut c = Command::new("tar");
    c.arg("-xJf")
        .arg(TARBALL)
        .arg("-C")
        .arg(tmp.join("src"))
        .args(["--strip-components=1", "--wildcards"])
        .args(EXTRACT.map(|p| format!("{TOP}/{p}")));
    run(&format!("extract the BPF programs from {TARBALL}"), c)
}

/// `shim/vmlinux.h` (the running kernel's types), `shim/bpf/` (libbpf's headers of the tree and
/// the generated helper declarations), `shim/kern.h` ([`KERN_SHIM`]) and an empty `shim/gnu/stubs-32.h`.
fn shims(tmp: &Path) -> Result<(), String> {
    let shim = tmp.join("shim");
    let src = tmp.join("src");
    let vmlinux = stdout_of(Command::new("bpftool").args([
        "btf",
        "dump",
        "file",
        "/sys/kernel/btf/vmlinux",
        "format",
        "c",
    ]))?;
    let w = |p: PathBuf, b: &[u8]| fs::write(&p, b).map_err(|e| format!("{}: {e}", p.display()));
    w(shim.join("vmlinux.h"), vmlinux.as_bytes())?;
    let libbpf = src.join("tools/lib/bpf");
    for e in fs::read_dir(&libbpf).map_err(|e| format!("{}: {e}", libbpf.display()))? {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.extension().is_some_and(|x| x == "h") {
            let name = p.file_name().unwrap_or_default();
            fs::copy(&p, shim.join("bpf").join(name)).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    let defs = stdout_of(
        Command::new("python3")
            .arg(src.join("scripts/bpf_doc.py"))
            .args(["--header", "--file"])
            .arg(src.join("include/uapi/linux/bpf.h")),
    )?;
    w(shim.join("bpf/bpf_helper_defs.h"), defs.as_bytes())?;
    fs::create_dir_all(shim.join("gnu")).map_err(|e| format!("{}: {e}", shim.display()))?;
    w(shim.join("gnu/stubs-32.h"), b"")?;
    w(shim.join("kern.h"), KERN_SHIM.as_bytes())
}

fn multiarch_include() -> String {
    let m = stdout_of(Command::new("gcc").arg("-print-multiarch")).unwrap_or_default();
    let m = m.trim();
    format!(
        "-I/usr/include/{}",
        if m.is_empty() { "x86_64-linux-gnu" } else { m }
    )
}

/// Compiles `src` into `out` with [`CFLAGS`] and `extra`; the error is clang's first error line.
fn clang(src: &Path, out: &Path, extra: &[String]) -> Result<(), String> {
    let o = Command::new("clang")
        .args(CFLAGS)
        .args(extra)
        .arg(multiarch_include())
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(out)
        .output()
        .map_err(|e| format!("clang: {e}"))?;
    if o.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&o.stderr);
    let first = err
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or("clang failed");
    Err(first
        .rsplit_once(": error: ")
        .map_or(first.to_string(), |(at, m)| {
            format!("{}: {m}", at.rsplit('/').next().unwrap_or(at))
        }))
}

/// One manifest line: `id`, the object (relative to the manifest: `obj/<name>`), `ok` or why
/// there is none.
fn record(manifest: &mut String, id: &str, out: &Path, r: Result<(), String>) {
    let status = r.err().unwrap_or_else(|| "ok".into()).replace(['\t', '\n'], " ");
    let name = out.file_name().and_then(|n| n.to_str()).unwrap_or("?");
    let _ = writeln!(manifest, "{id}\tobj/{name}\t{status}");
}

/// The sources in `dir` whose names satisfy `keep`, sorted.
fn sources(dir: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>, String> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
        .collect();
    v.sort();
    Ok(v)
}

fn inc(p: &Path) -> String {
    format!("-I{}", p.display())
}

/// The selftests, with the flags of their Makefile (`-mcpu=v3`, the tree's UAPI headers).
fn build_selftests(tmp: &Path, manifest: &mut String) -> Result<(), String> {
    let src = tmp.join("src");
    let progs = src.join("tools/testing/selftests/bpf/progs");
    let extra = [
        "-mcpu=v3".to_string(),
        "-mlittle-endian".to_string(),
        inc(&tmp.join("shim")),
        inc(&src.join("tools/testing/selftests/bpf")),
        inc(&src.join("tools/include/uapi")),
    ];
    let wanted = |n: &str| {
        let stem = n.strip_suffix(".c");
        stem.is_some_and(|s| s.contains("xdp") || MORE_SELFTESTS.contains(&s))
    };
    for s in sources(&progs, wanted)? {
        let stem = s.file_stem().and_then(|n| n.to_str()).unwrap_or("?");
        let out = tmp.join("obj").join(format!("selftests-{stem}.o"));
        record(
            manifest,
            &format!("selftests/{stem}"),
            &out,
            clang(&s, &out, &extra),
        );
    }
    Ok(())
}

/// The samples: `*_kern.c` against the tree's `include/` plus [`KERN_SHIM`]; `*.bpf.c` against
/// `vmlinux.h`, linked with `xdp_sample.bpf.o` where their Makefile links them.
fn build_samples(tmp: &Path, manifest: &mut String) -> Result<(), String> {
    let src = tmp.join("src");
    let dir = src.join("samples/bpf");
    let obj = tmp.join("obj");
    let kern = [
        "-include".to_string(),
        tmp.join("shim/kern.h").display().to_string(),
        inc(&tmp.join("shim")),
        inc(&src.join("include")),
    ];
    for s in sources(&dir, |n| n.starts_with("xdp") && n.ends_with("_kern.c"))? {
        let stem = s.file_stem().and_then(|n| n.to_str()).unwrap_or("?");
        let out = obj.join(format!("samples-{stem}.o"));
        record(manifest, &format!("samples/{stem}"), &out, clang(&s, &out, &kern));
    }
    let modern = [
        inc(&tmp.join("shim")),
        inc(&src.join("include")),
        inc(&dir),
        inc(&src.join("tools/include")),
    ];
    let lib = obj.join("xdp_sample.bpf.o");
    let lib_ok = clang(&dir.join("xdp_sample.bpf.c"), &lib, &modern);
    for s in sources(&dir, |n| {
        n.starts_with("xdp") && n.ends_with(".bpf.c") && n != "xdp_sample.bpf.c"
    })? {
        let name = s.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let stem = name.trim_end_matches(".bpf.c");
        let unlinked = obj.join(format!("{stem}.bpf.o"));
        let out = obj.join(format!("samples-{stem}.o"));
        let r = clang(&s, &unlinked, &modern).and_then(|()| {
            if !LINKED_SAMPLES.contains(&stem) {
                return fs::copy(&unlinked, &out).map(|_| ()).map_err(|e| e.to_string());
            }
            lib_ok.clone().map_err(|e| format!("xdp_sample.bpf.c: {e}"))?;
            stdout_of(
                Command::new("bpftool")
                    .args(["gen", "object"])
                    .arg(&out)
                    .arg(&unlinked)
                    .arg(&lib),
            )
            .map(|_| ())
        });
        record(manifest, &format!("samples/{stem}"), &out, r);
    }
    Ok(())
}

/// xdp-tools: the installed `.o` files of `libxdp1` and `xdp-tools`, and the BPF objects inside
/// the xdp-tools executables (each cut out at its ELF header, up to the end of its section
/// header table), each object once.
fn xdp_tools(tmp: &Path, manifest: &mut String) -> Result<(), String> {
    let mut files = String::new();
    for p in ["libxdp1", "xdp-tools"] {
        files.push_str(&stdout_of(Command::new("dpkg").args(["-L", p]))?);
    }
    let mut seen = Vec::new();
    let obj = tmp.join("obj");
    let mut save = |id: String, bytes: &[u8], manifest: &mut String| -> Result<(), String> {
        let h = fnv64(bytes);
        if seen.contains(&h) {
            return Ok(());
        }
        seen.push(h);
        let out = obj.join(format!("{}.o", id.replace('/', "-")));
        fs::write(&out, bytes).map_err(|e| format!("{}: {e}", out.display()))?;
        record(manifest, &id, &out, Ok(()));
        Ok(())
    };
    let mut lines: Vec<&str> = files.lines().collect();
    lines.sort_unstable();
    for f in lines.iter().filter(|f| f.ends_with(".o")) {
        let bytes = fs::read(f).map_err(|e| format!("{f}: {e}"))?;
        let stem = Path::new(f).file_stem().and_then(|n| n.to_str()).unwrap_or("?");
        save(format!("xdp-tools/{stem}"), &bytes, manifest)?;
    }
    for f in lines.iter().filter(|f| f.starts_with("/usr/sbin/")) {
        let bytes = fs::read(f).map_err(|e| format!("{f}: {e}"))?;
        let exe = Path::new(f).file_name().and_then(|n| n.to_str()).unwrap_or("?");
        for (i, o) in embedded_objects(&bytes).into_iter().enumerate() {
            save(format!("xdp-tools/{exe}.{i}"), o, manifest)?;
        }
    }
    Ok(())
}

/// The BPF relocatable objects (64-bit little-endian ELF, machine 247) inside `b`.
fn embedded_objects(b: &[u8]) -> Vec<&[u8]> {
    const MAGIC: &[u8] = b"\x7fELF\x02\x01\x01";
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = b[at..].windows(MAGIC.len()).position(|w| w == MAGIC) {
        let s = at + i;
        at = s + 1;
        let Some(h) = b.get(s..s + 64) else {
            break;
        };
        let u16_at = |o: usize| usize::from(u16::from_le_bytes([h[o], h[o + 1]]));
        if u16_at(16) != 1 || u16_at(18) != 247 {
            continue;
        }
        let shoff = u64::from_le_bytes(h[40..48].try_into().unwrap_or_default());
        let end = usize::try_from(shoff)
            .ok()
            .and_then(|o| o.checked_add(u16_at(58) * u16_at(60)))
            .and_then(|n| s.checked_add(n));
        if let Some(obj) = end.and_then(|e| b.get(s..e)) {
            out.push(obj);
            at = s + obj.len();
        }
    }
    out
}
