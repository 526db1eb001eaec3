//! The barriers that give [`crate::mmio::Mmio`] the ordering of Linux's `writel` and `readl`.
//!
//! A register access must be ordered against the CPU's accesses to DMA memory (normal, cacheable
//! memory the device also reads and writes), and nothing in Rust's memory model says how: atomic
//! fences order accesses between CPUs, not between the CPU's normal-memory traffic and a device
//! behind an uncached mapping. On aarch64, riscv64 and Arm a `fence(Release)` becomes an
//! inner-shareable or `rw,rw` barrier that does not cover the I/O space or the outer-shareable
//! domain where a DMA master sits. So each access is bracketed by the instruction Linux uses for
//! the same purpose:
//!
//! - [`before_write`], before every register write: the CPU's earlier writes to DMA memory (ring
//!   descriptors, packet data) are visible to the device before the write that tells it to look
//!   (a doorbell). Linux's `writel` = `__iowmb()` + the store.
//! - [`after_read`], after every register read: the CPU's later reads of DMA memory are not
//!   performed before the register read, so data the device wrote before it updated the
//!   register is seen. Linux's `readl` = the load + `__iormb()`.
//!
//! | target | before a write | after a read | Linux (`arch/*/include/asm/io.h`, `barrier.h`) |
//! |---|---|---|---|
//! | x86_64 | compiler barrier | compiler barrier | `writel`/`readl` are a `mov` with a `"memory"` clobber: stores are not reordered with stores, loads not with loads, and BAR mappings are uncached |
//! | aarch64 | `dmb oshst` | `dmb oshld` | `__iowmb()` = `dma_wmb()` = `dmb oshst`; `__iormb()` = `dma_rmb()` = `dmb oshld` |
//! | riscv64 | `fence w,o` | `fence i,ir` | `__io_bw()` = `fence w,o`; `__io_ar()` = `fence i,ir` (older kernels: `fence i,r`) |
//! | 32-bit Arm (M profile, `thumbv7em`) | `dmb sy` | `dmb sy` | `__iowmb()` = `wmb()` = `dsb st` + outer-cache sync; `__iormb()` = `rmb()` = `dsb` |
//!
//! Choices that differ from Linux, and why:
//!
//! - aarch64 `readl` also makes later instructions depend on the loaded value, so that a delay
//!   loop started after the read cannot begin before the read completes. The same is done here
//!   (an `eor`/`cbnz` pair on the value, which never branches).
//! - 32-bit Arm: Linux's A-profile kernels use `dsb`, which waits for completion, because an
//!   outer L2 cache controller's write buffer must be drained (`outer_sync`); M-profile cores
//!   have no such controller, and their `dmb` and `dsb` accept only the full-system option `sy`
//!   (`st`, `osh`, `oshst` are reserved encodings there). A `dmb sy` orders every earlier memory
//!   access before every later one for all observers, a DMA master included, which is the
//!   ordering `writel`/`readl` promise; completion is not part of that promise.
//! - Under Miri, which cannot run inline assembly, both are a sequentially consistent fence.
//!
//! [`BARRIERS`] lists the instructions per target; the assembly below is generated from the
//! same macros, so the table cannot drift from the code, and a test pins the table. The no_std
//! job of `cargo xtask ci` also disassembles this crate's builds for aarch64, riscv64 and
//! `thumbv7em` (`llvm-objdump`) and fails unless these instructions are in them.

/// The barrier instructions of one target, as written in the assembly (empty: compiler barrier
/// only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchBarriers {
    /// `target_arch` value.
    pub arch: &'static str,
    /// Emitted before a register write.
    pub before_write: &'static str,
    /// Emitted after a register read.
    pub after_read: &'static str,
}

// One macro per instruction, expanding to the string literal `asm!` needs; the table below and
// the `asm!` calls both use them.
macro_rules! aarch64_before_write {
    () => {
        "dmb oshst"
    };
}
macro_rules! aarch64_after_read {
    () => {
        "dmb oshld"
    };
}
macro_rules! riscv64_before_write {
    () => {
        "fence w,o"
    };
}
macro_rules! riscv64_after_read {
    () => {
        "fence i,ir"
    };
}
macro_rules! arm_before_write {
    () => {
        "dmb sy"
    };
}
macro_rules! arm_after_read {
    () => {
        "dmb sy"
    };
}

/// The barrier instructions of every target the HAL builds for.
pub const BARRIERS: [ArchBarriers; 4] = [
    ArchBarriers {
        arch: "x86_64",
        before_write: "",
        after_read: "",
    },
    ArchBarriers {
        arch: "aarch64",
        before_write: aarch64_before_write!(),
        after_read: aarch64_after_read!(),
    },
    ArchBarriers {
        arch: "riscv64",
        before_write: riscv64_before_write!(),
        after_read: riscv64_after_read!(),
    },
    ArchBarriers {
        arch: "arm",
        before_write: arm_before_write!(),
        after_read: arm_after_read!(),
    },
];

/// Orders the CPU's earlier writes to DMA memory before the register write that follows
/// (`writel`'s barrier). See the module docs for the instruction per target.
#[inline(always)]
pub fn before_write() {
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(all(not(miri), target_arch = "x86_64"))]
    // SAFETY: an empty assembly block that may read and write any memory (no `nomem`): the
    // compiler keeps every memory access on its side; it touches no register or flag.
    unsafe {
        core::arch::asm!("", options(nostack, preserves_flags));
    }
    #[cfg(all(not(miri), target_arch = "aarch64"))]
    // SAFETY: a data memory barrier; it changes no register, flag or memory, and without
    // `nomem` the compiler also keeps memory accesses on their side of it.
    unsafe {
        core::arch::asm!(aarch64_before_write!(), options(nostack, preserves_flags));
    }
    #[cfg(all(not(miri), target_arch = "riscv64"))]
    // SAFETY: a fence; it changes no register or memory, and without `nomem` the compiler
    // also keeps memory accesses on their side of it.
    unsafe {
        core::arch::asm!(riscv64_before_write!(), options(nostack, preserves_flags));
    }
    #[cfg(all(not(miri), target_arch = "arm"))]
    // SAFETY: a data memory barrier; it changes no register, flag or memory, and without
    // `nomem` the compiler also keeps memory accesses on their side of it.
    unsafe {
        core::arch::asm!(arm_before_write!(), options(nostack, preserves_flags));
    }
    #[cfg(not(any(
        miri,
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64",
        target_arch = "arm"
    )))]
    compile_error!("onic-hal: no MMIO write barrier for this architecture (see hal/src/barrier.rs)");
}

/// Orders the register read that produced `value` before the CPU's later reads of DMA memory
/// (`readl`'s barrier). See the module docs for the instruction per target.
#[inline(always)]
pub fn after_read(value: u32) {
    #[cfg(any(miri, not(target_arch = "aarch64")))]
    let _ = value;
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(all(not(miri), target_arch = "x86_64"))]
    // SAFETY: as in `before_write`: a compiler barrier only.
    unsafe {
        core::arch::asm!("", options(nostack, preserves_flags));
    }
    #[cfg(all(not(miri), target_arch = "aarch64"))]
    // SAFETY: a data memory barrier, then `eor` of the value with itself into a scratch register
    // (always 0) and a `cbnz` on it that never branches: later instructions depend on the read
    // having completed. Only the declared scratch register and the flags-free `eor`/`cbnz` are
    // used; no memory is written.
    unsafe {
        core::arch::asm!(
            aarch64_after_read!(),
            "eor {t:x}, {v:x}, {v:x}",
            "cbnz {t:x}, .",
            v = in(reg) u64::from(value),
            t = out(reg) _,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(all(not(miri), target_arch = "riscv64"))]
    // SAFETY: a fence; it changes no register or memory, and without `nomem` the compiler
    // also keeps memory accesses on their side of it.
    unsafe {
        core::arch::asm!(riscv64_after_read!(), options(nostack, preserves_flags));
    }
    #[cfg(all(not(miri), target_arch = "arm"))]
    // SAFETY: a data memory barrier; it changes no register, flag or memory, and without
    // `nomem` the compiler also keeps memory accesses on their side of it.
    unsafe {
        core::arch::asm!(arm_after_read!(), options(nostack, preserves_flags));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is the documented contract: a change of instruction must change this test
    /// and the module docs with it.
    #[test]
    fn barrier_instructions_per_target() {
        let expect = [
            ("x86_64", "", ""),
            ("aarch64", "dmb oshst", "dmb oshld"),
            ("riscv64", "fence w,o", "fence i,ir"),
            ("arm", "dmb sy", "dmb sy"),
        ];
        assert_eq!(BARRIERS.len(), expect.len());
        for (b, (arch, w, r)) in BARRIERS.iter().zip(expect) {
            assert_eq!((b.arch, b.before_write, b.after_read), (arch, w, r));
        }
    }

    #[test]
    fn the_host_target_has_an_entry() {
        let host = if cfg!(target_arch = "x86_64") {
            "x86_64"
        } else if cfg!(target_arch = "aarch64") {
            "aarch64"
        } else if cfg!(target_arch = "riscv64") {
            "riscv64"
        } else {
            "arm"
        };
        assert!(BARRIERS.iter().any(|b| b.arch == host));
        before_write();
        after_read(0);
    }

    /// Whether `text` has `word` between backticks (as the docs table writes instructions).
    fn quoted(text: &str, word: &str) -> bool {
        text.match_indices(word)
            .any(|(i, _)| text[..i].ends_with('`') && text[i + word.len()..].starts_with('`'))
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn module_docs_name_every_instruction() {
        let docs = include_str!("barrier.rs");
        for b in BARRIERS.iter().filter(|b| !b.before_write.is_empty()) {
            assert!(quoted(docs, b.before_write), "{}", b.arch);
            assert!(quoted(docs, b.after_read), "{}", b.arch);
        }
        assert!(!quoted(docs, "dmb st"));
    }
}
