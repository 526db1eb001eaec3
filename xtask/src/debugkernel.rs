//! `cargo xtask debug-kernel`: a Linux 6.1 with the kernel's own checkers (lockdep, PROVE_RCU,
//! KASAN, atomic-sleep, debugobjects, DMA API debugging), for `cargo xtask vm-test --kernel debug`.
//!
//! Debian ships no kernel with these options, so one is built from Debian's own source package
//! (`linux-source-6.1`: the tarball under `/usr/src`, Debian's patches applied):
//! `make x86_64_defconfig`, the fragment `os-linux/vm/debug.config` merged in with
//! `scripts/kconfig/merge_config.sh`, `make olddefconfig`, a check that every line of the fragment
//! survived, then `make bzImage modules` (which includes `modules_prepare` and writes
//! `Module.symvers`). The built tree is the `KDIR` the module is built against, and its
//! `arch/x86/boot/bzImage` is what the VM boots.
//!
//! The tree lives outside the clone, in `$ONIC_CACHE` (default `/var/cache/onic-rs`), in a
//! directory named after the source package's version (a new version unpacks afresh and removes
//! the old tree), with the key of its configuration beside it (`key`: a hash of the fragment, the
//! recipe and the compiler): a machine that built it once reuses it; a new key reconfigures the
//! same tree and kbuild recompiles only what the changed options touch (a new compiler:
//! everything). An interrupted build goes on where it stopped (make is incremental); a finished
//! one records how long it took, wall clock and CPU time (`build-seconds`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::kmod::{self, Kernel, Resolved};
use crate::{root, run};

/// The debug kernel as the VM test sees it. The simulated card runs behind the kernel DMA API
/// with every buffer bounced (`swiotlb=force`), so that DMA API debugging sees every mapping;
/// the PCI card sits behind QEMU's Intel IOMMU in strict mode, as on 6.12. KASAN reports every
/// bad access, not only the first (`kasan_multi_shot`); lockdep stops at its first report
/// whatever the command line says.
pub const DEBUG: Kernel = Kernel {
    name: "debug",
    headers_meta: "",
    image_meta: "",
    vm_args: "swiotlb=force onic_sim_dma_api kasan_multi_shot onic_vm_slow=4",
    pci_args: "intel_iommu=on iommu.strict=1 kasan_multi_shot onic_vm_slow=4",
    pci_iommu: true,
};

/// How long a VM test boot of the debug kernel may take (`vm-test --timeout` overrides it): the
/// checkers slow the guest down several times under TCG.
pub const VM_TIMEOUT_S: u64 = 3600;

/// Debian's source package and the tarball it installs.
const SOURCE_PACKAGE: &str = "linux-source-6.1";
const SOURCE_TARBALL: &str = "/usr/src/linux-source-6.1.tar.xz";
/// The directory the tarball unpacks into.
const SOURCE_DIR: &str = "linux-source-6.1";

/// What the build needs besides the source (Debian names).
const BUILD_PACKAGES: [&str; 9] = [
    SOURCE_PACKAGE,
    "build-essential",
    "bc",
    "bison",
    "flex",
    "libelf-dev",
    "libssl-dev",
    "dwarves", // pahole: the kernel's and the modules' BTF
    "xz-utils",
];

/// The configuration fragment, relative to the repository.
const FRAGMENT: &str = "os-linux/vm/debug.config";

/// The base configuration and the make targets; part of the cache key.
const BASE_CONFIG: &str = "x86_64_defconfig";
const TARGETS: [&str; 2] = ["bzImage", "modules"];

/// FNV-1a, 64 bits (stable across Rust releases, unlike `DefaultHasher`).
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn stdout_of(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed ({})", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The source version, and the key of a configuration: a hash of the fragment, the recipe and
/// the compiler.
fn version_and_key(fragment: &[u8]) -> Result<(String, String), String> {
    let version = stdout_of(Command::new("dpkg-query").args(["-W", "-f=${Version}", SOURCE_PACKAGE]))?;
    let compiler = stdout_of(Command::new("gcc").arg("--version"))?;
    let mut inputs = fragment.to_vec();
    inputs.extend_from_slice(BASE_CONFIG.as_bytes());
    inputs.extend_from_slice(TARGETS.join(" ").as_bytes());
    inputs.extend_from_slice(compiler.lines().next().unwrap_or_default().as_bytes());
    Ok((version, format!("{:016x}", fnv64(&inputs))))
}

/// The lines of a fragment as (option, wanted value), `None` for `# CONFIG_X is not set`.
fn wanted(fragment: &str) -> Vec<(&str, Option<&str>)> {
    fragment
        .lines()
        .filter_map(|l| {
            if let Some(rest) = l.strip_prefix("# ") {
                let name = rest.strip_suffix(" is not set")?;
                name.starts_with("CONFIG_").then_some((name, None))
            } else {
                let (name, value) = l.split_once('=')?;
                name.starts_with("CONFIG_").then_some((name, Some(value)))
            }
        })
        .collect()
}

/// Every line of the fragment as the final `.config` has it; the ones Kconfig changed otherwise.
fn config_mismatches(fragment: &str, config: &str) -> Vec<String> {
    wanted(fragment)
        .into_iter()
        .filter_map(|(name, want)| {
            let prefix = format!("{name}=");
            let have = config.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
            let ok = match (want, have) {
                (Some(w), Some(h)) => w == h,
                (None, h) => h.is_none() || h == Some("n"),
                (Some(_), None) => false,
            };
            (!ok).then(|| {
                format!(
                    "{name}: wanted {}, got {}",
                    want.unwrap_or("off"),
                    have.unwrap_or("off")
                )
            })
        })
        .collect()
}

/// CPU seconds (user + system) of this process's waited-for children so far, from
/// `/proc/self/stat` (clock ticks of 1/100 s on Linux): unlike the wall clock, it does not
/// depend on what else the machine is doing.
fn children_cpu_seconds() -> Option<u64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); cutime and cstime are fields 16 and 17.
    let ticks: u64 = fields.get(13)?.parse::<u64>().ok()? + fields.get(14)?.parse::<u64>().ok()?;
    Some(ticks / 100)
}

/// `make` in the tree, at the lowest priority (the machine has two cores and other work).
fn make(tree: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("nice");
    c.args(["-n", "19", "make", "-C"]).arg(tree).args(args);
    c
}

/// Unpacks the source into a fresh `dir`; returns the tree.
fn unpack(dir: &Path) -> Result<PathBuf, String> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut c = Command::new("nice");
    c.args(["-n", "19", "tar", "-xf", SOURCE_TARBALL, "-C"]).arg(dir);
    run(&format!("unpack {SOURCE_TARBALL}"), c)?;
    Ok(dir.join(SOURCE_DIR))
}

/// Writes the tree's `.config`: the base configuration, the fragment merged in, the rest
/// defaulted; fails if Kconfig dropped or changed a line of the fragment.
fn configure(tree: &Path, fragment: &Path) -> Result<(), String> {
    run(&format!("make {BASE_CONFIG}"), make(tree, &["-s", BASE_CONFIG]))?;
    let mut c = Command::new(tree.join("scripts/kconfig/merge_config.sh"));
    c.current_dir(tree).args(["-m", ".config"]).arg(fragment);
    run(&format!("merge {FRAGMENT}"), c)?;
    run("make olddefconfig", make(tree, &["-s", "olddefconfig"]))?;
    let text = fs::read_to_string(fragment).map_err(|e| format!("{}: {e}", fragment.display()))?;
    let config = fs::read_to_string(tree.join(".config")).map_err(|e| format!(".config: {e}"))?;
    let bad = config_mismatches(&text, &config);
    if !bad.is_empty() {
        return Err(format!(
            "{FRAGMENT}: Kconfig did not keep these lines (a dependency is missing):\n  {}",
            bad.join("\n  ")
        ));
    }
    Ok(())
}

/// Removes the trees of other source versions: each is some 4 GB.
fn remove_stale_trees(cache: &Path, dir: &Path) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    for p in entries.flatten().map(|e| e.path()) {
        let ours = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("debug-kernel-"));
        if ours && p != dir {
            println!("debug kernel: removing the stale tree {}", p.display());
            let _ = fs::remove_dir_all(&p);
        }
    }
}

/// Builds (or reuses) the debug kernel; returns the built tree.
fn build() -> Result<PathBuf, String> {
    let start = Instant::now();
    kmod::ensure_packages(&BUILD_PACKAGES)?;
    let fragment = root().join(FRAGMENT);
    let bytes = fs::read(&fragment).map_err(|e| format!("{}: {e}", fragment.display()))?;
    let (version, key) = version_and_key(&bytes)?;
    let cache = crate::qemucard::cache_root();
    let dir = cache.join(format!("debug-kernel-{version}"));
    let tree = dir.join(SOURCE_DIR);
    let (key_file, built) = (dir.join("key"), dir.join("build-seconds"));
    let configured_as = fs::read_to_string(&key_file).ok();
    if configured_as.as_deref() == Some(key.as_str()) {
        if let Ok(secs) = fs::read_to_string(&built) {
            println!(
                "debug kernel: cached in {} (built in {})",
                dir.display(),
                secs.trim()
            );
            return Ok(tree);
        }
    } else {
        // A new configuration. The tree stays where it is (kbuild's dependency files hold
        // absolute paths), so kbuild recompiles only the objects whose options changed.
        let _ = fs::remove_file(&built);
        if configured_as.is_none() {
            remove_stale_trees(&cache, &dir);
            unpack(&dir)?;
        }
        configure(&tree, &fragment)?;
        fs::write(&key_file, &key).map_err(|e| format!("{}: {e}", key_file.display()))?;
    }
    let jobs = format!(
        "-j{}",
        std::thread::available_parallelism().map_or(2, |n| n.get())
    );
    let mut args = vec![jobs.as_str()];
    args.extend(TARGETS);
    run(
        &format!("make {} (the debug kernel; long)", args.join(" ")),
        make(&tree, &args),
    )?;
    for f in ["arch/x86/boot/bzImage", "Module.symvers", "vmlinux"] {
        if !tree.join(f).exists() {
            return Err(format!("debug kernel: no {f} after the build"));
        }
    }
    let secs = start.elapsed().as_secs();
    let cpu = children_cpu_seconds().map_or("?".to_string(), |c| c.to_string());
    let record = format!("{secs} s wall clock, {cpu} s CPU\n");
    fs::write(&built, &record).map_err(|e| format!("{}: {e}", built.display()))?;
    println!("debug kernel: built in {} in {}", record.trim(), dir.display());
    Ok(tree)
}

/// A module of the debug kernel's own build (`rel` under its tree, e.g. `net/core/pktgen.ko`),
/// as `kmod::packaged_module` gives one of Debian's image packages.
pub fn tree_module(r: &Resolved, rel: &str) -> Result<PathBuf, String> {
    let ko = r.kdir.join(rel);
    if ko.exists() {
        Ok(ko)
    } else {
        Err(format!(
            "debug kernel: no {rel} in {} ({FRAGMENT} must build it as a module)",
            r.kdir.display()
        ))
    }
}

/// The debug kernel as a [`Resolved`] kernel (built or reused): its tree is the `KDIR`, its
/// `bzImage` the image; the module build and the VM's files go to `target/vm/debug`.
pub fn resolve(k: &'static Kernel) -> Result<Resolved, String> {
    let tree = build()?;
    let abi = stdout_of(make(&tree, &["-s", "kernelrelease"]).env_remove("MAKEFLAGS"))?;
    let dir = kmod::vm_root().join(k.name);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Resolved {
        kernel: k,
        abi,
        dir,
        vmlinuz: tree.join("arch/x86/boot/bzImage"),
        kdir: tree,
    })
}

/// `cargo xtask debug-kernel`: builds the debug kernel (or finds it in the cache) and prints
/// where it is.
pub fn debug_kernel(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("unknown option {a:?}; usage: cargo xtask debug-kernel"));
    }
    let r = resolve(&DEBUG)?;
    println!(
        "debug kernel {}: image {}, module build tree (KDIR) {}",
        r.abi,
        r.vmlinuz.display(),
        r.kdir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{config_mismatches, wanted};

    #[test]
    fn fragment_lines_are_read_as_options() {
        let f = "# comment\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x\"\n# CONFIG_D is the best\n";
        assert_eq!(
            wanted(f),
            vec![
                ("CONFIG_A", Some("y")),
                ("CONFIG_B", None),
                ("CONFIG_C", Some("\"x\""))
            ]
        );
    }

    #[test]
    fn options_kconfig_changed_are_reported() {
        let f = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=y\n# CONFIG_D is not set\n";
        let config = "CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\n";
        assert_eq!(
            config_mismatches(f, config),
            vec!["CONFIG_B: wanted off, got y", "CONFIG_C: wanted y, got off"]
        );
    }
}
