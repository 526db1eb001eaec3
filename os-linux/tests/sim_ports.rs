//! The module's Rust side on the host: two ports over the simulation backend (the same code the
//! module runs with `sim=1`) and a host "OS" over plain memory standing in for the kernel's page
//! pools, packets and XDP (`HostOs`). Frames cross the model's cable both ways, XDP verdicts are
//! carried out, redirected frames are transmitted, ethtool tables round-trip, and at the end
//! every page is back in its pool, every packet freed and the model saw no violation.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;

use onic_core::queue::source::SourceKind;
use onic_core::stats::PoolStats;
use onic_core::xdp::{XdpBuff, XdpError, XdpRxHash};
use onic_core::RingSizeIdx;
use onic_embed::port::sinks::XSK_ALLOC_BATCH;
use onic_embed::port::{
    AllContexts, Control, Kind, Port, PortConfig, PortRegs, PortResult, Quiet, StatBlock, Token, TxClean,
    XmitResult, CONTROL,
};
use onic_hal::grace::{GracePeriod, ReadSection};
use onic_hal::DmaAddr;
use onic_linux::errno::{from_port, Errno};
use onic_linux::ethtool::ETH_SS_STATS;
use onic_linux::ethtool::{self, sset_count, stats_count};
use onic_linux::host::OsHost;
use onic_linux::os::{FrameAt, Os, RawPoolPage, RawXskFrame, SkbHash};
use onic_linux::simcard::{sim_config, SharedSpinLock, SimBar, SimCard, SimDelay, SimDma, SimRegs, SpinLock};

const PAGE: usize = 4096;
/// What the test's UMEM pages hold past their chunk.
const CANARY: u8 = 0x5a;

fn layout() -> Layout {
    Layout::from_size_align(PAGE, PAGE).unwrap()
}

/// One queue's page pool.
#[derive(Default)]
struct Pool {
    free: Vec<NonNull<u8>>,
    /// Pages the pool ever allocated.
    pages: usize,
    fast: u64,
    slow: u64,
    live: bool,
    /// Made as a page pool (a queue on pages), not for a queue on an XSK pool.
    page_pool: bool,
}

/// A packet of the host "stack".
enum Skb {
    /// Built around a pool page by the driver: (pool, page, offset, length).
    Rx(usize, NonNull<u8>, u16, u16),
    /// Handed to transmit: its bytes.
    Tx(Box<[u8]>),
    /// Copied out of a UMEM frame for the stack (XDP_PASS on a zero-copy queue): its bytes.
    Copied(Vec<u8>),
}

#[derive(Default)]
struct State {
    pools: Vec<Pool>,
    skbs: Vec<Option<Skb>>,
    /// Frames the stack received: (queue, bytes, hash).
    delivered: Vec<(u16, Vec<u8>, Option<SkbHash>)>,
    /// Frames XDP redirected: bytes.
    redirected: Vec<Vec<u8>>,
    /// The XDP metadata in front of each redirected frame.
    redirected_meta: Vec<Vec<u8>>,
    /// Redirected-in frames (ndo_xdp_xmit): bytes, and whether they came back.
    xdp_frames: Vec<(Box<[u8]>, bool)>,
    syncs: u32,
    /// The pool each page belongs to.
    owner: std::collections::HashMap<usize, usize>,
    /// Programs cannot ask for the RX-metadata hash (Linux: not device-bound).
    progs_unbound: bool,
    /// The stack has no memory for a packet: `rx_build` fails.
    refuse_skbs: bool,
}

/// An XSK pool as the kernel keeps it for one queue of a netdev in zero-copy mode: a UMEM of
/// chunks of `chunk` bytes with `headroom` bytes of UMEM headroom, each in the pool's free list
/// (and fill ring), with the driver, or in the socket's RX ring. Each chunk has a page of its
/// own; the bytes of the page past the chunk hold [`CANARY`], which nothing may write.
#[derive(Default)]
struct Xsk {
    /// The queue index the pool is bound to.
    queue: Option<u16>,
    /// Bytes of a chunk (at most a page).
    chunk: usize,
    /// The UMEM headroom.
    headroom: u16,
    /// Every chunk of the UMEM.
    chunks: Vec<NonNull<u8>>,
    /// Chunks in the free list or the fill ring.
    free: Vec<NonNull<u8>>,
    /// Chunks in the socket's RX ring, with the frame each holds.
    rx: Vec<(NonNull<u8>, Vec<u8>)>,
    /// For each chunk handed out, how many the driver asked for in that call.
    batch_sizes: Vec<usize>,
}

impl Drop for Xsk {
    fn drop(&mut self) {
        for c in &self.chunks {
            // SAFETY: allocated with this layout by bind_xsk, freed once.
            unsafe { dealloc(c.as_ptr(), layout()) };
        }
    }
}

/// The host stand-in for the kernel's services: one per netdev (`.1` is its XSK pool), the
/// memory state shared by both ports of the test.
#[derive(Clone, Default)]
struct HostOs(Rc<RefCell<State>>, Rc<RefCell<Xsk>>);

impl HostOs {
    /// The services of another netdev over the same memory state.
    fn other(&self) -> Self {
        Self(Rc::clone(&self.0), Rc::default())
    }
}

type Prog = fn(&mut XdpBuff<'_>) -> u32;

impl HostOs {
    fn tx_skb(&self, bytes: &[u8]) -> usize {
        let mut s = self.0.borrow_mut();
        s.skbs.push(Some(Skb::Tx(bytes.into())));
        s.skbs.len() - 1
    }

    fn xdp_frame(&self, bytes: &[u8]) -> usize {
        let mut s = self.0.borrow_mut();
        s.xdp_frames.push((bytes.into(), false));
        s.xdp_frames.len() - 1
    }

    fn give_back(&self, pool: usize, page: NonNull<u8>) {
        self.0.borrow_mut().pools[pool].free.push(page);
    }

    /// Pages of every pool that are not back in it.
    fn pages_out(&self) -> usize {
        let s = self.0.borrow();
        s.pools.iter().map(|p| p.pages - p.free.len()).sum()
    }

    fn skbs_alive(&self) -> usize {
        self.0.borrow().skbs.iter().filter(|s| s.is_some()).count()
    }

    /// Binds an XSK pool of `chunks` chunks of `chunk` bytes with `headroom` bytes of UMEM
    /// headroom to queue `q` (the kernel's `XDP_SETUP_XSK_POOL`, before the driver switches the
    /// queue), every chunk in its fill ring.
    fn bind_xsk(&self, q: u16, chunks: usize, chunk: usize, headroom: u16) {
        let mut x = self.1.borrow_mut();
        assert!(x.queue.is_none() && x.chunks.is_empty() && chunk <= PAGE);
        for _ in 0..chunks {
            // SAFETY: non-zero size.
            let c = NonNull::new(unsafe { alloc_zeroed(layout()) }).expect("memory");
            // SAFETY: the page just allocated, PAGE bytes.
            unsafe { std::slice::from_raw_parts_mut(c.as_ptr(), PAGE)[chunk..].fill(CANARY) };
            x.chunks.push(c);
            x.free.push(c);
        }
        (x.queue, x.chunk, x.headroom) = (Some(q), chunk, headroom);
    }

    /// Whether the bytes past every chunk in its page still hold [`CANARY`].
    fn xsk_canaries_intact(&self) -> bool {
        let x = self.1.borrow();
        x.chunks.iter().all(|c| {
            // SAFETY: a page of the UMEM, PAGE bytes; no datapath call runs meanwhile.
            let page = unsafe { std::slice::from_raw_parts(c.as_ptr(), PAGE) };
            page[x.chunk..].iter().all(|&b| b == CANARY)
        })
    }

    /// The application takes the frames of its RX ring and gives their chunks to the fill ring.
    fn xsk_consume(&self) -> Vec<Vec<u8>> {
        let mut x = self.1.borrow_mut();
        let got: Vec<_> = x.rx.drain(..).collect();
        got.into_iter()
            .map(|(c, f)| {
                x.free.push(c);
                f
            })
            .collect()
    }

    /// Chunks with the driver: neither in the free list nor in the socket's RX ring.
    fn xsk_with_driver(&self) -> usize {
        let x = self.1.borrow();
        x.chunks.len() - x.free.len() - x.rx.len()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for p in &self.pools {
            for page in &p.free {
                // SAFETY: allocated with this layout by pp_alloc, freed once.
                unsafe { dealloc(page.as_ptr(), layout()) };
            }
        }
    }
}

impl Os for HostOs {
    type QMem = usize;
    type Skb = usize;
    type XdpFrame = usize;
    type Prog = Prog;
    type Napi = ();

    fn qmem_new(&self, _qid: u16, _pages: u32, page_pool: bool) -> Result<usize, Errno> {
        let mut s = self.0.borrow_mut();
        s.pools.push(Pool {
            live: true,
            page_pool,
            ..Pool::default()
        });
        Ok(s.pools.len() - 1)
    }

    fn qmem_free(&self, mem: usize) {
        self.0.borrow_mut().pools[mem].live = false;
    }

    fn pp_alloc(&self, mem: usize) -> Option<RawPoolPage> {
        let mut s = self.0.borrow_mut();
        let p = &mut s.pools[mem];
        assert!(p.live, "allocation from a destroyed pool");
        let page = if let Some(page) = p.free.pop() {
            p.fast += 1;
            page
        } else {
            p.slow += 1;
            p.pages += 1;
            // SAFETY: non-zero size.
            NonNull::new(unsafe { alloc_zeroed(layout()) })?
        };
        s.owner.insert(page.as_ptr() as usize, mem);
        Some(RawPoolPage {
            handle: page,
            virt: page,
            len: onic_hal::PAGE_SIZE,
            dma: DmaAddr::new(0),
        })
    }

    fn pp_put(&self, mem: usize, page: NonNull<u8>, _dirty: usize, _direct: bool) {
        let mut s = self.0.borrow_mut();
        let p = &mut s.pools[mem];
        assert!(!p.free.contains(&page), "page given back twice");
        p.free.push(page);
    }

    fn pp_stats(&self, mem: usize) -> PoolStats {
        let s = self.0.borrow();
        let mut st = PoolStats::default();
        st.alloc.fast = s.pools[mem].fast;
        st.alloc.slow = s.pools[mem].slow;
        st
    }

    fn rx_build(
        &self,
        _mem: usize,
        _: (),
        virt: NonNull<u8>,
        offset: u16,
        len: u16,
        _meta: u8,
    ) -> Option<usize> {
        let mut s = self.0.borrow_mut();
        if s.refuse_skbs {
            return None;
        }
        // The pool the page belongs to (the test's stack frees it into that pool).
        let pool = s.owner[&(virt.as_ptr() as usize)];
        s.skbs.push(Some(Skb::Rx(pool, virt, offset, len)));
        Some(s.skbs.len() - 1)
    }

    fn rx_deliver(&self, _: (), skb: usize, qid: u16, hash: Option<SkbHash>) {
        let taken = self.0.borrow_mut().skbs[skb].take();
        let bytes = match taken {
            Some(Skb::Rx(pool, page, off, len)) => {
                // SAFETY: the page is the packet's; the frame lies inside it.
                let bytes = unsafe {
                    std::slice::from_raw_parts(page.as_ptr().add(usize::from(off)), usize::from(len))
                }
                .to_vec();
                // The stack is done with it: the page goes back to its pool (skb recycling).
                self.give_back(pool, page);
                bytes
            }
            Some(Skb::Copied(bytes)) => bytes,
            _ => panic!("delivering a packet that was not built"),
        };
        self.0.borrow_mut().delivered.push((qid, bytes, hash));
    }

    fn rx_copy(&self, _: (), frame: &[u8], meta: u8) -> Option<usize> {
        let mut s = self.0.borrow_mut();
        let packet = frame.get(usize::from(meta)..)?.to_vec();
        s.skbs.push(Some(Skb::Copied(packet)));
        Some(s.skbs.len() - 1)
    }

    fn skb_data(&self, skb: usize) -> (NonNull<u8>, usize) {
        let s = self.0.borrow();
        match &s.skbs[skb] {
            Some(Skb::Tx(b)) => (NonNull::new(b.as_ptr().cast_mut()).unwrap(), b.len()),
            _ => panic!("not a packet to send"),
        }
    }

    fn skb_done(&self, skb: usize, _budget: Option<u32>) {
        assert!(
            self.0.borrow_mut().skbs[skb].take().is_some(),
            "packet freed twice"
        );
    }

    fn xdpf_data(&self, frame: usize) -> (NonNull<u8>, usize) {
        let s = self.0.borrow();
        let b = &s.xdp_frames[frame].0;
        (NonNull::new(b.as_ptr().cast_mut()).unwrap(), b.len())
    }

    fn xdpf_return(&self, frame: usize) {
        let mut s = self.0.borrow_mut();
        assert!(!s.xdp_frames[frame].1, "frame returned twice");
        s.xdp_frames[frame].1 = true;
    }

    fn xdp_prog_reads_meta(&self, _: Prog) -> bool {
        !self.0.borrow().progs_unbound
    }

    fn xdp_run(&self, prog: Prog, _mem: usize, buff: &mut XdpBuff<'_>, hash: Option<XdpRxHash>) -> u32 {
        assert_eq!(buff.rx_hash().ok(), hash);
        prog(buff)
    }

    fn xsk_room(&self, qid: u16) -> Option<u32> {
        let x = self.1.borrow();
        let room = x.chunk - usize::from(x.headroom);
        (x.queue == Some(qid)).then(|| u32::try_from(room).unwrap())
    }

    fn xsk_alloc_batch(&self, qid: u16, max: usize, each: &mut dyn FnMut(RawXskFrame)) -> usize {
        let mut handed = 0;
        while handed < max {
            let mut x = self.1.borrow_mut();
            assert_eq!(x.queue, Some(qid), "a frame of a pool the queue is not bound to");
            let Some(c) = x.free.pop() else {
                break;
            };
            x.batch_sizes.push(max);
            let index = x
                .chunks
                .iter()
                .position(|&k| k == c)
                .expect("a chunk of the UMEM");
            let (chunk, headroom) = (x.chunk, x.headroom);
            drop(x);
            each(RawXskFrame {
                page: RawPoolPage {
                    handle: c,
                    virt: c,
                    len: chunk,
                    dma: DmaAddr::new(0),
                },
                addr: (index * chunk) as u64,
                headroom,
            });
            handed += 1;
        }
        handed
    }

    fn xsk_free(&self, handle: NonNull<u8>) {
        let mut x = self.1.borrow_mut();
        assert!(x.chunks.contains(&handle), "not a chunk of the UMEM");
        assert!(!x.free.contains(&handle), "chunk given back twice");
        assert!(
            x.rx.iter().all(|r| r.0 != handle),
            "a chunk the socket holds given back"
        );
        x.free.push(handle);
    }

    /// An xskmap target: the socket's RX ring takes the chunk.
    fn xsk_redirect(&self, _prog: Prog, handle: NonNull<u8>, f: FrameAt) -> bool {
        // SAFETY: a chunk the driver holds; the frame lies inside it.
        let frame = unsafe {
            std::slice::from_raw_parts(handle.as_ptr().add(usize::from(f.offset)), usize::from(f.len))
        };
        let mut x = self.1.borrow_mut();
        assert!(!x.free.contains(&handle), "a free chunk redirected");
        x.rx.push((handle, frame.to_vec()));
        true
    }

    fn xdp_redirect(&self, _prog: Prog, mem: usize, page: &RawPoolPage, f: FrameAt) -> bool {
        let start = usize::from(f.offset) - usize::from(f.meta);
        // SAFETY: the driver's page, metadata and frame inside it.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                page.virt.as_ptr().add(start),
                usize::from(f.meta) + usize::from(f.len),
            )
        };
        let (meta, frame) = bytes.split_at(usize::from(f.meta));
        let mut os = self.0.borrow_mut();
        os.redirected.push(frame.to_vec());
        os.redirected_meta.push(meta.to_vec());
        drop(os);
        // The target sent it and returned the frame: back to its pool.
        self.give_back(mem, page.handle);
        true
    }
}

// SAFETY: the tests are single-threaded: every poll (the only read-side sections) has returned
// before a control call runs, so there is nothing to wait for; the count shows a writer asked.
unsafe impl GracePeriod for HostOs {
    fn synchronize(&self) {
        self.0.borrow_mut().syncs += 1;
    }
}

type SimHost = OsHost<HostOs, SimDma<SpinLock>, SimRegs<SpinLock>, SimDelay<SpinLock>, SharedSpinLock>;
type SimPort = Port<SimHost>;

/// A port call's result as the kernel's glue sees it.
fn errno<T>(r: PortResult<T>) -> Result<T, Errno> {
    r.map_err(|e| from_port(&e))
}

/// The tokens a single-threaded test makes for each call, as the module's entry points do.
///
/// # Safety
///
/// The caller runs no other code as that context while the token lives: in these tests, each
/// token is made for one call on one thread and dropped with it.
unsafe fn token<K: Kind>(p: &SimPort, index: u16) -> Token<'static, K> {
    // SAFETY: caller's contract.
    unsafe { Token::new(p.domain(), index) }
}

/// A control call with the datapath stopped: the control token and the proof that no datapath
/// context runs.
///
/// # Safety
///
/// As [`token`]; no datapath call on the port runs while they live.
unsafe fn quiesced(p: &SimPort) -> (Token<'static, Control>, Quiet<'static>) {
    let d = p.domain();
    // SAFETY: caller's contract.
    unsafe {
        (
            Token::new(d, CONTROL),
            Quiet {
                napi: AllContexts::new(d),
                stack: AllContexts::new(d),
                xmit: AllContexts::new(d),
            },
        )
    }
}

/// A poll's read-side section.
///
/// # Safety
///
/// No control call (the hasher's only writers) runs while it lives: in these single-threaded
/// tests, each is made for one poll and dropped with it.
unsafe fn section() -> ReadSection<'static> {
    // SAFETY: caller's contract.
    unsafe { ReadSection::new() }
}

/// The control token.
///
/// # Safety
///
/// As [`token`].
unsafe fn ctl(p: &SimPort) -> Token<'static, Control> {
    // SAFETY: caller's contract.
    unsafe { token(p, CONTROL) }
}

/// Starts the port's queues, as `ndo_open` does.
fn open(p: &SimPort) -> Result<(), Errno> {
    // SAFETY: single-threaded test: no datapath call runs meanwhile.
    let (mut c, mut q) = unsafe { quiesced(p) };
    errno(p.open(&mut c, &mut q))
}

/// Stops the port's queues, as `ndo_stop` does.
fn stop(p: &SimPort) {
    // SAFETY: single-threaded test: no datapath call runs meanwhile.
    let (mut c, mut q) = unsafe { quiesced(p) };
    p.stop(&mut c, &mut q).unwrap();
}

/// Switches queue `q` to its XSK pool's frames or back to its page pool, as the glue does for
/// `XDP_SETUP_XSK_POOL` (the queue's contexts stopped).
fn set_source(p: &SimPort, q: u16, source: SourceKind) -> Result<(), Errno> {
    // SAFETY: single-threaded test: no datapath call runs meanwhile.
    let (mut c, mut quiet) = unsafe { quiesced(p) };
    errno(p.set_queue_source(&mut c, &mut quiet.queue(q), source))
}

fn port(card: &Arc<SimCard<SpinLock>>, os: &HostOs, func: u8, queues: u16) -> SimPort {
    let cfg = PortConfig {
        func,
        max_queues: 8,
        queues,
        tx_ring: RingSizeIdx::new(1).unwrap(),
        rx_ring: RingSizeIdx::new(1).unwrap(),
        rs_fec: true,
    };
    let regs = PortRegs {
        qdma: SimRegs::new(card, SimBar::Qdma(func)),
        shell: SimRegs::new(card, SimBar::Shell),
        lock: SharedSpinLock::default(),
    };
    let host = SimHost::new(os.clone(), SimDma::new(card));
    Port::new(regs, SimDelay::new(card), host, cfg).expect("port comes up")
}

/// The card with both functions as ports of `queues` queue indices each, both open.
fn open_pair(queues: u16) -> (Arc<SimCard<SpinLock>>, HostOs, SimPort, SimPort) {
    let card = SimCard::new(SpinLock::default(), sim_config());
    let os = HostOs::default();
    let a = port(&card, &os, 0, queues);
    let b = port(&card, &os.other(), 1, queues);
    open(&a).unwrap();
    open(&b).unwrap();
    (card, os, a, b)
}

/// An IPv4/UDP frame of `len` bytes, with `n` in the source port and the payload.
fn frame(n: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    f[26..30].copy_from_slice(&[192, 0, 2, 1]);
    f[30..34].copy_from_slice(&[192, 0, 2, 2]);
    f[34..36].copy_from_slice(&[0x10, n]);
    f[36..38].copy_from_slice(&[0x00, 0x35]);
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = n.wrapping_add(i as u8);
    }
    f.truncate(len);
    f
}

/// Runs the model and polls every queue its interrupts name (port of function f: `ports[f]`,
/// with its program), until nothing happens.
fn drain(card: &SimCard<SpinLock>, ports: [(&SimPort, Option<Prog>); 2]) -> usize {
    let mut polls = 0;
    for _ in 0..20 {
        for irq in card.tick(10_000) {
            let (p, prog) = ports[usize::from(irq.func)];
            polls += 1;
            // SAFETY: single-threaded test: this is the queue's only user, and no control call
            // runs during the poll.
            let (mut t, s) = unsafe { (token(p, irq.vector), section()) };
            let r = p.poll(&mut t, &s, 64, (), prog);
            assert!(r.done <= 64);
        }
    }
    polls
}

/// What the glue's NAPI poll does besides the RX poll: reclaim the stack TX ring and the
/// redirect-in ring of queue `q` (TX completions raise no interrupt).
fn reclaim(card: &SimCard<SpinLock>, p: &SimPort, q: u16) -> (TxClean, TxClean) {
    card.tick(10_000);
    // SAFETY: single-threaded test: the rings' only user.
    unsafe { (p.tx_clean(&mut token(p, q), 64), p.xmit_clean(&mut token(p, q))) }
}

/// Transmits like the glue: queued without a doorbell, flushed at the end of the batch.
fn send(os: &HostOs, p: &SimPort, q: u16, f: &[u8], more: bool) -> XmitResult {
    let skb = os.tx_skb(f);
    let mut done = TxClean::default();
    // SAFETY: single-threaded: the queue's only transmitter.
    let r = p.xmit(&mut unsafe { token(p, q) }, skb, &mut done);
    if !more {
        // SAFETY: as above.
        p.tx_flush(&mut unsafe { token(p, q) });
    }
    r
}

fn finish(card: &Arc<SimCard<SpinLock>>, os: &HostOs, ports: Vec<SimPort>) {
    for p in ports {
        stop(&p);
        p.remove();
    }
    assert_eq!(os.pages_out(), 0, "every page is back in its pool");
    assert_eq!(os.skbs_alive(), 0, "every packet was freed");
    assert!(
        os.0.borrow().xdp_frames.iter().all(|f| f.1),
        "every redirected-in frame went back"
    );
    card.with(|c| {
        assert_eq!(c.violations(), vec![]);
        let d = c.dma_stats();
        assert_eq!(
            (d.live_regions, d.live_pages, d.live_foreign),
            (0, 0, 0),
            "no DMA memory or mapping left"
        );
    });
}

#[test]
fn frames_cross_the_cable_zero_copy_with_hashes_and_nothing_leaks() {
    let (card, os, a, b) = open_pair(2);
    assert!(a.link_up() && b.link_up());

    let sent: Vec<Vec<u8>> = (0..10).map(|i| frame(i, 60 + usize::from(i) * 100)).collect();
    for (i, f) in sent.iter().enumerate() {
        // xmit_more is per queue: the last packet of each queue's batch rings its doorbell.
        assert_eq!(
            send(&os, &a, (i % 2) as u16, f, i + 2 < sent.len()),
            XmitResult::Ok
        );
    }
    assert!(drain(&card, [(&a, None), (&b, None)]) > 0);
    let got = os.0.borrow().delivered.clone();
    assert_eq!(got.len(), 10);
    for f in &sent {
        let (_, _, hash) = got.iter().find(|g| &g.1 == f).expect("frame arrived");
        let h = hash.expect("UDP over IPv4 carries an L4 hash");
        assert_eq!(h.kind, 3, "PKT_HASH_TYPE_L4");
    }
    // The queue the shell chose is the one the frame was delivered on: the hash decides it.
    let queues: std::collections::BTreeSet<u16> = got.iter().map(|g| g.0).collect();
    assert!(queues.iter().all(|&q| q < 2));

    // And back.
    assert_eq!(send(&os, &b, 1, &sent[3], false), XmitResult::Ok);
    drain(&card, [(&a, None), (&b, None)]);
    assert_eq!(os.0.borrow().delivered.last().unwrap().1, sent[3]);
    for q in 0..2 {
        reclaim(&card, &a, q);
        reclaim(&card, &b, q);
    }
    assert_eq!(os.skbs_alive(), 0, "completed packets are freed");

    let sa = a.link_stats();
    let sb = b.link_stats();
    assert_eq!((sa.tx_packets, sb.rx_packets), (10, 10));
    assert_eq!((sb.tx_packets, sa.rx_packets), (1, 1));
    // The netdev queue statistics: the queues in use plus the base add up to the link's.
    for (port, link) in [(&a, sa), (&b, sb)] {
        let mut sum = port.base_stats(2);
        let mut per_queue = Vec::new();
        for q in 0..2 {
            let s = port.queue_stats(q).unwrap();
            per_queue.push(s.rx_packets + s.tx_packets);
            sum += s;
        }
        assert_eq!(
            (sum.rx_packets, sum.rx_bytes, sum.tx_packets, sum.tx_bytes),
            (link.rx_packets, link.rx_bytes, link.tx_packets, link.tx_bytes)
        );
        assert_eq!(
            port.base_stats(0),
            sum,
            "the base of no active queue is everything"
        );
        assert!(per_queue.iter().sum::<u64>() > 0);
    }
    let qcount = u16::try_from(a.queue_count()).unwrap();
    assert_eq!(a.queue_stats(qcount), None, "no queue past the port's");
    assert_eq!(a.base_stats(qcount), Default::default());

    // ethtool -S: the core's list, hardware counters of the port, queue counters, pool stats.
    assert_eq!(
        sset_count(ETH_SS_STATS, a.queue_count()),
        Ok(71 + 8 * (24 + 15) + 11)
    );
    let mut names = Vec::new();
    // SAFETY: single-threaded test (control call).
    unsafe {
        ethtool::stat_names(&a, &mut ctl(&a), |_, n| {
            names.push(String::from_utf8_lossy(n).trim_end_matches('\0').to_string())
        })
    };
    assert_eq!(names.len(), stats_count(a.queue_count()));
    assert_eq!(names[0], "stat_tx_total_pkts");
    let mut vals = vec![0u64; stats_count(a.queue_count())];
    // SAFETY: as above.
    unsafe { ethtool::stat_values(&a, &mut ctl(&a), &mut vals) };
    let val = |n: &str| vals[names.iter().position(|x| x == n).unwrap_or_else(|| panic!("{n}"))];
    assert_eq!(val("stat_tx_total_pkts"), 10);
    assert_eq!(val("tx0_packets") + val("tx1_packets"), 10);
    assert_eq!(val("rx0_packets") + val("rx1_packets"), 1);
    assert!(
        val("rx_pp_alloc_slow") > 0,
        "the pool statistics come from the OS pool"
    );

    // ethtool -S --groups and --show-pause: the CMAC's counts in the standard groups. Port a
    // sent 10 frames of 64, 164, 264, ..., 964 bytes on the wire and got one of 364 back.
    // SAFETY: as above.
    let (ga, gb) = unsafe {
        (
            a.mac_stat_groups(&mut ctl(&a)).unwrap(),
            b.mac_stat_groups(&mut ctl(&b)).unwrap(),
        )
    };
    let sizes = [
        Some(1),
        Some(0),
        Some(1),
        Some(3),
        Some(5),
        Some(0),
        Some(0),
        Some(0),
        Some(0),
        Some(0),
    ];
    assert_eq!(ga.rmon.hist_tx, sizes);
    assert_eq!(gb.rmon.hist, sizes, "what a sent, b received");
    assert_eq!(ga.rmon.hist[3], Some(1));
    assert_eq!(
        (ga.mac.frames_transmitted_ok, gb.mac.frames_received_ok),
        (Some(10), Some(10))
    );
    let octets: u64 = sent.iter().map(|f| f.len() as u64 + 4).sum();
    assert_eq!(gb.mac.octets_received_ok, Some(octets));
    assert_eq!(gb.mac.frame_check_sequence_errors, Some(0));
    assert_eq!(
        (ga.pause.tx_pause_frames, gb.pause.rx_pause_frames),
        (Some(0), Some(0))
    );
    let c = onic_linux::abi::MacGroups::from(ga);
    assert_eq!((c.hist_tx[4], c.frames_transmitted_ok), (5, 10));
    assert_eq!(onic_linux::abi::RMON_RANGES[4].low, 512);
    // SAFETY: as above.
    let pause = unsafe { a.pause_params(&mut ctl(&a)).unwrap() };
    assert!(
        pause.rx && pause.tx,
        "the bring-up enables global pause both ways"
    );

    // Counters survive down/up.
    stop(&a);
    open(&a).unwrap();
    assert_eq!(a.link_stats().tx_packets, 10);

    // ethtool -X hkey: the software hash follows (waiting for the datapath once).
    let syncs = os.0.borrow().syncs;
    // SAFETY: as above.
    unsafe { a.rss_set(&mut ctl(&a), None, Some(&[7; 40])).unwrap() };
    assert_eq!(os.0.borrow().syncs, syncs + 1);

    finish(&card, &os, vec![a, b]);
}

fn xdp_drop(_: &mut XdpBuff<'_>) -> u32 {
    1
}

fn xdp_pass(_: &mut XdpBuff<'_>) -> u32 {
    2
}

/// Swaps the MAC addresses and sends the frame back.
fn xdp_tx(x: &mut XdpBuff<'_>) -> u32 {
    let d = x.data_mut();
    let mut dst = [0u8; 6];
    dst.copy_from_slice(&d[..6]);
    d.copy_within(6..12, 0);
    d[6..12].copy_from_slice(&dst);
    3
}

/// XDP_REDIRECT with 8 bytes of metadata in front of the frame (`bpf_xdp_adjust_meta`).
fn xdp_redirect(x: &mut XdpBuff<'_>) -> u32 {
    if x.adjust_meta(-8).is_err() {
        return 0;
    }
    x.meta_mut().copy_from_slice(b"metadata");
    4
}

#[test]
fn xdp_verdicts_drop_pass_tx_and_redirect_keep_every_page() {
    let (card, os, a, b) = open_pair(1);
    let burst = |n: u8| {
        for i in 0..n {
            assert_eq!(send(&os, &a, 0, &frame(i, 100), i + 1 < n), XmitResult::Ok);
        }
    };
    let delivered = |os: &HostOs| os.0.borrow().delivered.len();

    burst(5);
    drain(&card, [(&a, None), (&b, Some(xdp_drop))]);
    assert_eq!(delivered(&os), 0, "XDP_DROP");

    burst(5);
    drain(&card, [(&a, None), (&b, Some(xdp_pass))]);
    assert_eq!(delivered(&os), 5, "XDP_PASS");

    burst(4);
    drain(&card, [(&a, None), (&b, Some(xdp_redirect))]);
    assert_eq!(os.0.borrow().redirected.len(), 4, "XDP_REDIRECT through the OS");
    assert!(
        os.0.borrow().redirected_meta.iter().all(|m| m == b"metadata"),
        "the program's metadata travels with each redirected frame"
    );

    // XDP_TX: b reflects a's frames back to a, from the pages they arrived in.
    burst(6);
    drain(&card, [(&a, None), (&b, Some(xdp_tx))]);
    card.with(|c| assert_eq!(c.violations(), vec![]));
    let back = os.0.borrow().delivered[5..].to_vec();
    assert_eq!(back.len(), 6, "reflected frames reach a");
    assert_eq!(&back[0].1[..6], &[0x02, 0, 0, 0, 0, 2], "MACs swapped");
    reclaim(&card, &b, 0);

    let mut vals = vec![0u64; stats_count(b.queue_count())];
    let mut names = Vec::new();
    // SAFETY: single-threaded test.
    unsafe {
        ethtool::stat_values(&b, &mut ctl(&b), &mut vals);
        ethtool::stat_names(&b, &mut ctl(&b), |_, n| {
            names.push(String::from_utf8_lossy(n).trim_end_matches('\0').to_string())
        });
    }
    let val = |n: &str| vals[names.iter().position(|x| x == n).unwrap()];
    assert_eq!(val("rx_xdp_drop"), 5);
    assert_eq!(val("rx_xdp_pass"), 5);
    assert_eq!(val("rx_xdp_redirect"), 4);
    assert_eq!(val("rx_xdp_tx"), 6);
    assert_eq!(val("rx_xdp_tx_errors"), 0);

    // ndo_xdp_xmit: frames of another device go out of a and arrive at b; they return to their
    // owner when the device is done.
    let frames: Vec<usize> = (0..3).map(|i| os.xdp_frame(&frame(40 + i, 80))).collect();
    // SAFETY: single-threaded test: the queue's only user.
    assert_eq!(a.xdp_xmit(&mut unsafe { token(&a, 0) }, &frames, true), Ok(3));
    drain(&card, [(&a, None), (&b, None)]);
    reclaim(&card, &a, 0);
    assert!(os.0.borrow().xdp_frames.iter().all(|f| f.1));
    assert_eq!(delivered(&os), 5 + 6 + 3);
    let mut avals = vec![0u64; stats_count(a.queue_count())];
    // SAFETY: as above.
    unsafe { ethtool::stat_values(&a, &mut ctl(&a), &mut avals) };
    assert_eq!(avals[names.iter().position(|x| x == "tx_xdp_xmit").unwrap()], 3);

    finish(&card, &os, vec![a, b]);
}

#[test]
fn ring_sizes_and_reconfiguration_are_checked() {
    use onic_linux::errno::{EBUSY, EINVAL};
    let card = SimCard::new(SpinLock::default(), sim_config());
    let os = HostOs::default();
    let a = port(&card, &os, 0, 1);
    let r = RingSizeIdx::new(2).unwrap().usable().into();
    // SAFETY: single-threaded test.
    unsafe {
        // Ring sizes must be entries of the QDMA's table (usable = entries - 1).
        assert_eq!(a.check_layout(&mut ctl(&a), 1, 63, 1023), Ok(()));
        assert_eq!(errno(a.check_layout(&mut ctl(&a), 1, 100, 1023)), Err(EINVAL));
        assert_eq!(
            errno(a.check_layout(&mut ctl(&a), 1, u32::MAX, 1023)),
            Err(EINVAL)
        );
        assert_eq!(errno(a.check_layout(&mut ctl(&a), 9, 63, 1023)), Err(EINVAL));
        assert_eq!(errno(a.reconfigure(&mut ctl(&a), 9, r, r)), Err(EINVAL));
        assert_eq!(errno(a.reconfigure(&mut ctl(&a), 0, r, r)), Err(EINVAL));
        assert_eq!(errno(a.reconfigure(&mut ctl(&a), 1, 100, r)), Err(EINVAL));
        open(&a).unwrap();
        assert_eq!(errno(a.reconfigure(&mut ctl(&a), 4, r, r)), Err(EBUSY));
        stop(&a);
        a.reconfigure(&mut ctl(&a), 4, r, r).unwrap();
        let l = a.layout(&mut ctl(&a)).unwrap();
        assert_eq!((l.max_queues, l.queues, l.tx_ring, l.rx_ring), (8, 4, r, r));
        // A table set by ethtool -X keeps its queues: fewer pairs are refused, nothing changes.
        let mut table = [0u32; 128];
        table[5] = 3;
        a.rss_set(&mut ctl(&a), Some(&table), None).unwrap();
        assert_eq!(errno(a.reconfigure(&mut ctl(&a), 2, r, r)), Err(EINVAL));
        // The check before the interface is stopped refuses it too.
        assert_eq!(errno(a.check_layout(&mut ctl(&a), 2, r, r)), Err(EINVAL));
        assert_eq!(a.layout(&mut ctl(&a)).unwrap().queues, 4);
        assert_eq!(errno(a.rss_set(&mut ctl(&a), Some(&[4; 128]), None)), Err(EINVAL));
        let mut back = [9u32; 128];
        a.rss_get(Some(&mut back), None);
        assert_eq!(back, table);
        // Once the kernel says the table is not the user's (`ethtool -X default`), it follows
        // the queue count again and the same request passes.
        a.rss_reset(&mut ctl(&a)).unwrap();
        assert_eq!(a.check_layout(&mut ctl(&a), 2, r, r), Ok(()));
        a.rss_set(&mut ctl(&a), Some(&table), None).unwrap();
        open(&a).unwrap();
        assert_eq!(errno(a.change_mtu(&mut ctl(&a), 9000)), Err(EINVAL));
        assert_eq!(errno(a.change_mtu(&mut ctl(&a), 67)), Err(EINVAL));
        a.change_mtu(&mut ctl(&a), 1400).unwrap();
        assert_eq!(a.mtu_range(&mut ctl(&a)), Ok((68, 1500)));
    }
    finish(&card, &os, vec![a]);
}

/// A token opens only its own context's state: another port's control token changes nothing,
/// another port's NAPI token polls nothing, a queue's TX token reaches no other queue's ring.
#[test]
fn tokens_of_another_port_or_queue_open_nothing() {
    let (card, os, a, b) = open_pair(1);
    use onic_linux::errno::EINVAL;
    // SAFETY: single-threaded test: no other call runs as these contexts.
    unsafe {
        assert_eq!(errno(a.change_mtu(&mut ctl(&b), 1400)), Err(EINVAL));
        assert_eq!(a.mtu_range(&mut ctl(&a)), Ok((68, 1500)), "a's MTU is unchanged");
        assert_eq!(errno(a.layout(&mut ctl(&b))).err(), Some(EINVAL));
    }

    let f = frame(1, 200);
    assert_eq!(send(&os, &b, 0, &f, false), XmitResult::Ok);
    for _ in 0..5 {
        card.tick(10_000);
    }
    // b's NAPI token for queue 0 on a, and a's token for a queue a does not run: nothing polled.
    // SAFETY: single-threaded test: no other call runs as these contexts, and no control call
    // runs during these polls.
    let (mut foreign, mut idle, mut own, s) =
        unsafe { (token(&b, 0), token(&a, 5), token(&a, 0), section()) };
    assert_eq!(a.poll(&mut foreign, &s, 64, (), None).done, 0);
    assert_eq!(a.poll(&mut idle, &s, 64, (), None).done, 0);
    assert!(os.0.borrow().delivered.is_empty());
    assert_eq!(a.poll(&mut own, &s, 64, (), None).done, 1);
    assert_eq!(os.0.borrow().delivered.last().unwrap().1, f);

    // A TX token of queue 3 (not running) and b's xmit token of queue 0 reach no ring of a.
    let mut done = TxClean::default();
    let skb = os.tx_skb(&f);
    // SAFETY: as above.
    let (mut tx3, mut b_xmit) = unsafe { (token(&a, 3), token(&b, 0)) };
    assert_eq!(a.xmit(&mut tx3, skb, &mut done), XmitResult::Dropped);
    // Refused: the packet is still the caller's, which frees it.
    os.skb_done(skb, None);
    assert_eq!(
        errno(a.xdp_xmit(&mut b_xmit, &[], true)),
        Err(onic_linux::errno::ENETDOWN)
    );
    reclaim(&card, &b, 0);
    finish(&card, &os, vec![a, b]);
}

/// `ethtool -S` value `name` of port `p`.
fn stat_of(p: &SimPort, name: &str) -> u64 {
    let mut names = Vec::new();
    let mut vals = vec![0u64; stats_count(p.queue_count())];
    // SAFETY: single-threaded test (control calls).
    unsafe {
        ethtool::stat_names(p, &mut ctl(p), |_, n| {
            names.push(String::from_utf8_lossy(n).trim_end_matches('\0').to_string())
        });
        ethtool::stat_values(p, &mut ctl(p), &mut vals);
    }
    vals[names
        .iter()
        .position(|x| x == name)
        .unwrap_or_else(|| panic!("{name}"))]
}

/// One NAPI poll of queue `q` with `prog` (if any), as the glue runs it, after the model ran.
fn poll_once(
    card: &SimCard<SpinLock>,
    p: &SimPort,
    q: u16,
    prog: Option<Prog>,
) -> onic_embed::port::PollResult {
    card.tick(10_000);
    // SAFETY: single-threaded test: the queue's only user, no control call meanwhile.
    let (mut t, s) = unsafe { (token(p, q), section()) };
    p.poll(&mut t, &s, 64, (), prog)
}

/// A completion ring whose color never flips after a wrap (a broken device): the receiving
/// queue counts its stalled polls, enters its error state, is restarted in place, and all of it
/// is in `ethtool -S` (`rx0_stall_polls`, `rx0_queue_errors`, `rx0_restarts`), as the
/// module's reset work and the user see it.
#[test]
#[cfg_attr(
    miri,
    ignore = "a frozen ring is declared dead after a thousand stalled polls: over ten minutes under Miri, for host code the other tests cover"
)]
fn queue_health_reaches_ethtool_s() {
    let (card, os, a, b) = open_pair(1);
    card.with(|c| c.faults().freeze_cmpt_color(true));
    // b's completion ring has 64 entries: 100 frames wrap it, and the second lap never shows.
    let mut failed = false;
    for batch in 0..25u8 {
        for i in 0..4u8 {
            assert_eq!(
                send(&os, &a, 0, &frame(batch * 4 + i, 100), i < 3),
                XmitResult::Ok
            );
        }
        reclaim(&card, &a, 0);
        for _ in 0..2000 {
            let r = poll_once(&card, &b, 0, None);
            if r.error {
                failed = true;
                break;
            }
            if !r.more {
                break;
            }
        }
        if failed {
            break;
        }
    }
    assert!(failed, "the frozen ring was detected");
    assert!(stat_of(&b, "rx0_queue_errors") >= 1);
    assert!(stat_of(&b, "rx0_stall_polls") >= 1);
    card.with(|c| c.faults().freeze_cmpt_color(false));
    // The reset work: the queue's contexts stopped, its rings restarted.
    // SAFETY: single-threaded test: no datapath call runs meanwhile.
    let (mut c, mut q) = unsafe { quiesced(&b) };
    b.restart_queue(&mut c, &mut q.queue(0)).unwrap();
    assert_eq!(stat_of(&b, "rx0_restarts"), 1);
    assert_eq!(
        stat_of(&b, "tx0_restarts"),
        3,
        "the index's rings restart together: the stack's, the redirect-in and the XDP_TX ring"
    );
    let before = os.0.borrow().delivered.len();
    assert_eq!(send(&os, &a, 0, &frame(7, 100), false), XmitResult::Ok);
    drain(&card, [(&a, None), (&b, None)]);
    assert_eq!(os.0.borrow().delivered.len(), before + 1, "traffic flows again");
    reclaim(&card, &a, 0);
    finish(&card, &os, vec![a, b]);
}

/// Runs the model for `ns` and serves `b`'s interrupts as NAPI does (polls until the queue has
/// nothing more and is armed again); returns how many interrupts `b` raised.
fn serve(card: &SimCard<SpinLock>, b: &SimPort, ns: u64) -> usize {
    let mut irqs = 0;
    for irq in card.tick(ns) {
        if irq.func != 1 {
            continue;
        }
        irqs += 1;
        for _ in 0..100 {
            // A poll takes time: the device's timers run meanwhile.
            card.tick(1_000);
            // SAFETY: single-threaded test: the queue's only user, no control call meanwhile.
            let (mut t, s) = unsafe { (token(b, irq.vector), section()) };
            if !b.poll(&mut t, &s, 64, (), None).more {
                break;
            }
        }
    }
    irqs
}

/// Sends `n` frames from `a` to `b`, one every `gap_ns`, serving `b`'s interrupts; returns how
/// many `b` raised.
fn trickle(card: &SimCard<SpinLock>, os: &HostOs, a: &SimPort, b: &SimPort, n: u8, gap_ns: u64) -> usize {
    let mut irqs = 0;
    for i in 0..n {
        assert_eq!(send(os, a, 0, &frame(i, 200), false), XmitResult::Ok);
        irqs += serve(card, b, gap_ns);
        // The sender's reclaim, without running the model (whose interrupts `serve` takes).
        // SAFETY: single-threaded test: the ring's only user.
        unsafe { a.tx_clean(&mut token(a, 0), 64) };
    }
    for _ in 0..10 {
        irqs += serve(card, b, 50_000);
    }
    irqs
}

/// `ethtool -c`: the port's rx-usecs and rx-frames.
fn get(p: &SimPort) -> (u32, u32) {
    // SAFETY: single-threaded test (a control call).
    let (m, _) = unsafe { p.coalesce(&mut ctl(p)) }.unwrap();
    (m.usecs(), m.frames())
}

/// `ethtool -C rx-usecs U rx-frames F`.
fn set_coalesce(p: &SimPort, usecs: u32, frames: u32) -> PortResult<()> {
    // SAFETY: single-threaded test (a control call).
    unsafe { p.set_coalesce(&mut ctl(p), usecs, frames, false) }
}

/// `ethtool -C rx-usecs, rx-frames` onto the QDMA's tables while the queues run: refused values
/// change nothing, accepted ones round down to a table entry, no frame is lost across a change,
/// and the receiving queue raises fewer interrupts per frame as the thresholds rise.
#[test]
#[cfg_attr(
    miri,
    ignore = "the model's clock through 168 frames 5 us apart: over ten minutes under Miri, for host code the other tests cover"
)]
fn interrupt_moderation_changes_while_traffic_runs() {
    let (card, os, a, b) = open_pair(1);
    assert_eq!(get(&b), (1, 64), "the reference: 1 us, 64 completions");
    for (usecs, frames) in [(21, 64), (1, 1), (1, 193)] {
        assert_eq!(
            errno(set_coalesce(&b, usecs, frames)),
            Err(onic_linux::errno::EINVAL)
        );
    }
    assert_eq!(get(&b), (1, 64), "a refused request changes nothing");

    // 40 frames 5 us apart at each setting: one interrupt per frame with the reference's 1 us
    // timer, one per two frames at 10 us, one per four at 20 us; a count of 2 fires every
    // second frame whatever the timer.
    let mut irqs = Vec::new();
    for (usecs, frames) in [(1, 64), (10, 128), (20, 192), (20, 2)] {
        set_coalesce(&b, usecs, frames).unwrap();
        trickle(&card, &os, &a, &b, 2, 5_000); // the queue's next doorbells take the setting
        irqs.push(trickle(&card, &os, &a, &b, 40, 5_000));
    }
    assert_eq!(irqs[0], 40, "{irqs:?}");
    assert!(
        irqs[1] < irqs[0] && irqs[2] < irqs[1],
        "fewer interrupts as the timer grows: {irqs:?}"
    );
    assert!(irqs[2] <= irqs[0] / 3, "{irqs:?}");
    assert!(irqs[3] > irqs[2], "the count threshold fires first: {irqs:?}");
    set_coalesce(&b, 7, 100).unwrap();
    assert_eq!(get(&b), (5, 96), "rounded down to table entries");
    assert_eq!(
        os.0.borrow().delivered.len(),
        4 * 42,
        "no frame lost across the changes"
    );
    finish(&card, &os, vec![a, b]);
}

/// `ethtool -C adaptive-rx on|off` with rx-usecs and rx-frames.
fn set_adaptive(p: &SimPort, usecs: u32, frames: u32, on: bool) -> PortResult<()> {
    // SAFETY: single-threaded test (a control call).
    unsafe { p.set_coalesce(&mut ctl(p), usecs, frames, on) }
}

/// One poll of `b`'s queue 0 with nothing new: what it reports.
fn idle_poll(b: &SimPort) -> onic_embed::port::abi::PollResult {
    // SAFETY: single-threaded test: the queue's only user, no control call meanwhile.
    let (mut t, s) = unsafe { (token(b, 0), section()) };
    b.poll(&mut t, &s, 64, (), None)
}

/// Adaptive moderation through the port, as onic.ko's DIM work drives it: each poll reports
/// the queue adaptive with its level and its running totals (DIM's sample); a level set from
/// any context reaches the running queue at its next doorbell, so under the same trickle the
/// top level raises fewer interrupts than the smallest fixed setting; `adaptive-rx off` puts
/// the fixed setting back, and a level decided late changes nothing. No frame is lost.
#[test]
#[cfg_attr(
    miri,
    ignore = "the model's clock through 130 frames 5 us apart: minutes under Miri, for host code the other tests cover"
)]
fn adaptive_moderation_moves_a_running_queue() {
    let (card, os, a, b) = open_pair(1);
    set_adaptive(&b, 0, 2, true).unwrap();
    // SAFETY: single-threaded test (a control call).
    let (fixed, on) = unsafe { b.coalesce(&mut ctl(&b)) }.unwrap();
    assert_eq!((fixed.usecs(), fixed.frames(), on), (0, 2, true));
    let r = idle_poll(&b);
    assert_eq!(
        (r.adaptive, r.level, r.rx_packets),
        (true, 1, 0),
        "DIM's starting profile"
    );

    let top = b.set_rx_level(0, 4).unwrap();
    assert_eq!((top.usecs(), top.frames()), (20, 192));
    trickle(&card, &os, &a, &b, 2, 5_000); // the queue's next doorbells take the level
    let adaptive = trickle(&card, &os, &a, &b, 40, 5_000);
    let r = idle_poll(&b);
    assert_eq!((r.adaptive, r.level), (true, 4));
    assert_eq!(r.rx_packets, 42, "the sample counts every frame");
    assert_eq!(r.rx_bytes, 42 * 200);

    set_adaptive(&b, 0, 2, false).unwrap();
    assert_eq!(
        errno(b.set_rx_level(0, 3).map(|_| ())),
        Err(onic_linux::errno::EINVAL),
        "a decision after adaptive-rx off does not land"
    );
    assert_eq!(
        errno(b.set_rx_level(7, 0).map(|_| ())),
        Err(onic_linux::errno::EINVAL)
    );
    let r = idle_poll(&b);
    assert_eq!((r.adaptive, r.level), (false, 0));
    trickle(&card, &os, &a, &b, 2, 5_000);
    let fixed = trickle(&card, &os, &a, &b, 40, 5_000);
    assert_eq!(
        fixed, 40,
        "the smallest setting: one interrupt per frame 5 us apart"
    );
    assert!(
        adaptive <= fixed / 3,
        "adaptive at the top level: {adaptive} vs {fixed}"
    );
    assert_eq!(
        os.0.borrow().delivered.len(),
        84,
        "no frame lost across the changes"
    );
    finish(&card, &os, vec![a, b]);
}

/// The NAPI block holds the running rings' counters alone, the history block what earlier rings
/// counted: a port restart moves the received frames from one to the other, the netdev's totals
/// and adaptive moderation's sample (history included) never fall, and frames received after
/// the restart count from zero in the NAPI block again.
#[test]
#[cfg_attr(miri, ignore = "the model's clock through 10 frames 5 us apart")]
fn received_counters_move_to_the_history_block_at_a_restart() {
    use onic_core::stats::RxStats;
    const RX: usize = RxStats::word("rx_packets");
    let (card, os, a, b) = open_pair(1);
    set_adaptive(&b, 0, 2, true).unwrap();
    trickle(&card, &os, &a, &b, 6, 5_000);
    let blocks = |p: &SimPort| {
        (
            p.counter_block(0, StatBlock::Napi)[RX],
            p.counter_block(0, StatBlock::History)[RX],
        )
    };
    assert_eq!(blocks(&b), (6, 0));
    assert_eq!(b.link_stats().rx_packets, 6);

    stop(&b);
    assert_eq!(blocks(&b), (0, 6), "the stopped rings' frames are history");
    assert_eq!(b.link_stats().rx_packets, 6);
    open(&b).unwrap();
    set_adaptive(&b, 0, 2, true).unwrap();
    assert_eq!(idle_poll(&b).rx_packets, 6, "the sample keeps the history");
    assert_eq!(blocks(&b), (0, 6));

    trickle(&card, &os, &a, &b, 4, 5_000);
    assert_eq!(blocks(&b), (4, 6), "the new rings count from zero");
    assert_eq!(b.link_stats().rx_packets, 10);
    assert_eq!(idle_poll(&b).rx_packets, 10);
    assert_eq!(stat_of(&b, "rx0_packets"), 10, "ethtool -S adds the blocks too");
    finish(&card, &os, vec![a, b]);
}

/// Queue 0's four counter blocks summed, word by word: what every reader adds up.
fn block_totals(p: &SimPort) -> Vec<u64> {
    let mut t = vec![0u64; onic_embed::port::counters::QSTAT_WORDS];
    for block in [
        StatBlock::Napi,
        StatBlock::Stack,
        StatBlock::Xmit,
        StatBlock::History,
    ] {
        for (t, w) in t.iter_mut().zip(p.counter_block(0, block)) {
            *t = t.wrapping_add(w);
        }
    }
    t
}

/// A stop publishes every counter from the rings themselves (into the history block): if a poll
/// had left out a word it changed, the totals would move here.
fn assert_polls_published(p: &SimPort, what: &str) {
    let before = block_totals(p);
    stop(p);
    assert_eq!(
        block_totals(p),
        before,
        "{what}: a poll left a changed counter unpublished"
    );
    open(p).unwrap();
}

/// A poll publishes only the counter groups it can have changed (the RX counters always; the
/// XDP_TX ring's with a program or frames in flight on it; the verdicts' with a program or a
/// frame the stack refused): after each kind of poll, every changed counter is published.
#[test]
fn every_counter_a_poll_changes_is_published() {
    use onic_core::stats::{PairStats, TxStats};
    use onic_embed::port::counters::TX_WORDS_AT;
    let pair_at = TX_WORDS_AT + TxStats::WORDS;
    let (card, os, a, b) = open_pair(1);
    let burst = |n: u8| {
        for i in 0..n {
            assert_eq!(send(&os, &a, 0, &frame(i, 100), i + 1 < n), XmitResult::Ok);
        }
    };

    burst(5);
    drain(&card, [(&a, None), (&b, None)]);
    assert_polls_published(&b, "frames to the stack");

    // XDP_TX from one poll, its reclaim in polls without a program.
    burst(6);
    card.tick(10_000);
    poll_once(&card, &b, 0, Some(xdp_tx));
    let tx_packets = TX_WORDS_AT + TxStats::word("tx_packets");
    assert_eq!(
        b.counter_block(0, StatBlock::Napi)[pair_at + PairStats::word("rx_xdp_tx")],
        6
    );
    let sent_before = b.counter_block(0, StatBlock::Napi)[tx_packets];
    for _ in 0..4 {
        poll_once(&card, &b, 0, None);
    }
    assert_eq!(
        b.counter_block(0, StatBlock::Napi)[tx_packets] - sent_before,
        6,
        "the XDP_TX frames' completions, counted by polls without a program"
    );
    drain(&card, [(&a, None), (&b, None)]);
    reclaim(&card, &a, 0);
    assert_polls_published(&b, "XDP_TX, then its reclaim without a program");

    // Frames the stack refuses: counted by the pair, without a program.
    os.0.borrow_mut().refuse_skbs = true;
    burst(3);
    drain(&card, [(&a, None), (&b, None)]);
    os.0.borrow_mut().refuse_skbs = false;
    assert_eq!(stat_of(&b, "rx0_pass_refused"), 3);
    assert_polls_published(&b, "refused frames");

    burst(4);
    drain(&card, [(&a, None), (&b, Some(xdp_drop))]);
    assert_polls_published(&b, "XDP_DROP");
    finish(&card, &os, vec![a, b]);
}

/// `ethtool -K rxhash off`: packets reach the stack without a hash, and a program asking for
/// the RX-metadata hash gets none; back on, both have it again. The port starts with it on. A
/// program that cannot ask (not device-bound) is not given one, its passed packets still are.
#[test]
fn rx_hash_follows_the_setting() {
    let (card, os, a, b) = open_pair(1);
    assert!(b.rx_hash());
    let hashes = |n0: u8, prog: Option<Prog>| {
        os.0.borrow_mut().delivered.clear();
        for i in 0..3 {
            assert_eq!(send(&os, &a, 0, &frame(n0 + i, 200), false), XmitResult::Ok);
        }
        drain(&card, [(&a, None), (&b, prog)]);
        reclaim(&card, &a, 0);
        let got = os.0.borrow().delivered.clone();
        assert_eq!(got.len(), 3, "every frame delivered");
        got.iter().map(|g| g.2.map(|h| h.kind)).collect::<Vec<_>>()
    };
    assert_eq!(hashes(0, None), [Some(3); 3], "L4 hashes");
    control(&b, |p, t| p.set_rx_hash(t, false)).unwrap();
    assert!(!b.rx_hash());
    assert_eq!(hashes(3, None), [None; 3]);
    assert_eq!(hashes(6, Some(xdp_pass_if_no_hash as Prog)), [None; 3]);
    control(&b, |p, t| p.set_rx_hash(t, true)).unwrap();
    assert_eq!(hashes(9, None), [Some(3); 3]);
    // A program that cannot ask for the hash (not device-bound) runs on frames not hashed for
    // it; the packets it passes are hashed for the stack all the same.
    os.0.borrow_mut().progs_unbound = true;
    assert_eq!(hashes(12, Some(xdp_pass_if_no_hash as Prog)), [Some(3); 3]);
    os.0.borrow_mut().progs_unbound = false;
    finish(&card, &os, vec![a, b]);
}

/// XDP_PASS when the program finds no RX-metadata hash, XDP_DROP when it finds one.
fn xdp_pass_if_no_hash(x: &mut XdpBuff<'_>) -> u32 {
    if x.rx_hash().is_ok() {
        1
    } else {
        2
    }
}

/// Runs control call `f` on `p`, as an entry point does under RTNL.
fn control<T>(p: &SimPort, f: impl FnOnce(&SimPort, &mut Token<'static, Control>) -> T) -> T {
    // SAFETY: single-threaded test: the token lives for this one call.
    let mut t = unsafe { ctl(p) };
    f(p, &mut t)
}

/// Sends `n` UDP frames from `from` and runs the model until they are in.
fn send_burst(card: &SimCard<SpinLock>, os: &HostOs, ports: [&SimPort; 2], from: usize, n: u8) {
    for i in 0..n {
        assert_eq!(
            send(os, ports[from], 0, &frame(i, 100), i + 1 < n),
            XmitResult::Ok
        );
    }
    drain(card, [(ports[0], None), (ports[1], None)]);
    reclaim(card, ports[from], 0);
}

#[test]
fn fec_settings_and_counters_through_the_port() {
    use onic_core::device::line::{fec_bits, FecActive, FecMode, FecStats};
    let (card, os, a, b) = open_pair(1);
    let fec = |p: &SimPort| control(p, |p, c| p.fec(c).unwrap());
    let set = |p: &SimPort, bits: u32| errno(control(p, |p, c| p.set_fec(c, bits)));
    let stats = |p: &SimPort| control(p, |p, c| p.fec_stats(c).unwrap());
    // The bring-up (rs_fec) turned RS-FEC on; no request was made, so that is what is shown.
    assert_eq!((fec(&a).configured, fec(&a).active), (FecMode::Rs, FecActive::Rs));
    // Refused with nothing changed.
    assert_eq!(set(&a, fec_bits::BASER), Err(onic_linux::errno::EOPNOTSUPP));
    assert_eq!(
        set(&a, fec_bits::RS | fec_bits::OFF),
        Err(onic_linux::errno::EINVAL)
    );
    assert_eq!(set(&a, fec_bits::NONE), Err(onic_linux::errno::EINVAL));
    assert_eq!(fec(&a).active, FecActive::Rs);
    // Off on one end only: neither end links, nothing crosses.
    set(&a, fec_bits::OFF).unwrap();
    assert_eq!(
        (fec(&a).configured, fec(&a).active),
        (FecMode::Off, FecActive::Off)
    );
    assert!(!a.link_up() && !b.link_up());
    send_burst(&card, &os, [&a, &b], 0, 2);
    assert_eq!(b.link_stats().rx_packets, 0);
    // Off on both: linked again.
    set(&b, fec_bits::OFF).unwrap();
    assert!(a.link_up() && b.link_up());
    send_burst(&card, &os, [&a, &b], 0, 2);
    assert_eq!(b.link_stats().rx_packets, 2);
    // Line errors without FEC: every one is a bad frame, no codeword is counted.
    card.with(|c| c.faults().fec_errors_next_frames(1, 1));
    send_burst(&card, &os, [&a, &b], 0, 3);
    assert_eq!(b.link_stats().rx_packets, 3);
    assert_eq!(stats(&b), FecStats::default());
    // auto on both: RS-FEC, which corrects what it can and counts both kinds.
    set(&a, fec_bits::AUTO).unwrap();
    set(&b, fec_bits::AUTO).unwrap();
    assert_eq!(
        (fec(&b).configured, fec(&b).active),
        (FecMode::Auto, FecActive::Rs)
    );
    assert!(a.link_up() && b.link_up());
    card.with(|c| c.faults().fec_errors_next_frames(3, 2));
    send_burst(&card, &os, [&a, &b], 0, 8);
    assert_eq!(
        b.link_stats().rx_packets,
        3 + 6,
        "the two uncorrectable frames are lost"
    );
    assert_eq!(
        stats(&b),
        FecStats {
            corrected_blocks: 3,
            uncorrectable_blocks: 2
        }
    );
    assert_eq!(
        stats(&a),
        FecStats::default(),
        "each port counts its own receiver"
    );
    finish(&card, &os, vec![a, b]);
}

#[test]
fn loopback_and_the_self_tests_through_the_port() {
    use onic_core::device::line::{loopback_frame, loopback_seq, LOOPBACK_FRAME_LEN};
    let (card, os, a, b) = open_pair(1);
    assert_eq!(control(&a, |p, c| p.register_test(c)).unwrap(), Ok(()));
    assert!(!a.loopback());
    control(&a, |p, c| p.set_loopback(c, true)).unwrap();
    assert!(a.loopback() && !b.loopback());
    // The loopback test's frames go out of a's stack ring and come back to a alone.
    let mac = [0x00, 0x0A, 0x35, 0xAA, 0xBB, 0xCC];
    for seq in 0..4 {
        let mut f = [0u8; LOOPBACK_FRAME_LEN];
        loopback_frame(&mac, seq, &mut f).unwrap();
        assert_eq!(send(&os, &a, 0, &f, seq < 3), XmitResult::Ok);
    }
    // And what b sends meanwhile does not reach a port in loopback.
    assert_eq!(send(&os, &b, 0, &frame(1, 100), false), XmitResult::Ok);
    drain(&card, [(&a, None), (&b, None)]);
    reclaim(&card, &a, 0);
    reclaim(&card, &b, 0);
    let seqs: Vec<u32> =
        os.0.borrow()
            .delivered
            .iter()
            .filter_map(|d| loopback_seq(&mac, &d.1))
            .collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    assert_eq!((a.link_stats().rx_packets, b.link_stats().rx_packets), (4, 0));
    assert!(a.link_up(), "a port in loopback hears itself");
    // Off: the cable again.
    control(&a, |p, c| p.set_loopback(c, false)).unwrap();
    send_burst(&card, &os, [&a, &b], 1, 1);
    assert_eq!(a.link_stats().rx_packets, 5);
    // The register test leaves the scratch register as it found it.
    card.with(|c| {
        use onic_hal::regs::cmac;
        use onic_hal::RegisterAccess;
        c.shell().write(cmac::USER_0.on(cmac::cmac_base(0)), 0x1234);
    });
    assert_eq!(control(&a, |p, c| p.register_test(c)).unwrap(), Ok(()));
    let user0 = card.with(|c| {
        use onic_hal::regs::cmac;
        use onic_hal::RegisterAccess;
        c.shell().read(cmac::USER_0.on(cmac::cmac_base(0)))
    });
    assert_eq!(user0, 0x1234);
    finish(&card, &os, vec![a, b]);
}

#[test]
fn health_dump_reads_a_queues_contexts_back() {
    let card = SimCard::new(SpinLock::default(), sim_config());
    let os = HostOs::default();
    let a = port(&card, &os, 0, 2);
    let b = port(&card, &os.other(), 1, 2);
    let id = a.identity();
    assert_eq!(id.cmac_version, onic_hal::regs::cmac::CORE_VERSION_EXPECTED);
    assert_ne!(id.shell_build, onic_hal::window::UNMAPPED_READ);
    open(&a).unwrap();
    open(&b).unwrap();
    send_burst(&card, &os, [&a, &b], 0, 3);
    let c = control(&b, |p, t| p.queue_contexts(t, 1)).unwrap();
    assert!(
        c.tx_sw.qen() && c.rx_sw.qen(),
        "both rings of a running queue are enabled"
    );
    assert!(c.cmpt.valid() && c.pfch.valid());
    assert_eq!(c.abs, 65, "PF1's queue 1: the function's qbase (64) + 1");
    let dump = onic_linux::abi::QueueDump::new(&c, &b.queue_counters(1).unwrap());
    assert_eq!((dump.tx_qen, dump.rx_qen, dump.cmpt_valid), (1, 1, 1));
    assert_eq!(
        errno(control(&a, |p, t| p.queue_contexts(t, 8))),
        Err(onic_linux::errno::EINVAL),
        "a queue index the port does not have"
    );
    assert_eq!(a.queue_counters(8), None);
    // After stop the contexts are invalidated: nothing enabled.
    stop(&a);
    let c = control(&a, |p, t| p.queue_contexts(t, 0)).unwrap();
    assert!(!c.tx_sw.qen() && !c.rx_sw.qen() && !c.cmpt.valid());
    open(&a).unwrap();
    finish(&card, &os, vec![a, b]);
}

/// A zero-copy queue through the module's host (`OsHost` over `Os::xsk_*`): XDP_REDIRECT hands
/// each UMEM chunk to the socket byte for byte, and the queue stays on its UMEM across a port
/// restart (what `ethtool -G`, `-L` and link down/up do: stop, then open, the pool still bound)
/// with no chunk lost or held twice; switched back, every chunk is the pool's or the socket's.
#[test]
fn a_zero_copy_queue_keeps_its_umem_across_a_port_restart() {
    let (card, os, a, b) = open_pair(1);
    let chunks = 512;
    os.bind_xsk(0, chunks, PAGE, 0);
    set_source(&a, 0, SourceKind::Xsk).unwrap();
    // The queue's new memory is no page pool: its frames are the UMEM's.
    let pools = |os: &HostOs| {
        os.0.borrow()
            .pools
            .iter()
            .filter(|p| p.live)
            .map(|p| p.page_pool)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pools(&os).iter().filter(|&&pp| !pp).count(),
        1,
        "{:?}",
        pools(&os)
    );
    let round = |n0: u8| {
        let sent: Vec<Vec<u8>> = (0..8).map(|i| frame(n0 + i, 60 + usize::from(i) * 150)).collect();
        for (i, f) in sent.iter().enumerate() {
            assert_eq!(send(&os, &b, 0, f, i + 1 < sent.len()), XmitResult::Ok);
        }
        drain(&card, [(&a, Some(xdp_redirect as Prog)), (&b, None)]);
        reclaim(&card, &b, 0);
        assert_eq!(
            os.xsk_consume(),
            sent,
            "every frame in the socket, byte for byte, in order"
        );
        assert!(
            os.0.borrow().redirected.is_empty(),
            "no page pool frame redirected"
        );
        assert!(os.xsk_with_driver() > 0, "the RX ring is filled from the UMEM");
    };
    round(0);
    // The refills took their chunks in batches (xsk_buff_alloc_batch), never more at once
    // than the provider's batch holds.
    let sizes = std::mem::take(&mut os.1.borrow_mut().batch_sizes);
    assert!(sizes.iter().all(|&m| m <= XSK_ALLOC_BATCH), "{sizes:?}");
    assert!(
        sizes.iter().filter(|&&m| m == XSK_ALLOC_BATCH).count() >= XSK_ALLOC_BATCH,
        "{sizes:?}"
    );
    stop(&a);
    assert_eq!(os.xsk_with_driver(), 0, "a stopped port holds no chunk");
    open(&a).unwrap();
    // SAFETY: single-threaded test: no datapath call runs meanwhile.
    let (mut c, _) = unsafe { quiesced(&a) };
    assert_eq!(a.queue_source(&mut c, 0).unwrap(), SourceKind::Xsk);
    round(8);
    switch_back_and_finish(&card, &os, (a, b), chunks);
}

/// Queue 0 of `a` back on its page pool: every one of the `chunks` UMEM chunks is the pool's
/// again, the pool is unbound, and both ports are torn down with every page home.
fn switch_back_and_finish(
    card: &Arc<SimCard<SpinLock>>,
    os: &HostOs,
    (a, b): (SimPort, SimPort),
    chunks: usize,
) {
    set_source(&a, 0, SourceKind::Pages).unwrap();
    assert_eq!(
        os.xsk_with_driver(),
        0,
        "switched back: every chunk is the pool's"
    );
    assert_eq!(os.1.borrow().free.len(), chunks);
    os.1.borrow_mut().queue = None;
    finish(card, os, vec![a, b]);
}

/// Swaps the MAC addresses and sends the frame back, after checking that the frame cannot grow
/// past its buffer: its end and tailroom stay inside a 2 KiB chunk, and a byte more fails.
fn xdp_tx_in_2k(x: &mut XdpBuff<'_>) -> u32 {
    let (_, _, end) = x.offsets();
    assert!(end + x.tailroom() <= 2048, "a frame's room ends inside its chunk");
    let past = x.tailroom() as isize + 1;
    assert_eq!(x.adjust_tail(past), Err(XdpError::OutOfBounds));
    xdp_tx(x)
}

/// DPDK's AF_XDP default, 2 KiB chunks, on a zero-copy queue through the module's host: with
/// UMEM headroom the chunk is refused (no buffer of the table holds a 1514-byte frame in the
/// rest); without, the queue runs on the 1792-byte entry and frames of 60 to 1514 bytes go
/// through XDP_REDIRECT (into the socket), XDP_TX (back to the sender) and XDP_PASS (a copy for
/// the stack) byte for byte, nothing is written past any chunk, and every chunk comes back.
#[test]
fn two_kib_chunks_carry_full_frames_through_redirect_tx_and_pass() {
    let (card, os, a, b) = open_pair(1);
    os.bind_xsk(0, 64, 2048, 256);
    assert_eq!(
        set_source(&a, 0, SourceKind::Xsk),
        Err(onic_linux::errno::EINVAL),
        "2 KiB less 256 bytes of headroom holds no buffer for a full frame"
    );
    *os.1.borrow_mut() = Xsk::default();
    let chunks = 256;
    os.bind_xsk(0, chunks, 2048, 0);
    set_source(&a, 0, SourceKind::Xsk).unwrap();
    let lens = [60, 61, 128, 1000, 1471, 1472, 1473, 1500, 1513, 1514];
    let sent = |n0: u8| -> Vec<Vec<u8>> {
        let frames: Vec<Vec<u8>> = lens.iter().zip(n0..).map(|(&l, n)| frame(n, l)).collect();
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(send(&os, &b, 0, f, i + 1 < frames.len()), XmitResult::Ok);
        }
        frames
    };
    let delivered = |os: &HostOs| std::mem::take(&mut os.0.borrow_mut().delivered);

    let frames = sent(0);
    drain(&card, [(&a, Some(xdp_redirect as Prog)), (&b, None)]);
    reclaim(&card, &b, 0);
    assert_eq!(
        os.xsk_consume(),
        frames,
        "XDP_REDIRECT: every frame in the socket"
    );

    let frames = sent(20);
    drain(&card, [(&a, Some(xdp_tx_in_2k as Prog)), (&b, None)]);
    reclaim(&card, &b, 0);
    let back: Vec<Vec<u8>> = delivered(&os).into_iter().map(|d| d.1).collect();
    let swapped: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut g = f.clone();
            g[..6].copy_from_slice(&f[6..12]);
            g[6..12].copy_from_slice(&f[..6]);
            g
        })
        .collect();
    assert_eq!(
        back, swapped,
        "XDP_TX: every frame back at the sender, MACs swapped"
    );

    let frames = sent(40);
    drain(&card, [(&a, Some(xdp_pass as Prog)), (&b, None)]);
    reclaim(&card, &b, 0);
    let passed: Vec<Vec<u8>> = delivered(&os).into_iter().map(|d| d.1).collect();
    assert_eq!(passed, frames, "XDP_PASS: a copy of every frame for the stack");
    assert!(os.xsk_canaries_intact(), "nothing written past a chunk");

    switch_back_and_finish(&card, &os, (a, b), chunks);
}
