//! How queue pairs are built. [`QueueTuning`] is what a host may choose for a port before its
//! queues start: the RX buffer sizes (one for every queue, or a cycle of sizes by queue index) and
//! the completion entry size, the shell's largest frame, the RX queues' checks of a device that
//! stalls or lies, and the stall limit of the stack's TX ring. The kernel module keeps the
//! defaults; a test rig over the model changes them to reach the paths they guard.
//!
//! [`QueueTuning::pair_spec`] turns a tuning into the [`PairSpec`] of one queue index: the one
//! place where a pair's RX, TX and pool configurations are derived, for a port's queues and for
//! the bare pairs of the bench rigs and the core's own checks ([`PairSpec::new`]) alike.

use onic_core::config::{xsk_room_for, BufSizeIdx, RingSizeIdx, RxQueueConfig, TxQueueConfig};
use onic_core::queue::pool::PoolConfig;
use onic_core::queue::rx::{RxOptions, DEFAULT_MAX_FRAME_LEN, RX_STALL_POLLS_DEFAULT};
use onic_core::QueueId;
use onic_hal::layout::desc::CmptEntrySize;
use onic_hal::regs::qdma::GLOBAL_TABLE_LEN;
use onic_hal::Direction;

/// Everything one pair is built from ([`crate::set::assemble_pair`]).
#[derive(Clone, Copy, Debug)]
pub struct PairSpec {
    /// The RX queue.
    pub rx: RxQueueConfig,
    /// How the RX queue treats what it receives.
    pub opts: RxOptions,
    /// The TX queue.
    pub tx: TxQueueConfig,
    /// The pool.
    pub pool: PoolConfig,
}

impl PairSpec {
    /// Queue `q` (RX and TX) with all rings of `ring` and RX buffers of `buf`, every other
    /// setting a port's default ([`QueueTuning::default`]).
    #[must_use]
    pub fn new(q: QueueId, ring: RingSizeIdx, buf: BufSizeIdx) -> Self {
        QueueTuning {
            bufs: RxBufSizes::all(buf),
            ..QueueTuning::default()
        }
        .pair_spec(q.get(), q, (ring, ring))
    }
}

/// Most sizes an [`RxBufSizes`] cycle holds.
pub const MAX_RX_BUF_SIZES: usize = 8;

/// The C2H buffer size of each RX queue: queue `q` gets size `q % n` of a cycle of `n` sizes
/// (one size: every queue the same, the default). A test rig over the model gives its queues
/// different sizes so that one run sees frames that fit one buffer and frames that span several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxBufSizes {
    sizes: [BufSizeIdx; MAX_RX_BUF_SIZES],
    len: u8,
}

impl RxBufSizes {
    /// Every queue with buffers of `buf`.
    #[must_use]
    pub const fn all(buf: BufSizeIdx) -> Self {
        Self {
            sizes: [buf; MAX_RX_BUF_SIZES],
            len: 1,
        }
    }

    /// Queue `q` with buffers of `sizes[q % sizes.len()]`; `None` for no sizes or more than
    /// [`MAX_RX_BUF_SIZES`].
    #[must_use]
    pub fn cycle(sizes: &[BufSizeIdx]) -> Option<Self> {
        let first = *sizes.first()?;
        let len = u8::try_from(sizes.len())
            .ok()
            .filter(|&n| usize::from(n) <= MAX_RX_BUF_SIZES)?;
        let mut all = [first; MAX_RX_BUF_SIZES];
        all[..sizes.len()].copy_from_slice(sizes);
        Some(Self { sizes: all, len })
    }

    /// The buffer size of RX queue index `q`.
    #[must_use]
    pub fn for_queue(&self, q: u16) -> BufSizeIdx {
        let i = usize::from(q) % usize::from(self.len.max(1));
        self.sizes.get(i).copied().unwrap_or(self.sizes[0])
    }

    /// The sizes of the cycle, in queue order.
    #[must_use]
    pub fn sizes(&self) -> &[BufSizeIdx] {
        // `len` is 1..=MAX_RX_BUF_SIZES by construction; `get` keeps a panic out of the module.
        self.sizes
            .get(..usize::from(self.len))
            .unwrap_or(&self.sizes[..1])
    }

    /// The smallest buffer of any queue: what bounds the MTU, since a frame may arrive on any
    /// queue and must fit one buffer there.
    #[must_use]
    pub fn smallest(&self) -> BufSizeIdx {
        self.sizes()
            .iter()
            .copied()
            .min_by_key(|b| b.bytes())
            .unwrap_or(self.sizes[0])
    }
}

impl Default for RxBufSizes {
    fn default() -> Self {
        Self::all(RxQueueConfig::new(QueueId::new(0)).buf)
    }
}

/// Settings every queue of a port is built with ([`crate::port::Port::set_tuning`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueTuning {
    /// C2H buffer size of each RX queue.
    pub bufs: RxBufSizes,
    /// Completion entry size of the RX queues.
    pub cmpt_entry: CmptEntrySize,
    /// Largest frame the shell passes (its build parameter, hardware.md §14): longer
    /// completions are bad lengths.
    pub max_frame_len: u32,
    /// Whether RX queues compare the device's C2H consumer index with theirs
    /// ([`RxOptions::check_c2h_status`]).
    pub check_c2h_status: bool,
    /// Polls without progress before an RX queue gives up ([`RxOptions::stall_polls`]).
    pub stall_polls: u16,
    /// Reclaims of the stack's stopped TX ring without progress before it enters its error
    /// state; 0 (the default): never, the OS's watchdog watches that ring (`ndo_tx_timeout`).
    pub stack_stall_reclaims: u32,
}

impl Default for QueueTuning {
    fn default() -> Self {
        Self {
            bufs: RxBufSizes::default(),
            cmpt_entry: CmptEntrySize::B8,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            check_c2h_status: true,
            stall_polls: RX_STALL_POLLS_DEFAULT,
            stack_stall_reclaims: 0,
        }
    }
}

impl QueueTuning {
    /// The configuration of RX queue `q` with descriptor and completion rings of `ring`, its
    /// buffers of the size [`RxBufSizes::for_queue`] gives it.
    pub(crate) fn rx_config(&self, q: u16, ring: RingSizeIdx) -> RxQueueConfig {
        RxQueueConfig {
            buf: self.bufs.for_queue(q),
            desc_ring: ring,
            cmpt_ring: ring,
            cmpt_entry: self.cmpt_entry,
            ..RxQueueConfig::new(QueueId::new(q))
        }
    }

    /// The largest frame a queue must hold in one buffer: the shell's largest, bounded by the
    /// smallest buffer of any queue (which bounds the MTU a port allows).
    fn largest_frame(&self) -> u32 {
        self.max_frame_len.min(self.bufs.smallest().bytes())
    }

    /// The C2H buffer of RX queue `q` when it runs on UMEM frames with `room` bytes each (a
    /// chunk less the UMEM headroom): its own buffer ([`RxBufSizes::for_queue`]) when a frame
    /// holds it behind the RX headroom (up to the chunk's end, [`xsk_room_for`]), else the
    /// largest buffer of the driver's table that fits so and still holds the largest frame the
    /// port passes (a 4 KiB chunk with up to 2048 bytes of UMEM headroom gets 2048-byte buffers,
    /// a 2 KiB chunk without headroom 1792-byte ones).
    ///
    /// # Errors
    ///
    /// The bytes a frame needs, when none fits: the RX headroom and the smallest buffer that
    /// holds the largest frame.
    pub fn xsk_buf(&self, q: u16, room: u32) -> Result<BufSizeIdx, u32> {
        let fits = |b: BufSizeIdx| xsk_room_for(b.bytes()) <= room;
        let own = self.bufs.for_queue(q);
        if fits(own) {
            return Ok(own);
        }
        let frame = self.largest_frame();
        let holding = (0..GLOBAL_TABLE_LEN as u8)
            .filter_map(|i| BufSizeIdx::new(i).ok())
            .filter(|b| b.bytes() >= frame);
        if let Some(b) = holding.clone().filter(|&b| fits(b)).max_by_key(|b| b.bytes()) {
            return Ok(b);
        }
        let smallest = holding.map(BufSizeIdx::bytes).min().unwrap_or(own.bytes());
        Err(xsk_room_for(smallest))
    }

    /// How an RX queue of configuration `rx` treats what it receives.
    fn rx_options(&self, rx: &RxQueueConfig) -> RxOptions {
        RxOptions {
            max_frame_len: self.max_frame_len,
            check_c2h_status: self.check_c2h_status,
            stall_polls: self.stall_polls,
            ..RxOptions::for_queue(rx)
        }
    }

    /// The pair of queue index `q`: its RX queue with the buffer [`RxBufSizes::for_queue`] gives it, its TX
    /// queue `tx_qid` (a port's XDP_TX ring of that index), both on `q`'s vector, the rings
    /// `(tx, rx)`, and a pool mapping its pages both ways (XDP_TX and redirects send them out).
    #[must_use]
    pub fn pair_spec(
        &self,
        q: u16,
        tx_qid: QueueId,
        (tx_ring, rx_ring): (RingSizeIdx, RingSizeIdx),
    ) -> PairSpec {
        let rx = self.rx_config(q, rx_ring);
        PairSpec {
            rx,
            opts: self.rx_options(&rx),
            tx: TxQueueConfig {
                qid: tx_qid,
                ring: tx_ring,
                vector: q,
            },
            pool: PoolConfig::rx(Direction::Bidirectional, rx.buf.bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onic_core::config::XSK_2K_BUF_SIZE_INDEX;

    fn idx(i: u8) -> BufSizeIdx {
        BufSizeIdx::new(i).unwrap()
    }

    #[test]
    fn each_queue_gets_the_size_of_its_place_in_the_cycle() {
        let bufs = RxBufSizes::cycle(&[idx(5), idx(4), idx(3), idx(2)]).unwrap();
        let got: [u8; 6] = core::array::from_fn(|q| bufs.for_queue(q as u16).index());
        assert_eq!(got, [5, 4, 3, 2, 5, 4]);
        assert_eq!(bufs.sizes().len(), 4);
        assert_eq!(bufs.smallest(), idx(2));
        let tuning = QueueTuning {
            bufs,
            ..QueueTuning::default()
        };
        let ring = RingSizeIdx::new(1).unwrap();
        for q in 0..6u16 {
            let rx = tuning.rx_config(q, ring);
            assert_eq!(rx.buf, bufs.for_queue(q));
            assert_eq!(rx.qid, QueueId::new(q));
        }
    }

    #[test]
    fn one_size_is_every_queues_and_a_cycle_has_one_to_eight_sizes() {
        let one = RxBufSizes::all(idx(3));
        assert!((0..20).all(|q| one.for_queue(q) == idx(3)));
        assert_eq!(one.sizes(), &[idx(3)]);
        assert_eq!(RxBufSizes::cycle(&[idx(3)]), Some(one));
        assert_eq!(RxBufSizes::cycle(&[]), None);
        assert_eq!(RxBufSizes::cycle(&[idx(2); MAX_RX_BUF_SIZES + 1]), None);
        let eight = RxBufSizes::cycle(&[idx(2); MAX_RX_BUF_SIZES]).unwrap();
        assert_eq!(eight.sizes().len(), MAX_RX_BUF_SIZES);
        assert_eq!(
            QueueTuning::default().bufs.for_queue(7),
            RxQueueConfig::new(QueueId::new(7)).buf
        );
    }

    #[test]
    fn a_umem_frame_gets_the_largest_buffer_that_fits_and_holds_a_frame() {
        let t = QueueTuning::default();
        // 4 KiB chunks, up to 320 bytes of UMEM headroom: the queue's own 3520 bytes (256 + 3520
        // reach the chunk's end; no tailroom is kept in a UMEM frame).
        assert_eq!(t.xsk_buf(0, 4096), Ok(t.bufs.for_queue(0)));
        assert_eq!(t.xsk_buf(0, 4096 - 320), Ok(t.bufs.for_queue(0)));
        // More headroom: the next smaller buffer, 2048 bytes, up to 1792 bytes of it.
        assert_eq!(t.xsk_buf(0, 4096 - 321).map(BufSizeIdx::bytes), Ok(2048));
        assert_eq!(t.xsk_buf(0, 4096 - 1792).map(BufSizeIdx::bytes), Ok(2048));
        // Then the 2 KiB-chunk entry, 1792 bytes: a 2 KiB chunk without headroom, or a 4 KiB
        // chunk with up to 2048 bytes of it.
        assert_eq!(t.xsk_buf(0, 4096 - 1793).map(BufSizeIdx::bytes), Ok(1792));
        assert_eq!(
            t.xsk_buf(0, 2048),
            Ok(BufSizeIdx::new(XSK_2K_BUF_SIZE_INDEX).unwrap())
        );
        // Beyond that nothing holds a 1514-byte frame (1024 bytes would not): 256 + 1792 is
        // what a frame needs. A 2 KiB chunk with DPDK's or libxdp's 256 bytes of headroom is
        // refused.
        assert_eq!(t.xsk_buf(0, 2047), Err(2048));
        assert_eq!(t.xsk_buf(0, 2048 - 256), Err(2048));
        // A shell passing 1000-byte frames at most: a 2 KiB chunk with 256 bytes of headroom
        // holds a 1024-byte buffer, without headroom the 1792-byte one.
        let small = QueueTuning {
            max_frame_len: 1000,
            ..QueueTuning::default()
        };
        assert_eq!(small.xsk_buf(3, 2048 - 256).map(BufSizeIdx::bytes), Ok(1024));
        assert_eq!(small.xsk_buf(3, 2048).map(BufSizeIdx::bytes), Ok(1792));
        // A queue whose own buffer fits keeps it, however small.
        let cycle = QueueTuning {
            bufs: RxBufSizes::cycle(&[idx(5), idx(2)]).unwrap(),
            ..QueueTuning::default()
        };
        assert_eq!(cycle.xsk_buf(1, 2048), Ok(idx(2)));
        // The largest frame of that port is bounded by its 512-byte queue: 1024 fits 2 KiB less
        // 256 bytes of headroom.
        assert_eq!(cycle.xsk_buf(0, 2048 - 256).map(BufSizeIdx::bytes), Ok(1024));
        assert_eq!(cycle.xsk_buf(0, 2048).map(BufSizeIdx::bytes), Ok(1792));
    }

    #[test]
    fn a_bare_pair_is_built_as_a_ports_queue_with_the_same_settings() {
        let (ring, tx_ring) = (RingSizeIdx::new(2).unwrap(), RingSizeIdx::new(1).unwrap());
        let bare = PairSpec::new(QueueId::new(3), ring, idx(4));
        assert_eq!(bare.rx.qid, QueueId::new(3));
        assert_eq!(bare.tx.qid, QueueId::new(3));
        assert_eq!(
            (bare.rx.desc_ring, bare.rx.cmpt_ring, bare.tx.ring),
            (ring, ring, ring)
        );
        assert_eq!((bare.rx.vector, bare.tx.vector), (3, 3));
        assert_eq!(bare.rx.buf, idx(4));
        assert_eq!(bare.pool.sync_max, idx(4).bytes() as usize);
        assert_eq!(bare.pool.dir, Direction::Bidirectional);
        assert_eq!(bare.opts, RxOptions::for_queue(&bare.rx));
        // A port's queue 3 with its XDP_TX ring elsewhere, and a tuning of its own.
        let tuning = QueueTuning {
            bufs: RxBufSizes::cycle(&[idx(5), idx(2)]).unwrap(),
            max_frame_len: 9000,
            stall_polls: 7,
            ..QueueTuning::default()
        };
        let port = tuning.pair_spec(3, QueueId::new(11), (tx_ring, ring));
        assert_eq!((port.rx.qid, port.tx.qid), (QueueId::new(3), QueueId::new(11)));
        assert_eq!((port.tx.ring, port.rx.desc_ring), (tx_ring, ring));
        assert_eq!(port.tx.vector, 3);
        assert_eq!(port.rx.buf, idx(2));
        assert_eq!(port.pool.sync_max, idx(2).bytes() as usize);
        assert_eq!((port.opts.max_frame_len, port.opts.stall_polls), (9000, 7));
    }
}
