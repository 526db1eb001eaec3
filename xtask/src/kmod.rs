//! `cargo xtask kmod`: the kernel module `onic.ko` for Debian's kernels.
//!
//! 1. The Rust side (`os-linux`, feature `kernel`) as a static library for `x86_64-unknown-none`,
//!    core and alloc rebuilt with kernel-compatible flags (`-Zbuild-std`, `RUSTC_BOOTSTRAP=1` on
//!    the pinned stable toolchain); only the crate's object member is kept (`onic_rust.bin`),
//!    so `memcpy` & co. resolve to the kernel's and no compiler_builtins code comes along.
//! 2. Debian's headers for each kernel, resolved at run time from the meta packages
//!    (`apt-cache depends`), downloaded with `apt-get download` and unpacked with `dpkg -x` into
//!    `target/vm/<kernel>/root` (nothing is installed: the 6.12 headers package would drag the
//!    kernel image onto the host).
//! 3. The C declarations of the structs and constants shared with the Rust side, generated from
//!    `os-linux/src/abi.rs` into the build directory (cbindgen, plus `static_assert`s of rustc's
//!    layout; see `ffi.rs`).
//! 4. Kbuild in a per-kernel copy of `os-linux/kernel/`, then the checks: no GOT relocations in
//!    the Rust object, only relocation types the module loader accepts in `onic.ko`, no modpost
//!    error (unresolved symbols), no warning at all in the build output (objtool included), and
//!    objtool really ran over the Rust code.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{cargo, root, run, run_sh};

/// A Debian kernel the module is built and tested for. The only place kernel package names
/// appear: the ABI (e.g. `6.1.0-57-amd64`) is resolved from these meta packages at run time.
pub struct Kernel {
    /// What `--kernel` takes.
    pub name: &'static str,
    /// Meta package depending on the current headers of that series.
    pub headers_meta: &'static str,
    /// Meta package depending on the matching image.
    pub image_meta: &'static str,
    /// What the VM test adds to this kernel's command line: 6.12 runs the model behind the
    /// kernel DMA API with every buffer bounced (`swiotlb=force`, 256 MiB of bounce slots: the
    /// default 64 MiB was full once four AF_XDP sockets had each mapped a 16 MiB UMEM for zero
    /// copy), where a missing or wrong sync corrupts data, and samples slab objects into KFENCE's guarded pages every 10 ms (6.12's
    /// CONFIG_KFENCE, off by default there; 6.1 has none): an access out of such an object or
    /// after its free faults at once and is reported.
    pub vm_args: &'static str,
    /// What the VM test on the PCI card (`vm-test --card pci`) adds instead: the 6.12 boot puts
    /// the card behind QEMU's Intel IOMMU in strict mode, so that a device access to an address
    /// the driver did not map, or unmapped, faults (DMAR) at once; 6.1 bounces every mapping
    /// through swiotlb, so a missing or wrong sync corrupts data. Its bounce pool is 256 MiB
    /// (131072 slots of 2 KiB): the card's 16 RX rings of 1023 pages alone take the default
    /// 64 MiB, and with it full every later mapping fails (seen: "swiotlb buffer is full", no
    /// frame moved).
    pub pci_args: &'static str,
    /// Whether the PCI card boot adds QEMU's `intel-iommu` device.
    pub pci_iommu: bool,
}

/// Debian 12's own kernel (6.1) and the 6.12 series Debian 12 also ships.
pub const KERNELS: [Kernel; 2] = [
    Kernel {
        name: "6.1",
        headers_meta: "linux-headers-amd64",
        image_meta: "linux-image-amd64",
        vm_args: "",
        pci_args: "swiotlb=131072,force",
        pci_iommu: false,
    },
    Kernel {
        name: "6.12",
        headers_meta: "linux-headers-6.12-amd64",
        image_meta: "linux-image-6.12-amd64",
        vm_args: "swiotlb=131072,force onic_sim_dma_api kfence.sample_interval=10",
        pci_args: "intel_iommu=on iommu.strict=1 kfence.sample_interval=10",
        pci_iommu: true,
    },
];

/// Host packages the module build and the VM test need (Debian names).
pub const HOST_PACKAGES: [&str; 21] = [
    "iperf3",          // the VM test's load
    "iputils-ping",    // ping -f and payload patterns (busybox's ping has neither)
    "xdp-tools",       // xdp-loader, xdp-filter, xdp-bench (with libxdp's BPF objects)
    "build-essential", // make, gcc-12 (the headers' compiler)
    "bc",
    "libelf1", // objtool / modpost from linux-kbuild
    "dwarves", // pahole, for the modules' BTF
    "clang",   // XDP programs
    "llvm",
    "lld",
    "libbpf-dev",      // bpf_helpers.h, libbpf.a for the device-bound XDP loader
    "libelf-dev",      // libelf.a (the loader is linked statically)
    "zlib1g-dev",      // libz.a
    "libxdp-dev",      // xdp/xsk.h, libxdp.a for the AF_XDP program (onic_xsk)
    "libzstd-dev",     // libzstd.a (libelf's compression, for the static onic_xsk)
    "busybox-static",  // the initramfs userland
    "cpio",            // the initramfs archive
    "iproute2",        // ip (copied into the initramfs)
    "ethtool",         // ethtool (copied into the initramfs)
    "qemu-system-x86", // the VM
    "pciutils",        // lspci (copied into the initramfs)
];

/// The cargo target directory (`CARGO_TARGET_DIR` or `target/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

/// Where downloads, unpacked kernels, module builds and initramfs images live.
pub fn vm_root() -> PathBuf {
    target_dir().join("vm")
}

fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed ({})", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Installs the missing host packages (apt-get, as root; CI runs as root).
pub fn ensure_host_packages() -> Result<(), String> {
    ensure_packages(&HOST_PACKAGES)
}

/// Installs those of `packages` (Debian names) that are not installed.
pub fn ensure_packages(packages: &[&str]) -> Result<(), String> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${db:Status-Status}", p])
                .output()
                .is_ok_and(|o| o.status.success() && o.stdout == b"installed")
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    apt_update()?;
    run_waiting_for_lock(&format!("apt-get install {}", missing.join(" ")), || {
        let mut c = apt_get();
        c.args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing);
        c
    })
}

pub fn apt_update() -> Result<(), String> {
    run_waiting_for_lock("apt-get update", || {
        let mut c = apt_get();
        c.args(["update", "-q"]);
        c
    })
}

/// How long a package-manager command waits for another one (unattended-upgrades, a second
/// apt-get) to release its locks before giving up.
const APT_LOCK_WAIT: Duration = Duration::from_secs(600);

/// Pause between two attempts while a lock is held.
const APT_LOCK_RETRY: Duration = Duration::from_secs(10);

/// `apt-get`, non-interactive, waiting up to [`APT_LOCK_WAIT`] for dpkg's frontend lock.
pub fn apt_get() -> Command {
    let mut c = Command::new("apt-get");
    c.env("DEBIAN_FRONTEND", "noninteractive")
        .arg("-o")
        .arg(format!("DPkg::Lock::Timeout={}", APT_LOCK_WAIT.as_secs()));
    c
}

/// Whether a package manager's error output says another process holds a lock it needs.
fn lock_held(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    [
        "could not get lock",
        "unable to acquire",
        "unable to lock",
        "is locked by another process",
    ]
    .iter()
    .any(|m| s.contains(m))
}

/// Runs a package-manager command as [`run`] does; while it fails because another process holds
/// an apt or dpkg lock (the lists lock of `apt-get update` is not covered by
/// `DPkg::Lock::Timeout`), waits and tries again, for up to [`APT_LOCK_WAIT`] in all.
pub fn run_waiting_for_lock(step: &str, make: impl Fn() -> Command) -> Result<(), String> {
    let deadline = Instant::now() + APT_LOCK_WAIT;
    loop {
        let start = Instant::now();
        println!("==> {step}");
        let out = make()
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("{step}: cannot start: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprint!("{stderr}");
        let ok = out.status.success();
        println!(
            "<== {step}: {} in {:.1} s",
            if ok { "ok" } else { "FAILED" },
            start.elapsed().as_secs_f64()
        );
        if ok {
            return Ok(());
        }
        if !lock_held(&stderr) || Instant::now() >= deadline {
            return Err(format!("{step} failed ({})", out.status));
        }
        println!(
            "    another package manager holds a lock; trying again in {} s",
            APT_LOCK_RETRY.as_secs()
        );
        std::thread::sleep(APT_LOCK_RETRY);
    }
}

/// The `Depends:` of a package, as apt-cache prints them.
fn depends(pkg: &str) -> Result<Vec<String>, String> {
    let text = output(Command::new("apt-cache").args(["depends", pkg]))?;
    Ok(text
        .lines()
        .filter_map(|l| l.trim().trim_start_matches('|').strip_prefix("Depends: "))
        .map(|s| s.trim().to_string())
        .collect())
}

/// The ABI-versioned package a meta package depends on (`prefix` + ABI), refreshing the package
/// lists once if needed.
fn resolve(meta: &str, prefix: &str) -> Result<String, String> {
    let find = || -> Result<Option<String>, String> {
        Ok(depends(meta)
            .unwrap_or_default()
            .into_iter()
            .find(|d| d.starts_with(prefix) && !d.ends_with("-unsigned")))
    };
    if let Some(p) = find()? {
        return Ok(p);
    }
    apt_update()?;
    find()?.ok_or_else(|| format!("apt-cache depends {meta}: no {prefix}* dependency"))
}

/// A resolved kernel: its ABI name, where its headers and image are.
pub struct Resolved {
    pub kernel: &'static Kernel,
    /// e.g. `6.1.0-57-amd64`, `6.12.117+deb12-amd64`.
    pub abi: String,
    /// `target/vm/<name>`.
    pub dir: PathBuf,
    /// The headers tree (`KDIR`).
    pub kdir: PathBuf,
    /// The kernel image.
    pub vmlinuz: PathBuf,
}

/// Extracts the module `rel` (a path under the image's `kernel/` tree, e.g. `net/core/pktgen.ko`)
/// from the downloaded image package of a packaged kernel into `<dir>/modules`, decompressed;
/// returns its path.
pub fn packaged_module(r: &Resolved, rel: &str) -> Result<PathBuf, String> {
    let out = r.dir.join("modules");
    fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let deb = downloaded(&r.dir.join("debs"), &format!("linux-image-{}", r.abi))
        .ok_or_else(|| format!("linux-image-{}: download missing", r.abi))?;
    let name = Path::new(rel)
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("bad module path {rel}"))?
        .to_string();
    let sh = format!(
        "dpkg-deb --fsys-tarfile '{deb}' | tar -x -O --wildcards './lib/modules/*/kernel/{rel}*' > '{o}.raw' && \
         if xz -t '{o}.raw' 2>/dev/null; then xz -dc '{o}.raw' > '{o}'; else mv '{o}.raw' '{o}'; fi; rm -f '{o}.raw'; test -s '{o}'",
        deb = deb.display(),
        o = out.join(&name).display()
    );
    run_sh(&format!("extract {rel} from linux-image-{}", r.abi), &sh)?;
    Ok(out.join(name))
}

/// Resolves the ABI of a packaged kernel, downloads and unpacks headers (+ common part and
/// kbuild) and the image.
pub fn fetch_packaged(k: &'static Kernel) -> Result<Resolved, String> {
    let start = Instant::now();
    let (abi, image, pkgs) = packages(k)?;
    let dir = vm_root().join(k.name);
    let debs = dir.join("debs");
    let rootfs = dir.join("root");
    fs::create_dir_all(&debs).map_err(|e| format!("{}: {e}", debs.display()))?;
    let all: Vec<String> = pkgs.iter().cloned().chain([image.clone()]).collect();
    let wanted: Vec<&String> = all.iter().filter(|p| downloaded(&debs, p).is_none()).collect();
    if !wanted.is_empty() {
        run_waiting_for_lock(&format!("apt-get download ({} packages)", wanted.len()), || {
            let mut c = apt_get();
            c.current_dir(&debs).arg("download").args(&wanted);
            c
        })?;
    }
    let stamp = rootfs.join(format!(".unpacked-{abi}"));
    if !stamp.exists() {
        unpack(&debs, &rootfs, &abi, &pkgs, &image)?;
        fs::write(&stamp, "").map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    let kdir = rootfs.join(format!("usr/src/linux-headers-{abi}"));
    let vmlinuz = rootfs.join(format!("boot/vmlinuz-{abi}"));
    check_unpacked(&abi, &kdir, &vmlinuz)?;
    println!(
        "kernel {}: {abi} (headers {}, image {}) ready in {:.1} s",
        k.name,
        kdir.display(),
        vmlinuz.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(Resolved {
        kernel: k,
        abi,
        dir,
        kdir,
        vmlinuz,
    })
}

/// The packages of kernel `k`: its ABI, the image package, and the header packages (the
/// flavour's, and the common part and kbuild it depends on).
fn packages(k: &Kernel) -> Result<(String, String, Vec<String>), String> {
    let headers = resolve(k.headers_meta, "linux-headers-")?;
    let abi = headers.trim_start_matches("linux-headers-").to_string();
    if !abi.starts_with(k.name) {
        return Err(format!(
            "{} resolves to {abi}, not a {} kernel",
            k.headers_meta, k.name
        ));
    }
    let image = resolve(k.image_meta, "linux-image-")?;
    if image != format!("linux-image-{abi}") {
        return Err(format!(
            "{} ({image}) does not match the headers' ABI {abi}",
            k.image_meta
        ));
    }
    let mut pkgs = vec![headers.clone()];
    pkgs.extend(
        depends(&headers)?
            .into_iter()
            .filter(|d| d.starts_with("linux-headers-") || d.starts_with("linux-kbuild-")),
    );
    Ok((abi, image, pkgs))
}

/// The downloaded `.deb` of package `pkg` in `debs`, if there is one.
fn downloaded(debs: &Path, pkg: &str) -> Option<PathBuf> {
    fs::read_dir(debs).ok()?.flatten().map(|e| e.path()).find(|f| {
        f.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&format!("{pkg}_")) && n.ends_with(".deb"))
    })
}

/// Unpacks the header packages `pkgs` and the kernel of package `image` into a fresh `rootfs`,
/// and points the headers' Makefile at the common tree there.
fn unpack(debs: &Path, rootfs: &Path, abi: &str, pkgs: &[String], image: &str) -> Result<(), String> {
    let _ = fs::remove_dir_all(rootfs);
    fs::create_dir_all(rootfs).map_err(|e| format!("{}: {e}", rootfs.display()))?;
    for p in pkgs {
        let deb = downloaded(debs, p).ok_or_else(|| format!("{p}: download missing"))?;
        let mut c = Command::new("dpkg");
        c.arg("-x").arg(&deb).arg(rootfs);
        run(&format!("dpkg -x {p}"), c)?;
    }
    // Only the kernel itself from the image package (not its modules).
    let deb = downloaded(debs, image).ok_or_else(|| format!("{image}: download missing"))?;
    run_sh(
        &format!("unpack the kernel of {image}"),
        &format!(
            "dpkg-deb --fsys-tarfile '{}' | tar -x -C '{}' --wildcards './boot/vmlinuz-*'",
            deb.display(),
            rootfs.display()
        ),
    )?;
    // The flavour's Makefile includes the common tree by absolute path; point it into ours.
    let mk = rootfs.join(format!("usr/src/linux-headers-{abi}/Makefile"));
    let text = fs::read_to_string(&mk).map_err(|e| format!("{}: {e}", mk.display()))?;
    let fixed = text.replace(
        "include /usr/src/",
        &format!("include {}/usr/src/", rootfs.display()),
    );
    fs::write(&mk, fixed).map_err(|e| format!("{}: {e}", mk.display()))
}

/// The unpacked kernel is usable: a `.config` and an image, and functions padded as the Rust
/// object is built.
fn check_unpacked(abi: &str, kdir: &Path, vmlinuz: &Path) -> Result<(), String> {
    let config = fs::read_to_string(kdir.join(".config"))
        .map_err(|e| format!("{abi}: no kernel .config after unpacking: {e}"))?;
    if !vmlinuz.exists() {
        return Err(format!("{abi}: no kernel image after unpacking"));
    }
    if let Some(n) = config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_FUNCTION_PADDING_BYTES="))
    {
        if n.trim() != FUNCTION_PADDING.to_string() {
            return Err(format!(
                "{abi} pads functions with {n} bytes; the Rust object is built with {FUNCTION_PADDING}"
            ));
        }
    }
    Ok(())
}

/// Bytes of NOP padding in front of every Rust function, as kernels with `CONFIG_CALL_PADDING`
/// (6.12) put in front of every C function: with call-depth tracking (retbleed=stuff) the kernel
/// writes an accounting thunk into the 16 bytes before each call target in module text, and
/// objtool (`--prefix=16`) marks them with `__pfx_` symbols. Kernels without it (6.1) never look
/// at those bytes. Checked against each kernel's `CONFIG_FUNCTION_PADDING_BYTES`.
const FUNCTION_PADDING: u32 = 16;

/// Flags of the Rust object: the kernel's code model, no PIC/GOT, external retpoline and return
/// thunks (objtool and the kernel patch them), ENDBR at indirect-branch targets (6.12 is built
/// with IBT), and the function padding above.
const KERNEL_RUSTFLAGS: &str = "-C relocation-model=static -C code-model=kernel -C relro-level=off \
     -Zretpoline-external-thunk -Zfunction-return=thunk-extern -Zcf-protection=branch \
     -Zpatchable-function-entry=16,16";

/// Builds the Rust static library and extracts the crate's object member. The object is the same
/// for every kernel.
pub fn build_rust_object() -> Result<PathBuf, String> {
    let tdir = target_dir().join("kmod");
    let mut c = cargo();
    for v in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"] {
        c.env_remove(v);
    }
    c.env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTFLAGS", KERNEL_RUSTFLAGS)
        .args([
            "rustc",
            "-p",
            "onic-linux",
            "--profile",
            "kmod",
            "--features",
            "kernel",
            "--target",
            "x86_64-unknown-none",
            "--crate-type",
            "staticlib",
            "-Zbuild-std=core,alloc",
            "--target-dir",
        ])
        .arg(&tdir);
    run(
        "build the module's Rust side (onic-linux, staticlib, -Zbuild-std=core,alloc)",
        c,
    )?;
    let lib = tdir.join("x86_64-unknown-none/kmod/libonic_linux.a");
    let members = output(Command::new("ar").arg("t").arg(&lib))?;
    let member = members
        .lines()
        .find(|m| m.starts_with("onic_linux-"))
        .ok_or_else(|| format!("{}: no onic_linux object member in {members}", lib.display()))?;
    let bin = tdir.join("onic_rust.bin");
    let bytes = Command::new("ar")
        .arg("p")
        .arg(&lib)
        .arg(member)
        .output()
        .map_err(|e| format!("ar p: {e}"))?;
    if !bytes.status.success() || bytes.stdout.is_empty() {
        return Err(format!("ar p {} {member} failed", lib.display()));
    }
    fs::write(&bin, &bytes.stdout).map_err(|e| format!("{}: {e}", bin.display()))?;
    check_rust_object(&bin)?;
    crate::panicpaths::check(&bin)?;
    Ok(bin)
}

/// Relocation types x86-64's module loader applies (arch/x86/kernel/module.c).
const LOADER_RELOCS: [&str; 7] = [
    "R_X86_64_NONE",
    "R_X86_64_64",
    "R_X86_64_32",
    "R_X86_64_32S",
    "R_X86_64_PC32",
    "R_X86_64_PLT32",
    "R_X86_64_PC64",
];

/// Relocation type counts of an object (`readelf -rW`).
fn reloc_types(obj: &Path) -> Result<Vec<(String, usize)>, String> {
    let text = output(Command::new("readelf").arg("-rW").arg(obj))?;
    let mut counts: Vec<(String, usize)> = Vec::new();
    for t in text.split_whitespace().filter(|w| w.starts_with("R_X86_64_")) {
        match counts.iter_mut().find(|(n, _)| n == t) {
            Some((_, c)) => *c += 1,
            None => counts.push((t.to_string(), 1)),
        }
    }
    Ok(counts)
}

fn check_rust_object(obj: &Path) -> Result<(), String> {
    let types = reloc_types(obj)?;
    let summary: Vec<String> = types.iter().map(|(t, c)| format!("{t} x{c}")).collect();
    println!("Rust object relocations: {}", summary.join(", "));
    if let Some((t, _)) = types.iter().find(|(t, _)| t.contains("GOT")) {
        return Err(format!(
            "{}: GOT relocation {t} in the Rust object",
            obj.display()
        ));
    }
    let undef = output(Command::new("nm").arg("-u").arg(obj))?;
    let names: Vec<&str> = undef.split_whitespace().filter(|w| *w != "U").collect();
    println!("Rust object needs: {}", names.join(" "));
    Ok(())
}

/// Builds onic.ko for one kernel from `rust_obj` and checks it. Returns the module's path.
pub fn build_module(r: &Resolved, rust_obj: &Path) -> Result<PathBuf, String> {
    let build = r.dir.join("build");
    let _ = fs::remove_dir_all(&build);
    fs::create_dir_all(&build).map_err(|e| format!("{}: {e}", build.display()))?;
    let src = root().join("os-linux/kernel");
    for e in fs::read_dir(&src)
        .map_err(|e| format!("{}: {e}", src.display()))?
        .flatten()
    {
        fs::copy(e.path(), build.join(e.file_name()))
            .map_err(|e2| format!("{}: {e2}", e.path().display()))?;
    }
    fs::copy(rust_obj, build.join("onic_rust.bin")).map_err(|e| format!("{}: {e}", rust_obj.display()))?;
    crate::ffi::generate_headers(&build)?;

    let start = Instant::now();
    println!("==> kbuild onic.ko for {} ({})", r.kernel.name, r.abi);
    let out = Command::new("make")
        .current_dir(&build)
        .arg(format!("KDIR={}", r.kdir.display()))
        .arg("V=1")
        .output()
        .map_err(|e| format!("cannot run make: {e}"))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    fs::write(r.dir.join("kbuild.log"), &log).map_err(|e| format!("kbuild.log: {e}"))?;
    // The commands themselves are long; show kbuild's messages (V=1 prints both).
    for l in log.lines().filter(|l| l.len() < 300) {
        println!("{l}");
    }
    println!(
        "<== kbuild onic.ko for {}: {} in {:.1} s",
        r.kernel.name,
        if out.status.success() { "ok" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    if !out.status.success() {
        return Err(format!(
            "kbuild for {} failed (log: {})",
            r.abi,
            r.dir.join("kbuild.log").display()
        ));
    }
    check_module(r, &build, &log)?;
    Ok(build.join("onic.ko"))
}

fn check_module(r: &Resolved, build: &Path, log: &str) -> Result<(), String> {
    let ko = build.join("onic.ko");
    // No warnings of any kind: compiler, objtool, modpost.
    // (V=1 also prints the commands, which are full of -W flags; match messages only.)
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains(": warning:")
                || l.contains(": error:")
                || l.starts_with("WARNING:")
                || l.starts_with("ERROR:")
                || l.contains("undefined!")
        })
        .collect();
    if !warnings.is_empty() {
        return Err(format!(
            "kbuild for {} printed warnings:\n{}",
            r.abi,
            warnings.join("\n")
        ));
    }
    // objtool ran over the Rust code: per object on 6.1 (the custom rule), over the linked module
    // object on kernels with IBT (objtool --link on onic.o).
    let objtool_on_rust = log
        .lines()
        .any(|l| l.contains("objtool") && (l.ends_with("onic_rust.o") || l.ends_with("/onic.o")));
    if !objtool_on_rust {
        return Err(format!("objtool did not run over the Rust object for {}", r.abi));
    }
    // On kernels that pad functions, objtool marked the Rust functions' padding too.
    let config = fs::read_to_string(r.kdir.join(".config")).unwrap_or_default();
    if config.lines().any(|l| l == "CONFIG_CALL_PADDING=y") {
        let syms = output(Command::new("nm").arg(&ko))?;
        if !syms.lines().any(|l| l.ends_with(" __pfx_onic_rs_open")) {
            return Err(format!(
                "{}: the Rust functions have no __pfx_ padding symbols",
                r.abi
            ));
        }
    }
    let types = reloc_types(&ko)?;
    let bad: Vec<&String> = types
        .iter()
        .map(|(t, _)| t)
        .filter(|t| !LOADER_RELOCS.contains(&t.as_str()))
        .collect();
    if !bad.is_empty() {
        return Err(format!(
            "onic.ko for {} has relocation types the loader rejects: {bad:?}",
            r.abi
        ));
    }
    println!(
        "module checks for {}: no GOT relocations, loader-accepted relocation types only, \
         modpost resolved every symbol, objtool ran and printed nothing, no warnings",
        r.kernel.name
    );
    Ok(())
}

/// `--kernel X` (default all).
pub fn parse_kernel(args: &[String]) -> Result<String, String> {
    let mut which = "all".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => {
                which = it.next().cloned().ok_or("--kernel takes 6.1, 6.12 or all")?;
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(which)
}

#[cfg(test)]
mod lock_tests {
    use super::lock_held;

    #[test]
    fn apt_and_dpkg_lock_messages_are_recognized() {
        for held in [
            "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)\nE: Unable to lock directory /var/lib/apt/lists/",
            "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 77 (unattended-upgr)",
            "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?",
            "debconf: DbDriver \"config\": /var/cache/debconf/config.dat is locked by another process: Resource temporarily unavailable",
        ] {
            assert!(lock_held(held), "{held}");
        }
        assert!(!lock_held("E: Unable to locate package nosuchpackage"));
        assert!(!lock_held(
            "E: Failed to fetch http://deb.debian.org/ 404 Not Found"
        ));
    }
}
