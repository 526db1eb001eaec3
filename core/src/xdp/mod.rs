//! XDP on the receive path: programs, the buffer view they run on, verdicts, redirect targets
//! and `xdp_xmit` (built with the `xdp` feature, on by default).
//!
//! # The pieces
//!
//! - [`XdpBuff`]: one received frame in its page, with Linux's layout (256 bytes of headroom,
//!   a metadata area, tailroom for the OS) and the adjustment helpers with Linux's bounds.
//! - [`XdpProgram`]: a native Rust program, called through static dispatch (monomorphised into
//!   the poll loop); [`RawXdpProgram`]: the object-safe form an OS shim holds (the Linux module's
//!   C trampoline runs a BPF program and returns its raw verdict). Every [`XdpProgram`] is a
//!   [`RawXdpProgram`].
//! - [`XdpAction`]: the verdicts, with Linux's values. A raw value that is none of them is
//!   handled like [`XdpAction::Aborted`] and counted as an exception (`rx_xdp_invalid`).
//! - [`XdpDispatch`]: the dispatch part of a [`crate::RxContext`] with which
//!   [`crate::QueuePair::poll`] runs the program on every frame: PASS hands the page to a
//!   [`crate::RxSink`] (the OS), DROP and ABORTED recycle it, TX queues it on the pair's own TX
//!   queue (same page, no copy, one doorbell per poll), REDIRECT hands it to a [`RedirectTable`]
//!   flushed at the end of the poll.
//! - [`RedirectTable`] / [`RedirectTarget`]: where redirected frames go: [`TxTarget`] (a TX queue
//!   of another pair or port), [`DevMap`] (a table of targets, like a devmap), or any user sink
//!   (an AF_XDP-like ring) implementing [`RedirectTarget`].
//! - [`xdp_xmit`]: the `ndo_xdp_xmit` contract: queue a batch of frames owned by someone else,
//!   stop at the first that does not fit, return how many were queued, never free the rest.
//! - [`XdpSlot`]: attach, detach and swap a program between polls, without touching the device.
//!
//! # Costs
//!
//! With no program attached, [`crate::QueuePair::poll`] hands each frame straight to the
//! [`crate::RxSink`], as with [`crate::PassAll`]: one test per poll, no hash, no buffer view. Pages are mapped bidirectionally
//! once (the pool's setting), so attaching a program needs no re-mapping and no queue restart.

mod buff;
mod redirect;
mod run;
mod xmit;

pub use buff::{
    swap_macs, XdpBuff, XdpError, XdpRxHash, XdpRxq, ETH_ALEN, ETH_HLEN, XDP_META_ALIGN, XDP_META_MAX,
};
pub use redirect::{
    return_to_origin, DevMap, FromXdpFrame, NoRedirect, RedirectTable, RedirectTarget, Redirected, TxTarget,
    XdpFrame,
};
pub use run::XdpDispatch;
pub use xmit::xdp_xmit;

/// What a program decided for a frame. The discriminants are Linux's `enum xdp_action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum XdpAction {
    /// The program failed: the frame is dropped and counted as `rx_xdp_aborted`.
    Aborted = 0,
    /// Drop the frame (its page is recycled).
    Drop = 1,
    /// Hand the frame to the OS.
    Pass = 2,
    /// Send the frame back out of the port it came in on, from the same page.
    Tx = 3,
    /// Hand the frame to a redirect target (see [`XdpBuff::redirect`]).
    Redirect = 4,
}

impl XdpAction {
    /// The verdict for a raw value; `None` for a value that is no verdict.
    #[must_use]
    pub const fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            0 => Some(Self::Aborted),
            1 => Some(Self::Drop),
            2 => Some(Self::Pass),
            3 => Some(Self::Tx),
            4 => Some(Self::Redirect),
            _ => None,
        }
    }

    /// The raw value.
    #[must_use]
    pub const fn raw(self) -> u32 {
        self as u32
    }
}

/// A native XDP program, run through static dispatch.
///
/// ```
/// use onic_core::xdp::{XdpAction, XdpBuff, XdpProgram};
///
/// /// Drops every frame shorter than 100 bytes.
/// struct DropRunts;
///
/// impl XdpProgram for DropRunts {
///     fn run(&mut self, xdp: &mut XdpBuff<'_>) -> XdpAction {
///         if xdp.len() < 100 { XdpAction::Drop } else { XdpAction::Pass }
///     }
/// }
/// ```
///
/// Closures `FnMut(&mut XdpBuff) -> XdpAction` are programs too.
pub trait XdpProgram {
    /// Decides what becomes of one frame; may rewrite and resize it first.
    fn run(&mut self, xdp: &mut XdpBuff<'_>) -> XdpAction;
}

impl<F: FnMut(&mut XdpBuff<'_>) -> XdpAction> XdpProgram for F {
    fn run(&mut self, xdp: &mut XdpBuff<'_>) -> XdpAction {
        self(xdp)
    }
}

/// The object-safe form of a program, for OS shims that hold a program behind a pointer (the
/// Linux module's trampoline into `bpf_prog_run_xdp`). It returns the raw verdict: values that
/// are no [`XdpAction`] are handled like [`XdpAction::Aborted`] and counted as exceptions.
pub trait RawXdpProgram {
    /// Runs the program on one frame and returns its raw verdict.
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32;
}

impl<P: XdpProgram + ?Sized> RawXdpProgram for P {
    #[inline]
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        self.run(xdp).raw()
    }
}

/// The program slot of one RX queue: attach, detach or swap a program between two polls.
///
/// A poll runs the program that is attached when it starts on every frame it takes; frames still
/// in the completion ring meet whichever program the next poll finds. Nothing about the device or
/// the pool changes, so a swap loses no frame and no page (the reference driver stops and reopens
/// the interface when the first program is attached or the last one detached, hardware.md §12.5).
#[derive(Debug, Default)]
pub struct XdpSlot<P> {
    prog: Option<P>,
    changes: u64,
}

impl<P> XdpSlot<P> {
    /// An empty slot.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            prog: None,
            changes: 0,
        }
    }

    /// Attaches `prog`; returns the program it replaces (a swap), if any.
    pub fn attach(&mut self, prog: P) -> Option<P> {
        self.changes += 1;
        self.prog.replace(prog)
    }

    /// Detaches the program, if any.
    pub fn detach(&mut self) -> Option<P> {
        let old = self.prog.take();
        if old.is_some() {
            self.changes += 1;
        }
        old
    }

    /// The attached program.
    pub fn program_mut(&mut self) -> Option<&mut P> {
        self.prog.as_mut()
    }

    /// Attaches, swaps and detaches so far.
    #[must_use]
    pub const fn changes(&self) -> u64 {
        self.changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_round_trip_and_unknown_is_none() {
        for a in [
            XdpAction::Aborted,
            XdpAction::Drop,
            XdpAction::Pass,
            XdpAction::Tx,
            XdpAction::Redirect,
        ] {
            assert_eq!(XdpAction::from_raw(a.raw()), Some(a));
        }
        assert_eq!(XdpAction::from_raw(5), None);
        assert_eq!(XdpAction::from_raw(u32::MAX), None);
    }

    #[test]
    fn slot_attach_swap_detach() {
        let mut s: XdpSlot<u8> = XdpSlot::new();
        assert!(s.program_mut().is_none());
        assert_eq!(s.detach(), None);
        assert_eq!(s.attach(1), None);
        assert_eq!(s.attach(2), Some(1));
        assert_eq!(s.program_mut(), Some(&mut 2));
        assert_eq!(s.detach(), Some(2));
        assert_eq!(s.changes(), 3);
    }

    #[test]
    fn programs_are_raw_programs() {
        let mut page = [0u8; 4096];
        let mut b = XdpBuff::new(&mut page, 256, 64, XdpRxq::default()).unwrap();
        let mut pass = |_: &mut XdpBuff<'_>| XdpAction::Pass;
        assert_eq!(pass.run_raw(&mut b), 2);
        let dynamic: &mut dyn RawXdpProgram = &mut pass;
        assert_eq!(dynamic.run_raw(&mut b), 2);
    }
}
