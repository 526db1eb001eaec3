//! A port whose every context one thread runs, one call at a time: the way a tool, a test or a
//! bare-metal main loop is a host. [`SoloPort`] owns its [`Port`] and the port's
//! [`OneThread`], which makes the context proofs the port's calls take, so such a host needs no
//! `unsafe` of its own: the compiler's borrow of the `SoloPort` is its serialization.

use alloc::vec::Vec;

use onic_core::queue::pair::PairPoll;
use onic_hal::exec::OneThread;

use super::contexts::{Control, Kind, Napi, Quiet, Token, TxLock, XmitLock, CONTROL};
use super::datapath::NapiCall;
use super::error::{PortError, PortResult};
use super::host::Host;
use super::queues::{NapiState, Queue, QueueView};
use super::{HostRegs, PollResult, Port, PortConfig, QueueTuning, RingHoldings};

/// A port and the one thread that runs all of its contexts.
pub struct SoloPort<H: Host> {
    port: Port<H>,
    contexts: OneThread,
}

impl<H: Host> SoloPort<H> {
    /// Brings the function up as [`Port::new`] does, with the contexts of a fresh [`OneThread`].
    ///
    /// # Errors
    ///
    /// As [`Port::new`].
    pub fn new(regs: HostRegs<H>, delay: H::Delay, host: H, cfg: PortConfig) -> PortResult<Self> {
        let contexts = OneThread::new();
        let port = Port::in_domain(regs, delay, host, cfg, contexts.domain())?;
        Ok(Self { port, contexts })
    }

    /// The port, for the calls that take no token (statistics, link state, RSS read-back).
    pub const fn port(&self) -> &Port<H> {
        &self.port
    }

    /// Runs `call` as the port's control context (a settings call: RSS, layout, MTU,
    /// statistics).
    pub fn control<R>(&mut self, call: impl FnOnce(&Port<H>, &mut Token<'_, Control>) -> R) -> R {
        call(&self.port, &mut self.contexts.token(CONTROL))
    }

    /// Runs `call` as the control context with every datapath context stopped (`open`, `stop`,
    /// `restart_queue`).
    ///
    /// # Errors
    ///
    /// `WrongContext` if the port's kinds were not four different ones (never: they are).
    pub fn quiesced<R>(
        &mut self,
        call: impl FnOnce(&Port<H>, &mut Token<'_, Control>, &mut Quiet<'_>) -> PortResult<R>,
    ) -> PortResult<R> {
        let (mut control, napi, stack, xmit) = self
            .contexts
            .all4::<Control, Napi, TxLock, XmitLock>()
            .map_err(|_| PortError::WrongContext)?;
        let mut quiet = Quiet { napi, stack, xmit };
        call(&self.port, &mut control.token(CONTROL), &mut quiet)
    }

    /// Starts every queue in use ([`Port::open`]).
    ///
    /// # Errors
    ///
    /// As [`Port::open`].
    pub fn open(&mut self) -> PortResult<()> {
        self.quiesced(|p, c, q| p.open(c, q))
    }

    /// Tears every queue down ([`Port::stop`]).
    ///
    /// # Errors
    ///
    /// As [`Port::stop`].
    pub fn stop(&mut self) -> PortResult<()> {
        self.quiesced(|p, c, q| p.stop(c, q))
    }

    /// Runs `call` as context `K` of queue index `q` (the stack's TX lock for transmit and its
    /// reclaim, the xmit lock for frames redirected here).
    pub fn queue<K: Kind, R>(&mut self, q: u16, call: impl FnOnce(&Port<H>, &mut Token<'_, K>) -> R) -> R {
        call(&self.port, &mut self.contexts.token(q))
    }

    /// Where the pages of every running queue index are, as the rings hold them
    /// ([`Port::holdings`]).
    ///
    /// # Errors
    ///
    /// As [`Port::holdings`].
    pub fn holdings(&mut self) -> PortResult<Vec<(H::QMem, RingHoldings)>> {
        self.quiesced(|p, c, q| p.holdings(c, q))
    }

    /// One NAPI poll of queue index `q` ([`Port::poll`]).
    pub fn poll(&mut self, q: u16, budget: u32, napi: H::Napi, prog: Option<H::Prog>) -> PollResult {
        self.port.poll_exclusive(q, NapiCall { budget, napi, prog }).0
    }

    /// One NAPI poll of queue index `q`, as [`SoloPort::poll`], with the core's own account of
    /// it (the RX poll's outcome with its typed error, the XDP_TX reclaim): what a test checks
    /// beyond what a host is told. `None` when the queue does not run.
    pub fn poll_outcome(
        &mut self,
        q: u16,
        budget: u32,
        napi: H::Napi,
        prog: Option<H::Prog>,
    ) -> (PollResult, Option<PairPoll>) {
        self.port.poll_exclusive(q, NapiCall { budget, napi, prog })
    }

    /// The key of the hasher the port's polls read now: the last key the port published
    /// (owning the port's one thread, the caller is every context, so no poll reads meanwhile).
    pub fn published_key(&mut self) -> onic_core::rss::RssKey {
        self.port.hasher.current_key()
    }

    /// Chooses what the queues are built with from the next `open` on ([`Port::set_tuning`]).
    ///
    /// # Errors
    ///
    /// As [`Port::set_tuning`].
    pub fn set_tuning(&mut self, tuning: QueueTuning) -> PortResult<()> {
        self.control(|p, c| p.set_tuning(c, tuning))
    }

    /// Restarts queue index `q`'s rings in place ([`Port::restart_queue`]).
    ///
    /// # Errors
    ///
    /// As [`Port::restart_queue`].
    pub fn restart_queue(&mut self, q: u16) -> PortResult<()> {
        self.quiesced(|p, c, quiet| p.restart_queue(c, &mut quiet.queue(q)))
    }

    /// Queue index `q`'s rings while it runs, to look at (`None` otherwise). Owning the port's
    /// one thread, the caller is every context at once: no ring can move while the view lives.
    pub fn inspect(&mut self, q: u16) -> Option<QueueView<'_, H>> {
        self.port.queues.get_mut(usize::from(q)).and_then(|c| view(q, c))
    }

    /// Every running queue index's rings, by index ([`SoloPort::inspect`]).
    pub fn inspect_all(&mut self) -> Vec<QueueView<'_, H>> {
        (0..)
            .zip(self.port.queues.iter_mut())
            .filter_map(|(q, c)| view(q, c))
            .collect()
    }

    /// Switches queue index `q` to `source` ([`Port::set_queue_source`]).
    ///
    /// # Errors
    ///
    /// As [`Port::set_queue_source`].
    pub fn set_queue_source(
        &mut self,
        q: u16,
        source: onic_core::queue::source::SourceKind,
    ) -> PortResult<()> {
        self.quiesced(|p, c, quiet| p.set_queue_source(c, &mut quiet.queue(q), source))
    }

    /// Where the UMEM frames of every queue index on an XSK pool are ([`Port::xsk_holdings`]).
    ///
    /// # Errors
    ///
    /// As [`Port::xsk_holdings`].
    pub fn xsk_holdings(&mut self) -> PortResult<Vec<super::XskHoldings>> {
        self.quiesced(|p, c, q| p.xsk_holdings(c, q))
    }

    /// Takes the function down ([`Port::remove`]).
    pub fn remove(self) {
        self.port.remove();
    }

    /// Takes the function down and says whether its release completed ([`Port::shut_down`]).
    ///
    /// # Errors
    ///
    /// As [`Port::shut_down`].
    pub fn shut_down(self) -> PortResult<()> {
        self.port.shut_down()
    }
}

/// The view of a queue whose cells the caller holds exclusively, if its rings run.
fn view<H: Host>(index: u16, queue: &mut Queue<H>) -> Option<QueueView<'_, H>> {
    let Queue {
        napi, stack, xmit, ..
    } = queue;
    let NapiState { pair, .. } = napi.get_mut();
    Some(QueueView {
        index,
        pair: pair.as_ref()?,
        stack: stack.get_mut().as_ref()?,
        xmit: xmit.get_mut().as_ref()?,
    })
}
