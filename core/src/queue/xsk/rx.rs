//! Where received UMEM frames go: to the application's RX ring without a copy when the XDP
//! program redirects them there ([`XskRx`]), or to the OS as a copy ([`XskPass`]), since the OS
//! cannot keep a chunk of the application's memory.

use super::umem::UmemFrame;
#[cfg(feature = "xdp")]
use super::{
    ring::{XskDesc, XskRing},
    umem::Umem,
};
use crate::queue::pair::{PassInfo, RxSink};
use crate::queue::rx::RxFrame;
#[cfg(feature = "xdp")]
use crate::xdp::{RedirectTable, RedirectTarget, Redirected, XdpFrame};

/// What copies a passed frame into a buffer of the OS (Linux: an skb it allocates).
pub trait PassCopy {
    /// Copies `frame` (the bytes as the program left them) for the OS; `false` if the OS had no
    /// buffer for it (the frame is lost to the OS, counted).
    fn copy(&mut self, frame: &[u8], info: PassInfo) -> bool;
}

impl<T: FnMut(&[u8], PassInfo) -> bool> PassCopy for T {
    fn copy(&mut self, frame: &[u8], info: PassInfo) -> bool {
        self(frame, info)
    }
}

/// The sink of a queue whose buffers are UMEM frames: each frame passed up (no program, or
/// XDP_PASS) is copied by `C` and its chunk stays with the RX ring (the sink gives every frame
/// back, so the RX path reuses it in its slot; the pair counts it as `rx_pass_refused`).
///
/// This is the one sink to give a UMEM queue: a chunk is the application's memory, which the OS
/// cannot keep (the kernel copies an XDP_PASS frame of a zero-copy queue into an skb for the same
/// reason). A sink of its own that kept a [`UmemFrame`] would hold the chunk as the OS holds a
/// pool page and would have to give it back through the pool
/// ([`crate::queue::pool::PageProvider::recycle_direct`]).
#[derive(Debug, Default)]
pub struct XskPass<C> {
    /// The copier.
    pub copy: C,
    /// Frames copied.
    pub copied: u64,
    /// Frames the copier had no buffer for.
    pub failed: u64,
}

impl<C> XskPass<C> {
    /// A sink copying through `copy`.
    pub const fn new(copy: C) -> Self {
        Self {
            copy,
            copied: 0,
            failed: 0,
        }
    }
}

impl<'u, C: PassCopy> RxSink<UmemFrame<'u>> for XskPass<C> {
    fn pass(&mut self, frame: RxFrame<UmemFrame<'u>>, info: PassInfo) -> Result<(), RxFrame<UmemFrame<'u>>> {
        if self.copy.copy(frame.data(), info) {
            self.copied += 1;
        } else {
            self.failed += 1;
        }
        Err(frame)
    }
}

/// Counters of an [`XskRx`].
#[cfg(feature = "xdp")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XskRxStats {
    /// Frames put in the RX ring.
    pub delivered: u64,
    /// Frames refused because the RX ring was full (the RX path recycles them and counts a
    /// redirect error).
    pub ring_full: u64,
}

/// The application's RX ring as a redirect target (AF_XDP's socket in an xskmap): a redirected
/// UMEM frame goes into the ring as a descriptor (UMEM address of the frame's first byte and its
/// length, the XDP program's adjustments included) and its chunk to the application, without a
/// copy. As a [`RedirectTable`] it takes every redirect, whatever the target index (a map with
/// one socket).
///
/// Only frames of the same UMEM may come here: the frame's chunk index is its address in this
/// UMEM. Frames shorter than 60 bytes arrive padded to 60 (the redirect path pads before a frame
/// leaves its queue).
#[cfg(feature = "xdp")]
pub struct XskRx<'u, 'r> {
    umem: Umem<'u>,
    ring: &'r XskRing<'r, XskDesc>,
    stats: XskRxStats,
}

#[cfg(feature = "xdp")]
impl<'u, 'r> XskRx<'u, 'r> {
    /// The driver's side of the RX ring `ring` over `umem`.
    pub const fn new(umem: Umem<'u>, ring: &'r XskRing<'r, XskDesc>) -> Self {
        Self {
            umem,
            ring,
            stats: XskRxStats {
                delivered: 0,
                ring_full: 0,
            },
        }
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> &XskRxStats {
        &self.stats
    }
}

#[cfg(feature = "xdp")]
impl<'u> RedirectTarget<UmemFrame<'u>> for XskRx<'u, '_> {
    fn enqueue(
        &mut self,
        frame: XdpFrame<UmemFrame<'u>>,
    ) -> Result<Redirected<UmemFrame<'u>>, XdpFrame<UmemFrame<'u>>> {
        if self.ring.free() == 0 {
            self.stats.ring_full += 1;
            return Err(frame);
        }
        let desc = XskDesc {
            addr: frame.page.view_addr() + u64::from(frame.offset),
            len: u32::from(frame.len),
            options: 0,
        };
        let (i, page) = frame.page.into_parts();
        self.umem.give_app(i, page);
        // Room checked above.
        let _ = self.ring.produce(desc);
        self.stats.delivered += 1;
        Ok(Redirected::Queued)
    }

    /// The ring's producer index moves with each frame: nothing is left to publish.
    fn flush(&mut self) {}
}

#[cfg(feature = "xdp")]
impl<'u> RedirectTable<UmemFrame<'u>> for XskRx<'u, '_> {
    fn redirect(
        &mut self,
        _target: Option<u32>,
        frame: XdpFrame<UmemFrame<'u>>,
        _meta_len: u8,
    ) -> Result<Redirected<UmemFrame<'u>>, XdpFrame<UmemFrame<'u>>> {
        self.enqueue(frame)
    }

    fn flush(&mut self) {}
}

#[cfg(feature = "xdp")]
impl core::fmt::Debug for XskRx<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XskRx")
            .field("ring", &self.ring)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
