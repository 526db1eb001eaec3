//! What the C glue and the Rust side share by layout: the `#[repr(C)]` structs passed across
//! the `extern "C"` entry points, the transmit result and the constants that size C arrays.
//!
//! This file is the one definition. The C declarations the glue uses (`onic_ffi.h`) are
//! generated from it by cbindgen at every module build (`cargo xtask kmod`, configured by
//! `os-linux/cbindgen.toml`), and [`C_LAYOUTS`] gives the C side compile-time checks of each
//! struct's size, alignment, field offsets and field widths as rustc laid them out (`onic_ffi_layout.h`, from
//! `cargo run -p onic-linux --example c_layout`): a C declaration that drifts from these fails
//! the module build instead of corrupting memory at run time. Nothing here may use a type
//! cbindgen cannot express; kernel types stay on the C side as `void *`.

use core::ffi::c_void;
use core::fmt::{self, Write};
use core::mem::{align_of, offset_of, size_of};

use crate::os::StatBlock;

/// Words of a queue's published counters: RX, TX and pair counters (the pool's statistics are
/// the OS's, read from the pool). The C side sizes its `u64_stats_t` blocks with it.
pub const QSTAT_WORDS: usize = 15 + 11 + 9;

/// Queue indices a port may own ([`crate::queues::MAX_PORT_QUEUES`], written out as a literal
/// for cbindgen): the C side sizes its array of queue vectors with it.
pub const MAX_QUEUES: u16 = 21;

const _: () = assert!(MAX_QUEUES == crate::queues::MAX_PORT_QUEUES);

/// Counter blocks per queue index, one per writer ([`StatBlock`]).
pub const QSTAT_BLOCKS: usize = 3;

const _: () = assert!(StatBlock::ALL.len() == QSTAT_BLOCKS);

/// What a transmit did, for the C glue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum XmitResult {
    /// Queued (no doorbell yet: the glue flushes at the end of the batch); the packet is the
    /// ring's until its completion.
    Ok = 0,
    /// Ring full: stop the queue, return NETDEV_TX_BUSY (the packet is still the caller's).
    Busy = 1,
    /// Not queued (bad length, mapping failed, queue down): the caller frees and counts it.
    Dropped = 2,
    /// Queued and published, and the ring is now full: stop the queue until a reclaim frees
    /// slots.
    OkStop = 3,
}

/// What a reclaim of the stack's TX ring did, for BQL and the queue state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TxClean {
    /// Bytes of the packets completed (as posted: what BQL was told at transmit).
    pub bytes: u64,
    /// Packets completed.
    pub packets: u32,
    /// Packets still on the ring (a reclaim must follow within bounded time).
    pub in_flight: u32,
    /// Descriptors free now.
    pub free: u32,
    /// Free descriptors at which a stopped queue may be woken (the core's
    /// [`onic_core::queue::tx::TxThresholds::for_ring`]).
    pub wake_at: u32,
    /// The ring is in its error state (a device index it cannot trust, or stalled): the queue
    /// needs [`crate::port::Port::restart_queue`].
    pub error: bool,
}

/// What one NAPI poll did, for the C glue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PollResult {
    /// Frames consumed (NAPI work done).
    pub done: u32,
    /// Poll again without waiting for the interrupt (more completions are known).
    pub more: bool,
    /// Frames were redirected: the glue calls `xdp_do_flush`.
    pub redirected: bool,
    /// XDP_TX frames are still on the ring: their reclaim needs a later poll.
    pub tx_pending: bool,
    /// The RX or XDP_TX ring is in its error state: the poll asks for nothing more and the
    /// queue needs [`crate::port::Port::restart_queue`].
    pub error: bool,
}

/// A TX ring's state, for a TX timeout report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TxState {
    /// Oldest descriptor whose packet the driver holds.
    pub next_to_clean: u16,
    /// The producer index.
    pub next_to_use: u16,
    /// The consumer index the device last wrote back.
    pub device_cidx: u16,
    /// Packets on the ring.
    pub in_flight: u16,
    /// Descriptors free.
    pub free: u16,
    /// The ring is running.
    pub running: bool,
    /// The ring stopped on an inconsistent device index.
    pub error: bool,
}

/// The netdev's link statistics (`rtnl_link_stats64` fields the driver fills, from the core's
/// [`onic_core::stats::ethtool::Stats64`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct LinkStats {
    /// Frames received (whatever the XDP verdict).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Good frames the driver could not keep (no page, too long, refused by the stack); XDP
    /// drops are the program's decision and are counted in `ethtool -S` only.
    pub rx_dropped: u64,
    /// Completions with errors or impossible lengths.
    pub rx_errors: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames not sent (0 here: the glue counts the packets it drops in the kernel's per-CPU
    /// core counter, which `dev_get_stats` adds).
    pub tx_dropped: u64,
    /// Frames refused for their length.
    pub tx_errors: u64,
    /// Frames the packet adapter dropped before the driver saw them (`stat_adapt_rx_drop`).
    pub rx_missed_errors: u64,
}

/// What the C glue chooses for a port (`struct onic_port_params`).
#[repr(C)]
pub struct PortParams {
    /// The card's context-command mutex (`struct mutex *`), shared by its functions.
    pub card_lock: *mut c_void,
    /// Simulation mode: the platform device whose DMA API the model sits behind, or null for
    /// the model's own memory. Unused on a card.
    pub dma_dev: *mut c_void,
    /// Queue indices the function may use (MSI-X queue vectors).
    pub max_queues: u16,
    /// Queue indices in use at start.
    pub queues: u16,
    /// PCI function.
    pub func: u8,
    /// Enable RS-FEC on the CMACs.
    pub rs_fec: bool,
}

/// Current and maximum queue pairs and ring sizes (usable entries), for ethtool -l / -g.
#[repr(C)]
#[derive(Default)]
pub struct OnicLayout {
    /// Queue pairs the function may use.
    pub max_queues: u32,
    /// Queue pairs in use.
    pub queues: u32,
    /// TX ring entries usable.
    pub tx_ring: u32,
    /// RX ring entries usable.
    pub rx_ring: u32,
    /// Largest ring the QDMA's table offers (usable entries).
    pub max_ring: u32,
}

/// A struct's layout as rustc computed it, under the name the C glue knows it by.
#[derive(Clone, Copy, Debug)]
pub struct CLayout {
    /// The C struct tag (`struct <c_name>`), as `cbindgen.toml` renames the Rust type.
    pub c_name: &'static str,
    /// The Rust type.
    pub rust_name: &'static str,
    /// `size_of`.
    pub size: usize,
    /// `align_of`.
    pub align: usize,
    /// Every field, in declaration order: name, `offset_of`, size.
    pub fields: &'static [(&'static str, usize, usize)],
}

/// The size of the field `get` borrows (never called).
const fn field_size<T, F>(_get: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The layout of `$t`, with every field listed: the destructuring pattern fails to compile if a
/// field is missing from the list.
macro_rules! c_layout {
    ($t:ident => $c:literal { $($f:ident),* $(,)? }) => {{
        #[allow(dead_code)]
        fn all_fields_listed(v: $t) {
            let $t { $($f: _),* } = v;
        }
        CLayout {
            c_name: $c,
            rust_name: stringify!($t),
            size: size_of::<$t>(),
            align: align_of::<$t>(),
            fields: &[$((
                stringify!($f),
                offset_of!($t, $f),
                field_size::<$t, _>(|v: &$t| &v.$f),
            )),*],
        }
    }};
}

/// Every struct shared with the C glue.
pub const C_LAYOUTS: [CLayout; 6] = [
    c_layout!(PollResult => "onic_poll_result" { done, more, redirected, tx_pending, error }),
    c_layout!(TxClean => "onic_tx_clean" { bytes, packets, in_flight, free, wake_at, error }),
    c_layout!(TxState => "onic_tx_state" {
        next_to_clean, next_to_use, device_cidx, in_flight, free, running, error
    }),
    c_layout!(PortParams => "onic_port_params" {
        card_lock, dma_dev, max_queues, queues, func, rs_fec
    }),
    c_layout!(LinkStats => "onic_link_stats" {
        rx_packets, rx_bytes, rx_dropped, rx_errors, tx_packets, tx_bytes, tx_dropped,
        tx_errors, rx_missed_errors
    }),
    c_layout!(OnicLayout => "onic_layout" { max_queues, queues, tx_ring, rx_ring, max_ring }),
];

/// Writes the C11 `static_assert`s that pin each struct of [`C_LAYOUTS`] (size, alignment,
/// every field's offset and size) to rustc's layout, for a file the glue includes after the generated
/// declarations.
///
/// # Errors
///
/// Those of `out`.
pub fn write_c_asserts(out: &mut impl Write) -> fmt::Result {
    for l in &C_LAYOUTS {
        let (c, r) = (l.c_name, l.rust_name);
        writeln!(out, "/* struct {c} = Rust's {r} */")?;
        writeln!(
            out,
            "static_assert(sizeof(struct {c}) == {}, \"struct {c}: size differs from Rust's {r}\");",
            l.size
        )?;
        writeln!(
            out,
            "static_assert(__alignof__(struct {c}) == {}, \"struct {c}: alignment differs from Rust's {r}\");",
            l.align
        )?;
        for (f, off, size) in l.fields {
            writeln!(
                out,
                "static_assert(offsetof(struct {c}, {f}) == {off}, \"struct {c}: {f} is not where Rust's {r} has it\");"
            )?;
            writeln!(
                out,
                "static_assert(sizeof_field(struct {c}, {f}) == {size}, \"struct {c}: {f} is not as wide as in Rust's {r}\");"
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::string::String;

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn asserts_cover_every_field_of_every_struct() {
        let mut s = String::new();
        write_c_asserts(&mut s).unwrap();
        let fields: usize = C_LAYOUTS.iter().map(|l| l.fields.len()).sum();
        assert_eq!(
            s.matches("static_assert(").count(),
            2 * C_LAYOUTS.len() + 2 * fields
        );
        assert!(s.contains("static_assert(sizeof(struct onic_tx_clean) == 32, "));
        assert!(s.contains("static_assert(offsetof(struct onic_tx_clean, error) == 24, "));
        assert!(s.contains("static_assert(sizeof_field(struct onic_tx_clean, packets) == 4, "));
        assert!(s.contains("static_assert(sizeof(struct onic_link_stats) == 72, "));
    }

    #[test]
    fn offsets_increase_and_fit_the_size() {
        for l in &C_LAYOUTS {
            assert!(
                l.fields.windows(2).all(|w| w[0].1 + w[0].2 <= w[1].1),
                "{}",
                l.c_name
            );
            let (_, off, size) = l.fields.last().unwrap();
            assert!(off + size <= l.size, "{}", l.c_name);
        }
    }
}
