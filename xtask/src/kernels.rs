//! The kernels the module is built for and tested on: Debian's packaged kernels
//! (`kmod::KERNELS`, fetched from the archive by `kmod`) and the debug kernel built from
//! Debian's 6.1 source (`debugkernel::DEBUG`). This is the one place that tells the two kinds
//! apart; the commands and the VM runs ask it.

use std::path::PathBuf;

use crate::debugkernel::{self, DEBUG};
use crate::kmod::{self, Kernel, Resolved};

/// Picks kernels by `--kernel` value (`6.1`, `6.12`, `all`, or `debug`: the debug kernel built
/// from Debian's 6.1 source, `debugkernel`; not part of `all`).
pub fn select(which: &str) -> Result<Vec<&'static Kernel>, String> {
    if which == "all" {
        return Ok(kmod::KERNELS.iter().collect());
    }
    if which == DEBUG.name {
        return Ok(vec![&DEBUG]);
    }
    kmod::KERNELS
        .iter()
        .find(|k| k.name == which)
        .map(|k| vec![k])
        .ok_or_else(|| {
            let names: Vec<_> = kmod::KERNELS.iter().map(|k| k.name).collect();
            format!(
                "unknown kernel {which:?}; one of {}, all or debug",
                names.join(", ")
            )
        })
}

/// The kernel `k` ready to build against and boot: a packaged one downloaded and unpacked, the
/// debug kernel built or taken from its cache.
pub fn fetch(k: &'static Kernel) -> Result<Resolved, String> {
    if k.name == DEBUG.name {
        debugkernel::resolve(k)
    } else {
        kmod::fetch_packaged(k)
    }
}

/// The module `rel` of kernel `r` (a path under its `kernel/` tree, e.g. `net/core/pktgen.ko`):
/// from the image package of a packaged kernel, from the build tree of the debug kernel.
pub fn image_module(r: &Resolved, rel: &str) -> Result<PathBuf, String> {
    if r.kernel.name == DEBUG.name {
        debugkernel::tree_module(r, rel)
    } else {
        kmod::packaged_module(r, rel)
    }
}

/// `cargo xtask kmod [--kernel 6.1|6.12|all]`.
pub fn kmod(args: &[String]) -> Result<(), String> {
    let which = kmod::parse_kernel(args)?;
    let kernels = select(&which)?;
    kmod::ensure_host_packages()?;
    let obj = kmod::build_rust_object()?;
    for k in kernels {
        let r = fetch(k)?;
        let ko = kmod::build_module(&r, &obj)?;
        println!("built {}", ko.display());
    }
    Ok(())
}
