//! The self-test's XDP programs, run through the core's XDP layer (`onic_core::xdp`).
//!
//! - [`Program`] is an `XdpProgram` (static dispatch): pass, drop, reflect (XDP_TX) or redirect.
//!   Each PF has an `XdpSlot<Program>`; the self-test attaches, swaps and detaches programs
//!   between polls, under traffic.
//! - [`Tapped`] wraps the attached program for one poll so that the self-test's tap sees each
//!   frame before the program does.
//! - Each poll is a `QueuePair::poll_xdp`: XDP_PASS pages go to the image's OS through a
//!   `PassSink`, XDP_DROP pages are recycled by the core, XDP_TX frames go out on the pair's own
//!   TX queue (one doorbell per poll), and redirects go through a `DevMap` whose entries are
//!   `TxTarget`s on the other PF's TX queues (entry `i` = queue `i`), flushed once per poll. A
//!   redirected page travels as an `XdpFrame` ([`super::datapath::Frame::Remote`]) and comes back
//!   to its pool through `return_to_origin` when the target queue completes it.

use onic_core::xdp::{XdpAction, XdpBuff, XdpProgram};

use super::frames;

/// The programs the self-test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// Every frame to the OS.
    Pass,
    /// Every frame dropped.
    Drop,
    /// Frames as sent by the far end are sent back with their MAC addresses swapped (XDP_TX);
    /// anything else is passed.
    Reflect,
    /// Frames as sent by the far end go out of the other PF's port with their MAC addresses
    /// swapped (XDP_REDIRECT to the redirect-table entry of the frame's own queue index);
    /// anything else, such as those same frames coming back in over the cable, is passed.
    Redirect,
}

impl XdpProgram for Program {
    fn run(&mut self, xdp: &mut XdpBuff<'_>) -> XdpAction {
        match *self {
            Self::Pass => XdpAction::Pass,
            Self::Drop => XdpAction::Drop,
            Self::Reflect | Self::Redirect => {
                let data = xdp.data_mut();
                if data.get(..6) != Some(&frames::DST_MAC[..]) {
                    return XdpAction::Pass;
                }
                frames::swap_macs(data);
                if *self == Self::Reflect {
                    XdpAction::Tx
                } else {
                    let target = u32::from(xdp.rxq().queue_index);
                    xdp.redirect(target)
                }
            }
        }
    }
}

/// A program with the self-test's tap in front of it.
pub struct Tapped<'x, P, T> {
    /// The attached program.
    pub prog: &'x mut P,
    /// Sees every frame before the program.
    pub tap: &'x mut T,
}

impl<P: XdpProgram, T: FnMut(&[u8])> XdpProgram for Tapped<'_, P, T> {
    fn run(&mut self, xdp: &mut XdpBuff<'_>) -> XdpAction {
        (self.tap)(xdp.data());
        self.prog.run(xdp)
    }
}
