//! `cargo xtask qemu-card`: Debian 12's QEMU with the OpenNIC card (`onic-card`) built in.
//!
//! 1. The source is Debian's own package: a `deb-src` entry is added for the suites the machine
//!    already uses (`/etc/apt/sources.list.d/onic-rs-deb-src.sources`), `apt-get source
//!    --download-only qemu` fetches it and `dpkg-source -x` unpacks it with Debian's patches
//!    applied (they also switch off the edk2 blobs the dfsg source lacks).
//! 2. `qemu-card/qemu/onic-card.patch` hooks the device into `hw/net` (Kconfig, meson) and
//!    `qemu-card/qemu/onic_card.c` is copied beside it.
//! 3. `configure --target-list=x86_64-softmmu --without-default-features --disable-docs
//!    --disable-install-blobs --enable-plugins`, then `ninja qemu-system-x86_64`.
//!
//! The build lives outside the clone, in `$ONIC_CACHE` (default `/var/cache/onic-rs`), in a
//! directory named after the source version and a hash of the patch and the configure flags: a machine that built it
//! once reuses it, and a new source or patch builds afresh. The parts that change with the
//! project are refreshed on every run and only relinked or recompiled by ninja: the model
//! (`libonic_qemu_card.a`, release build of `qemu-card`), its generated headers (`onic_model.h`
//! by cbindgen, `onic_model_ids.h` by `examples/c_constants.rs`) and `onic_card.c`, all in
//! `hw/net/` of the cached tree.
//!
//! The binary runs with firmware from Debian's packages (`-L`, [`FIRMWARE_DIRS`]): the dfsg
//! source ships none.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::kmod::{self, target_dir};
use crate::{cargo, ffi, root, run};

/// Debian packages the build needs (and `dpkg-source`, `apt-get source`).
const BUILD_PACKAGES: [&str; 10] = [
    "dpkg-dev",
    "ninja-build",
    "meson",
    "pkg-config",
    "libglib2.0-dev",
    "libpixman-1-dev",
    "libfdt-dev",
    "flex",
    "bison",
    "qemu-system-data", // linuxboot_dma.bin and the other option ROMs (run time)
];

/// Firmware packages the VM boots with (run time): SeaBIOS, iPXE's ROMs for NICs.
const FIRMWARE_PACKAGES: [&str; 2] = ["seabios", "ipxe-qemu"];

/// Where the binary finds its firmware: one `-L` each.
pub const FIRMWARE_DIRS: [&str; 3] = ["/usr/share/qemu", "/usr/share/seabios", "/usr/lib/ipxe/qemu"];

/// The card's QEMU devices, one `-device` value each: PF0 and PF1 as functions 0 and 1 of one
/// slot behind a PCIe root port (hot-pluggable, as a card in a server's slot), and the
/// test-control function on the root complex (it keeps the model alive when the card's slot is
/// unplugged). Functions with the same `card=` share one model; without `netdev=` its two ports
/// are cabled to each other. The VM test and the bare-metal image boot with these same lines.
pub const CARD_DEVICES: [&str; 4] = [
    "pcie-root-port,id=rp1,slot=1,chassis=1",
    "onic-card,card=c0,bus=rp1,addr=0.0,multifunction=on,id=onic0",
    "onic-card,card=c0,bus=rp1,addr=0.1,id=onic1",
    "onic-card-ctl,card=c0,bus=pcie.0,addr=5.0,id=onicctl",
];

/// [`CARD_DEVICES`] as QEMU arguments (`-device` before each).
pub fn device_args() -> Vec<String> {
    device_args_with_port0(None)
}

/// [`CARD_DEVICES`] as QEMU arguments, with port 0 (PF0) on the QEMU network backend `netdev`
/// when one is named: the card's ports then leave the VM instead of being cabled to each other.
pub fn device_args_with_port0(netdev: Option<&str>) -> Vec<String> {
    CARD_DEVICES
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            let d = match netdev {
                Some(n) if i == PF0_DEVICE => format!("{d},netdev={n}"),
                _ => (*d).to_string(),
            };
            ["-device".to_string(), d]
        })
        .collect()
}

/// The index of PF0 (port 0's function) in [`CARD_DEVICES`].
const PF0_DEVICE: usize = 1;
const _: () = assert!(PF0_DEVICE < CARD_DEVICES.len());

/// [`FIRMWARE_DIRS`] as QEMU arguments (`-L` before each).
pub fn firmware_args() -> Vec<String> {
    FIRMWARE_DIRS
        .iter()
        .flat_map(|d| ["-L", d])
        .map(String::from)
        .collect()
}

const DEB_SRC: &str = "/etc/apt/sources.list.d/onic-rs-deb-src.sources";

/// `configure`'s flags. `--enable-plugins`: `vm-bench --profile` counts the guest's instructions
/// per function with a TCG plugin (`qemu-card/plugin/onic_insn.c`). The flags are part of the
/// cache key.
const CONFIGURE: [&str; 5] = [
    "--target-list=x86_64-softmmu",
    "--without-default-features",
    "--disable-docs",
    "--disable-install-blobs",
    "--enable-plugins",
];

/// The cache root: `$ONIC_CACHE` or `/var/cache/onic-rs`.
pub fn cache_root() -> PathBuf {
    std::env::var_os("ONIC_CACHE").map_or_else(|| PathBuf::from("/var/cache/onic-rs"), PathBuf::from)
}

/// FNV-1a, 64 bits: a cache key that stays the same across Rust releases.
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn read(p: &Path) -> Result<Vec<u8>, String> {
    fs::read(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// Writes `bytes` to `to` unless it already holds them (so ninja sees no change); returns
/// whether it wrote.
fn put(to: &Path, bytes: &[u8]) -> Result<bool, String> {
    if fs::read(to).is_ok_and(|old| old == bytes) {
        return Ok(false);
    }
    fs::write(to, bytes).map_err(|e| format!("{}: {e}", to.display()))?;
    Ok(true)
}

/// Adds the `deb-src` entry (once) so that `apt-get source` finds Debian's packages.
fn ensure_deb_src() -> Result<(), String> {
    if Path::new(DEB_SRC).exists() {
        return Ok(());
    }
    let entry = "Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n\
                 Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n";
    fs::write(DEB_SRC, entry).map_err(|e| format!("{DEB_SRC}: {e}"))?;
    kmod::apt_update()
}

/// Downloads Debian's QEMU source package into `dir` (if not there yet); returns its `.dsc`.
fn fetch_source(dir: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let find = || -> Option<PathBuf> {
        fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "dsc"))
    };
    if let Some(dsc) = find() {
        return Ok(dsc);
    }
    ensure_deb_src()?;
    let d = dir.to_path_buf();
    kmod::run_waiting_for_lock("apt-get source --download-only qemu", || {
        let mut c = kmod::apt_get();
        c.current_dir(&d).args(["source", "--download-only", "qemu"]);
        c
    })?;
    find().ok_or_else(|| format!("no .dsc in {} after apt-get source", dir.display()))
}

/// Unpacks, patches and configures the tree for `key` in `build_root`, unless a finished one is
/// there. Returns the source directory.
fn prepare_tree(dsc: &Path, build_root: &Path, patch: &Path) -> Result<PathBuf, String> {
    let src = build_root.join("qemu");
    let done = build_root.join("configured");
    if done.exists() {
        return Ok(src);
    }
    let _ = fs::remove_dir_all(build_root);
    fs::create_dir_all(build_root).map_err(|e| format!("{}: {e}", build_root.display()))?;
    let mut c = Command::new("dpkg-source");
    c.arg("-x").arg(dsc).arg(&src);
    run("dpkg-source -x (Debian's QEMU, Debian's patches applied)", c)?;
    let mut c = Command::new("patch");
    c.current_dir(&src).args(["-p1", "--forward", "-i"]).arg(patch);
    run("patch: onic-card into hw/net", c)?;
    fs::create_dir_all(src.join("hw/net/onic")).map_err(|e| format!("hw/net/onic: {e}"))?;
    // configure needs the files the meson hunk names; the real ones come in refresh().
    put(&src.join("hw/net/onic_card.c"), b"")?;
    put(&src.join("hw/net/onic/libonic_qemu_card.a"), b"!<arch>\n")?;
    let build = src.join("build");
    fs::create_dir_all(&build).map_err(|e| format!("{}: {e}", build.display()))?;
    let mut c = Command::new(src.join("configure"));
    c.current_dir(&build).args(CONFIGURE);
    run("QEMU configure (x86_64-softmmu only)", c)?;
    fs::write(&done, b"").map_err(|e| format!("{}: {e}", done.display()))?;
    Ok(src)
}

/// Builds the model for QEMU and writes it, its headers and the device's C file into the tree;
/// returns whether the library changed (the binary must be relinked).
fn refresh(src: &Path) -> Result<bool, String> {
    let mut c = cargo();
    c.args(["build", "--release", "-p", "onic-qemu-card", "--lib"]);
    run(
        "cargo build --release -p onic-qemu-card (the model as a static library)",
        c,
    )?;
    let onic = src.join("hw/net/onic");
    let lib = read(&target_dir().join("release/libonic_qemu_card.a"))?;
    let changed = put(&onic.join("libonic_qemu_card.a"), &lib)?;
    ffi::ensure_cbindgen()?;
    let header = target_dir().join("qemu-card/onic_model.h");
    fs::create_dir_all(header.parent().unwrap_or(&onic)).map_err(|e| format!("{e}"))?;
    let mut c = Command::new("cbindgen");
    c.arg("--quiet")
        .arg("--config")
        .arg(root().join("qemu-card/cbindgen.toml"))
        .arg("--output")
        .arg(&header)
        .arg(root().join("qemu-card/src/ffi.rs"));
    run("cbindgen: onic_model.h from qemu-card/src/ffi.rs", c)?;
    put(&onic.join("onic_model.h"), &read(&header)?)?;
    let mut c = cargo();
    c.args([
        "run",
        "--quiet",
        "-p",
        "onic-qemu-card",
        "--example",
        "c_constants",
    ]);
    let out = c
        .output()
        .map_err(|e| format!("cargo run --example c_constants: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "c_constants failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    put(&onic.join("onic_model_ids.h"), &out.stdout)?;
    put(
        &src.join("hw/net/onic_card.c"),
        &read(&root().join("qemu-card/qemu/onic_card.c"))?,
    )?;
    Ok(changed)
}

/// Debian's source package (its `.dsc`), the card's patch, and the cache key of the build made
/// from them with [`CONFIGURE`].
fn source_and_key() -> Result<(PathBuf, PathBuf, String), String> {
    let dsc = fetch_source(&cache_root().join("qemu-source"))?;
    let patch = root().join("qemu-card/qemu/onic-card.patch");
    let version = dsc
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut keyed = read(&patch)?;
    keyed.extend(CONFIGURE.join(" ").bytes());
    let key = format!("{version}-{:016x}", fnv64(&keyed));
    Ok((dsc, patch, key))
}

/// The directory of `qemu-plugin.h` in the card's QEMU tree (built first if needed): the TCG
/// plugin API of QEMU 7.2, which Debian's own QEMU shares.
pub fn plugin_api_dir() -> Result<PathBuf, String> {
    build()?;
    let (_, _, key) = source_and_key()?;
    Ok(cache_root().join(format!("qemu-card-{key}/qemu/include/qemu")))
}

/// Builds (or reuses) QEMU with the card; returns the path of `qemu-system-x86_64`.
pub fn build() -> Result<PathBuf, String> {
    let start = Instant::now();
    kmod::ensure_packages(&BUILD_PACKAGES)?;
    kmod::ensure_packages(&FIRMWARE_PACKAGES)?;
    let cache = cache_root();
    let (dsc, patch, key) = source_and_key()?;
    let build_root = cache.join(format!("qemu-card-{key}"));
    let fresh = !build_root.join("configured").exists();
    // The tree is shared by every checkout on the machine, each linking its own model into the
    // binary: one at a time, and each runs its own copy of the result.
    fs::create_dir_all(&build_root).map_err(|e| format!("{}: {e}", build_root.display()))?;
    let lock_path = cache.join(format!("qemu-card-{key}.lock"));
    let lock = fs::File::create(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock().map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let src = prepare_tree(&dsc, &build_root, &patch)?;
    let built = src.join("build/qemu-system-x86_64");
    if refresh(&src)? {
        // ninja does not track the static library: relink (about a second).
        let _ = fs::remove_file(&built);
    }
    let mut c = Command::new("ninja");
    c.current_dir(src.join("build")).arg("qemu-system-x86_64");
    run("ninja qemu-system-x86_64", c)?;
    let binary = own_copy(&built)?;
    drop(lock);
    println!(
        "qemu-card: {} ({}) ready in {:.1} s",
        binary.display(),
        if fresh {
            "built from Debian's source"
        } else {
            "cached tree, refreshed"
        },
        start.elapsed().as_secs_f64()
    );
    Ok(binary)
}

/// Copies the freshly linked binary into this checkout's target directory (replacing the
/// previous copy in one rename), so that a guest of this checkout keeps running the model it
/// was built with while another checkout relinks the shared tree.
fn own_copy(built: &Path) -> Result<PathBuf, String> {
    let dir = target_dir().join("qemu-card");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let binary = dir.join("qemu-system-x86_64");
    let partial = dir.join("qemu-system-x86_64.partial");
    fs::copy(built, &partial).map_err(|e| format!("{} -> {}: {e}", built.display(), partial.display()))?;
    fs::rename(&partial, &binary).map_err(|e| format!("{}: {e}", binary.display()))?;
    Ok(binary)
}

/// `cargo xtask qemu-card`: builds it and shows that the devices are there.
pub fn qemu_card(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("unknown option {a:?}; usage: cargo xtask qemu-card"));
    }
    let bin = build()?;
    let out = Command::new(&bin)
        .args(["-device", "help"])
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines().filter(|l| l.contains("onic-card")) {
        println!("  {}", line.trim());
    }
    if !text.contains("\"onic-card\"") || !text.contains("\"onic-card-ctl\"") {
        return Err("the built QEMU does not list the onic-card devices".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_backend_goes_to_pf0_only() {
        let args = device_args_with_port0(Some("data"));
        let with: Vec<&String> = args.iter().filter(|a| a.contains("netdev=")).collect();
        assert_eq!(with.len(), 1);
        assert!(
            with[0].contains("id=onic0") && with[0].ends_with(",netdev=data"),
            "{with:?}"
        );
        assert_eq!(device_args(), device_args_with_port0(None));
        assert!(!device_args().iter().any(|a| a.contains("netdev=")));
    }
}
