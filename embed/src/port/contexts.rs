//! The calling contexts of one port, as types. They are Linux's (the kernel module's rules are in
//! `os-linux/README.md`, "Contexts and locks"); a host with fewer contexts (one thread) makes its
//! tokens the same way and simply never runs two at once.
//!
//! | kind | who | index | owns |
//! | --- | --- | --- | --- |
//! | [`Control`] | a control call under RTNL | 0 | the control state: settings, the queues' page pools |
//! | [`Napi`] | the NAPI poll of queue `q` | `q` | the RX ring, the XDP_TX ring, their pool, the queue's history |
//! | [`TxLock`] | the holder of netdev TX queue `q`'s lock | `q` | the stack's TX ring |
//! | [`XmitLock`] | the holder of queue `q`'s `ndo_xdp_xmit` lock | `q` | the redirect-in ring |
//!
//! The host's entry points (the kernel module's `extern "C"` ones in
//! `os-linux/src/kernel/entry.rs`) make the tokens, one per call, from what the OS guarantees
//! for that call; everything below them takes a token by `&mut` and opens only the cells
//! of its own context ([`onic_hal::exec`]). A control call that starts, stops or restarts rings
//! also holds a [`Quiet`]: the proof that the datapath contexts it touches are stopped.

pub use onic_hal::exec::{AllContexts, Domain, Kind, Owned, Token, WrongContext};

/// A control call: RTNL held (or the netdev not registered yet, or being freed).
#[derive(Debug)]
pub enum Control {}

impl Kind for Control {
    const NAME: &'static str = "control";
}

/// The NAPI poll of one queue index.
#[derive(Debug)]
pub enum Napi {}

impl Kind for Napi {
    const NAME: &'static str = "NAPI";
}

/// The holder of one netdev TX queue's lock (`ndo_start_xmit`, the watchdog, the NAPI poll's
/// reclaim of the stack's ring).
#[derive(Debug)]
pub enum TxLock {}

impl Kind for TxLock {
    const NAME: &'static str = "TX lock";
}

/// The holder of one queue index's `ndo_xdp_xmit` lock.
#[derive(Debug)]
pub enum XmitLock {}

impl Kind for XmitLock {
    const NAME: &'static str = "xmit lock";
}

/// The index of the one control context of a port.
pub const CONTROL: u16 = 0;

/// Every datapath context of a port is stopped (NAPI disabled, TX queues stopped, `ndo_xdp_xmit`
/// fenced off): the control call holding this may act as each of them in turn.
#[derive(Debug)]
pub struct Quiet<'a> {
    /// Every NAPI poll.
    pub napi: AllContexts<'a, Napi>,
    /// Every netdev TX queue.
    pub stack: AllContexts<'a, TxLock>,
    /// Every redirect-in ring.
    pub xmit: AllContexts<'a, XmitLock>,
}

impl Quiet<'_> {
    /// The tokens of queue index `q`'s three contexts, for as long as `self` is borrowed.
    pub fn queue(&mut self, q: u16) -> QueueTokens<'_> {
        QueueTokens {
            napi: self.napi.token(q),
            stack: self.stack.token(q),
            xmit: self.xmit.token(q),
        }
    }
}

/// The tokens of one queue index's datapath contexts, held by a control call that stopped them
/// (one queue's restart) or by a [`Quiet`] one.
#[derive(Debug)]
pub struct QueueTokens<'a> {
    /// Its NAPI poll.
    pub napi: Token<'a, Napi>,
    /// Its netdev TX queue.
    pub stack: Token<'a, TxLock>,
    /// Its redirect-in ring.
    pub xmit: Token<'a, XmitLock>,
}
