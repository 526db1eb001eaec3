//! The self-test's XDP programs, run through the core's XDP layer (`onic_core::xdp`).
//!
//! - [`Program`] names a native program: pass, drop, reflect (XDP_TX), redirect. Each PF of the
//!   bare pairs has an `XdpSlot<Program>`, attached between phases. [`Dispatch`] runs the
//!   attached one for one poll, with the self-test's tap in front so that it sees each frame
//!   before the program does.
//! - [`Code`] is what a port's program runs ([`super::portbench::Tapped`] puts the port bench's
//!   tap in front): a native [`Program`] or one of the clang-built objects of `os-linux/xdp`
//!   embedded in the image and run by the `onic-bpf` engine ([`super::bpf`]). A port's program
//!   is swapped or detached between polls by the handle the next poll runs.
//! - Each poll of a bare pair is a `QueuePair::poll`: XDP_PASS pages go to the image's OS through an
//!   `RxSink`, XDP_DROP pages are recycled by the core, XDP_TX frames go out on the pair's own
//!   TX queue (one doorbell per poll), and redirects go through a `DevMap` whose entries are
//!   `TxTarget`s on the other PF's TX queues (entry `i` = queue `i`), flushed once per poll. A
//!   redirected page travels as an `XdpFrame` ([`super::datapath::Frame`]'s `Xdp`) and comes back
//!   to its pool through `return_to_origin` when the target queue completes it.

use alloc::boxed::Box;

use onic_bpf::{Host, XdpEngine};
use onic_core::xdp::{swap_macs, RawXdpProgram, XdpAction, XdpBuff, XdpRxq};

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

impl Program {
    /// Runs the program on one frame.
    fn run_native(self, xdp: &mut XdpBuff<'_>) -> XdpAction {
        match self {
            Self::Pass => XdpAction::Pass,
            Self::Drop => XdpAction::Drop,
            Self::Reflect | Self::Redirect => {
                let data = xdp.data_mut();
                if data.get(..6) != Some(&frames::DST_MAC[..]) {
                    return XdpAction::Pass;
                }
                swap_macs(data);
                if self == Self::Reflect {
                    XdpAction::Tx
                } else {
                    let target = u32::from(xdp.rxq().queue_index);
                    xdp.redirect(target)
                }
            }
        }
    }
}

/// The attached program of a bare pair's poll, with the self-test's tap in front.
pub struct Dispatch<'x, T> {
    /// The attached program.
    pub prog: Program,
    /// Sees every frame before the program.
    pub tap: &'x mut T,
}

impl<T: FnMut(&[u8])> RawXdpProgram for Dispatch<'_, T> {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        (self.tap)(xdp.data());
        self.prog.run_native(xdp).raw()
    }
}

/// What a port's program runs: a native program or a loaded object.
pub enum Code {
    /// A native program.
    Native(Program),
    /// An embedded object, run by the engine.
    Object(Box<Engine>),
}

impl Code {
    /// Runs on one frame; the verdict's raw value.
    pub fn run(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        match self {
            Self::Native(p) => p.run_native(xdp).raw(),
            Self::Object(e) => e.run(xdp),
        }
    }
}

/// An engine as the image runs it.
pub type Engine = XdpEngine<BareHost>;

/// The objects, by name.
pub const OBJECTS: [(&str, &[u8]); 9] = [
    ("xdp_pass", include_bytes!("../../../bpf/objects/xdp_pass.o")),
    ("xdp_drop", include_bytes!("../../../bpf/objects/xdp_drop.o")),
    ("xdp_swap", include_bytes!("../../../bpf/objects/xdp_swap.o")),
    ("xdp_tx", include_bytes!("../../../bpf/objects/xdp_tx.o")),
    (
        "xdp_redirect",
        include_bytes!("../../../bpf/objects/xdp_redirect.o"),
    ),
    (
        "xdp_drop_udp",
        include_bytes!("../../../bpf/objects/xdp_drop_udp.o"),
    ),
    ("xdp_count", include_bytes!("../../../bpf/objects/xdp_count.o")),
    ("xdp_hash", include_bytes!("../../../bpf/objects/xdp_hash.o")),
    (
        "xdp_features",
        include_bytes!("../../../bpf/objects/xdp_features.o"),
    ),
];

/// What the engine asks of the image: port `p` is interface `p + 1`; a redirect to the other
/// port's interface takes the devmap entry of the frame's queue (the other PF's TX queue of that
/// index); one CPU; time since boot; the log goes to the console and defmt.
#[derive(Debug)]
pub struct BareHost {
    rng: u64,
}

impl BareHost {
    /// A host with a fixed seed for `bpf_get_prandom_u32`, so runs repeat.
    pub const fn new() -> Self {
        Self { rng: 0x2545_f491 }
    }
}

impl Host for BareHost {
    fn redirect_ifindex(&self, rxq: XdpRxq, ifindex: u32) -> Option<u32> {
        let other = u32::from(rxq.port ^ 1) + 1;
        (ifindex == other).then_some(u32::from(rxq.queue_index))
    }

    fn redirect_xsk(&self, _: XdpRxq, _: u32) -> Option<u32> {
        None
    }

    fn cpu(&self, _: XdpRxq) -> u32 {
        0
    }

    fn ktime_ns(&mut self) -> u64 {
        crate::time::nanos_since_boot()
    }

    fn random_u32(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 16) as u32
    }

    fn log(&mut self, line: &str) {
        crate::println!("    bpf: {}", line);
        defmt::info!("bpf: {=str}", line);
    }
}
