//! AF_XDP on the model host: what the kernel's XSK code does for a socket bound to a queue (its
//! UMEM, its buffer pool's free list, its four rings) in plain memory, and the application's
//! side of those rings, so that the port's zero-copy path runs without a kernel.
//!
//! An [`XskSocket`] is bound to one queue index of one port ([`super::ModelHost::xsk_bind`]).
//! Its UMEM is [`XskConfig::chunks`] chunks of [`XskConfig::chunk_size`] bytes (2 KiB or 4 KiB,
//! the sizes AF_XDP takes on 4 KiB pages), addressed as AF_XDP does (`chunk * chunk_size +
//! offset`). Each chunk keeps a model DMA page of its own (mapped both ways, as the kernel maps a
//! UMEM; the UMEM need not be contiguous for the driver), and the driver sees only the chunk's
//! bytes of it ([`XskBuf::size`]). The rest of a 2 KiB chunk's page carries a canary that
//! [`XskSocket::overruns`] checks: neither the device nor the driver may write past a chunk.
//! Its rings are laid out as the kernel lays them out ([`UserRing`]: power-of-two entries,
//! free-running 32-bit producer and consumer indices): fill and completion carry UMEM addresses,
//! RX and TX descriptors (`XskDesc`).
//!
//! # Who owns a chunk
//!
//! Each chunk is in exactly one state: the application's (named by at most one of: its idle
//! list, the fill, RX, completion or TX ring), on the pool's free list, in the driver's hands
//! as an RX buffer (its page moved into an [`XskBuf`]), or on a TX ring (its page stays here, the
//! device reads it). The driver takes a chunk only through the fill and TX rings and only while it
//! is the application's: anything else (an address outside the UMEM, a chunk handed over twice, a
//! TX descriptor running past its chunk) is refused and counted, never a panic. [`XskSocket::census`]
//! checks the whole picture against the port's own count ([`XskHoldings`]).

use alloc::vec::Vec;

use onic_core::config::RX_HEADROOM;
use onic_core::queue::pool::{release_to_hal, take_from_hal};
use onic_core::queue::xsk::XskDesc;
use onic_hal::{Direction, DmaAddr, DmaMemory, DmaPage, PAGE_SIZE};

use onic_core::xdp::RawXdpProgram;

use super::{ModelAccess, ModelHost, QMem};
use crate::port::{FrameAt, SkbHash, XskBuf, XskHoldings, XskTxDesc};

/// The chunk sizes a socket takes: AF_XDP's powers of two from 2048 to the page size.
pub const CHUNK_SIZES: [u32; 2] = [2048, 4096];
/// The byte the part of a chunk's page past the chunk holds while nobody overruns the chunk.
const CANARY: u8 = 0xa5;
/// The shortest frame the MAC sends; a shorter TX frame is zero-padded in its chunk.
const ETH_ZLEN: usize = 60;
/// UMEM pages are mapped both ways: RX, XDP_TX and TX from the same chunks.
const DIR: Direction = Direction::Bidirectional;

/// A ring between the application and the driver, as the kernel lays it out: `2^n` entries,
/// a producer and a consumer index that run freely over 32 bits; the entry of index `i` is
/// `entries[i & (len - 1)]`, the ring holds `producer - consumer` entries.
#[derive(Debug)]
pub struct UserRing<T> {
    producer: u32,
    consumer: u32,
    entries: Vec<T>,
    /// Times the consumer found the indices impossible (more entries than the ring holds).
    pub bad_index: u64,
}

impl<T: Copy + Default> UserRing<T> {
    fn new(len: u32) -> Option<Self> {
        (len.is_power_of_two() && len <= 1 << 16).then(|| Self {
            producer: 0,
            consumer: 0,
            entries: (0..len).map(|_| T::default()).collect(),
            bad_index: 0,
        })
    }

    /// Entries the ring holds at most.
    #[must_use]
    pub fn capacity(&self) -> u32 {
        // CAST: at most 2^16 entries (`new`).
        self.entries.len() as u32
    }

    /// Entries in the ring now (as the indices say, which the producer may have corrupted).
    #[must_use]
    pub const fn len(&self) -> u32 {
        self.producer.wrapping_sub(self.consumer)
    }

    /// Whether the ring is empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Room for the producer.
    #[must_use]
    pub fn free(&self) -> u32 {
        self.capacity().saturating_sub(self.len())
    }

    fn slot(&mut self, i: u32) -> &mut T {
        let mask = self.entries.len() - 1;
        // In bounds: masked by a power of two below the length.
        &mut self.entries[i as usize & mask]
    }

    /// Adds an entry (the producer's side). `Err` gives it back when the ring is full.
    ///
    /// # Errors
    ///
    /// The entry, when the ring is full.
    pub fn produce(&mut self, entry: T) -> Result<(), T> {
        if self.free() == 0 {
            return Err(entry);
        }
        let p = self.producer;
        *self.slot(p) = entry;
        self.producer = p.wrapping_add(1);
        Ok(())
    }

    /// Takes the oldest entry (the consumer's side). Impossible indices are counted and read as
    /// an empty ring.
    pub fn consume(&mut self) -> Option<T> {
        if self.len() > self.capacity() {
            self.bad_index += 1;
            return None;
        }
        if self.is_empty() {
            return None;
        }
        let c = self.consumer;
        let e = *self.slot(c);
        self.consumer = c.wrapping_add(1);
        Some(e)
    }

    /// The entries in the ring, oldest first (none when the indices are impossible).
    pub fn entries(&self) -> impl Iterator<Item = T> + '_ {
        let n = if self.len() > self.capacity() {
            0
        } else {
            self.len()
        };
        let mask = self.entries.len() - 1;
        (0..n).filter_map(move |i| {
            self.entries
                .get(self.consumer.wrapping_add(i) as usize & mask)
                .copied()
        })
    }

    /// The producer's index.
    #[must_use]
    pub const fn producer(&self) -> u32 {
        self.producer
    }

    /// Sets the producer index as a misbehaving application could (tests of the checks).
    pub fn set_producer(&mut self, producer: u32) {
        self.producer = producer;
    }
}

/// The settings of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XskConfig {
    /// Chunks of the UMEM.
    pub chunks: u32,
    /// Bytes of a chunk: one of [`CHUNK_SIZES`].
    pub chunk_size: u32,
    /// Bytes at the start of each chunk the driver leaves alone.
    pub headroom: u16,
    /// Entries of the fill, completion, RX and TX rings (powers of two).
    pub rings: [u32; 4],
}

/// Why a socket could not be bound, used or unbound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XskError {
    /// No chunk, or too many (more than 2^20).
    Chunks(u32),
    /// A chunk size AF_XDP refuses (not a power of two from 2048 to the page size).
    ChunkSize(u32),
    /// A headroom that leaves no room for a frame in a chunk.
    Headroom(u16),
    /// A ring size that is not a power of two up to 2^16.
    RingSize(u32),
    /// The model has no memory left for the UMEM.
    NoMemory,
    /// A socket is bound to the queue already.
    Bound,
    /// No socket is bound to the queue.
    NotBound,
    /// The driver still holds chunks of the UMEM (the queue still runs on it).
    InUse {
        /// Chunks the driver holds.
        held: u32,
    },
    /// An address outside the UMEM, or of a chunk the application does not own now.
    NotOwned(u64),
}

impl core::fmt::Display for XskError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Chunks(n) => write!(f, "{n} chunks: one to 2^20 wanted"),
            Self::ChunkSize(n) => write!(f, "chunks of {n} bytes: 2048 or 4096 wanted"),
            Self::Headroom(h) => write!(f, "headroom {h} leaves no room for a frame"),
            Self::RingSize(n) => write!(f, "ring of {n} entries: a power of two up to 65536 wanted"),
            Self::NoMemory => f.write_str("no memory for the UMEM"),
            Self::Bound => f.write_str("a socket is bound to the queue already"),
            Self::NotBound => f.write_str("no socket is bound to the queue"),
            Self::InUse { held } => write!(f, "the driver still holds {held} chunks"),
            Self::NotOwned(a) => write!(f, "address {a:#x}: not a chunk the application owns"),
        }
    }
}

/// Counters of a socket, as the kernel keeps them (`XDP_STATISTICS` and the pool's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Chunks the driver took from the fill ring.
    pub fill_taken: u64,
    /// Fill ring entries refused (outside the UMEM, or a chunk the application did not own).
    pub fill_invalid: u64,
    /// Frames put in the RX ring (zero-copy redirects).
    pub rx_delivered: u64,
    /// Redirects refused because the RX ring was full.
    pub rx_ring_full: u64,
    /// Frames passed to the stack as copies.
    pub rx_copied: u64,
    /// Frames the driver took from the TX ring.
    pub tx_taken: u64,
    /// TX ring entries refused (outside the UMEM, empty, past their chunk, not owned).
    pub tx_invalid: u64,
    /// Addresses put in the completion ring.
    pub completed: u64,
    /// Buffers given back that the socket did not hand out (a driver bug: kept aside).
    pub stray: u64,
}

/// Where a chunk is.
enum Chunk {
    /// The application's.
    App(DmaPage),
    /// On the pool's free list.
    Free(DmaPage),
    /// An RX buffer of the driver (its page is in an [`XskBuf`]).
    Rx,
    /// On a TX ring (the device reads it here).
    Tx(DmaPage),
}

/// A socket bound to one queue: UMEM, free list, rings, and the application's idle chunks.
pub struct XskSocket {
    chunks: Vec<Chunk>,
    /// Bytes of a chunk (one of [`CHUNK_SIZES`], at most a page).
    size: usize,
    free: Vec<u32>,
    headroom: u16,
    /// Completion entries reserved for TX frames taken and not completed.
    reserved: u32,
    /// The fill ring (application to driver).
    pub fill: UserRing<u64>,
    /// The completion ring (driver to application).
    pub comp: UserRing<u64>,
    /// The RX ring (driver to application).
    pub rx: UserRing<XskDesc>,
    /// The TX ring (application to driver).
    pub tx: UserRing<XskDesc>,
    /// The application's chunks in none of its rings (chunk addresses).
    pub idle: Vec<u64>,
    /// The counters.
    pub stats: XskStats,
    /// Pages handed back that the socket did not hand out.
    stray: Vec<DmaPage>,
}

impl XskSocket {
    /// A socket with `cfg`'s UMEM and rings, every chunk idle with the application.
    pub(crate) fn new<D: DmaMemory>(dma: &D, cfg: XskConfig) -> Result<Self, XskError> {
        if cfg.chunks == 0 || cfg.chunks > 1 << 20 {
            return Err(XskError::Chunks(cfg.chunks));
        }
        if !CHUNK_SIZES.contains(&cfg.chunk_size) || cfg.chunk_size as usize > PAGE_SIZE {
            return Err(XskError::ChunkSize(cfg.chunk_size));
        }
        let size = cfg.chunk_size as usize;
        if usize::from(cfg.headroom) + RX_HEADROOM as usize >= size {
            return Err(XskError::Headroom(cfg.headroom));
        }
        let [f, c, r, t] = cfg.rings;
        let addrs = |n: u32| UserRing::new(n).ok_or(XskError::RingSize(n));
        let descs = |n: u32| UserRing::new(n).ok_or(XskError::RingSize(n));
        let mut s = Self {
            chunks: Vec::new(),
            size,
            free: Vec::new(),
            headroom: cfg.headroom,
            reserved: 0,
            fill: addrs(f)?,
            comp: addrs(c)?,
            rx: descs(r)?,
            tx: descs(t)?,
            idle: Vec::new(),
            stats: XskStats::default(),
            stray: Vec::new(),
        };
        for i in 0..cfg.chunks {
            let page = dma
                .alloc_page()
                .ok()
                .and_then(|m| dma.map_page(m, DIR).map_err(|(m, _)| dma.free_page(m)).ok());
            let Some(mut page) = page else {
                s.free_pages(dma);
                return Err(XskError::NoMemory);
            };
            if size < PAGE_SIZE {
                if let Some(past) = page.bytes_mut().get_mut(size..) {
                    past.fill(CANARY);
                }
                dma.sync_for_device(&page, size, PAGE_SIZE - size, DIR);
            }
            s.chunks.push(Chunk::App(page));
            s.idle.push(s.addr_of(i as usize));
        }
        Ok(s)
    }

    /// Bytes of a chunk.
    #[must_use]
    pub const fn chunk_size(&self) -> u32 {
        // CAST: 2048 or 4096 (`new`).
        self.size as u32
    }

    /// The UMEM address of chunk `i`'s first byte.
    fn addr_of(&self, i: usize) -> u64 {
        i as u64 * self.size as u64
    }

    /// Offset of `addr` in its chunk.
    fn offset_of(&self, addr: u64) -> usize {
        // CAST: below the chunk size.
        (addr % self.size as u64) as usize
    }

    /// Chunks whose page holds other bytes past the chunk than the socket put there: the device
    /// or the driver wrote past a chunk. Only the chunks whose pages are here now are looked at
    /// (the driver's RX buffers are not); 4 KiB chunks fill their page and have nothing to
    /// check.
    pub fn overruns<D: DmaMemory>(&self, dma: &D) -> u32 {
        if self.size >= PAGE_SIZE {
            return 0;
        }
        let spoilt = self
            .chunks
            .iter()
            .filter_map(|c| match c {
                Chunk::App(p) | Chunk::Free(p) | Chunk::Tx(p) => Some(p),
                Chunk::Rx => None,
            })
            .filter(|p| {
                dma.sync_for_cpu(p, self.size, PAGE_SIZE - self.size, DIR);
                p.bytes()
                    .get(self.size..)
                    .is_some_and(|b| b.iter().any(|&x| x != CANARY))
            })
            .count();
        // CAST: at most 2^20 chunks.
        spoilt as u32
    }

    /// Chunks of the UMEM.
    #[must_use]
    pub fn chunks(&self) -> u32 {
        // CAST: at most 2^20 (`new`).
        self.chunks.len() as u32
    }

    /// The UMEM headroom.
    #[must_use]
    pub const fn headroom(&self) -> u16 {
        self.headroom
    }

    fn index(&self, addr: u64) -> Option<usize> {
        let i = usize::try_from(addr / self.size as u64).ok()?;
        (i < self.chunks.len()).then_some(i)
    }

    /// Chunks the driver holds (RX buffers and TX frames).
    pub(crate) fn driver_held(&self) -> u32 {
        let n = self
            .chunks
            .iter()
            .filter(|c| matches!(c, Chunk::Rx | Chunk::Tx(_)))
            .count();
        // CAST: at most 2^20 chunks.
        n as u32
    }

    /// Frees every page (the socket goes away); the pages the driver holds are not here.
    fn free_pages<D: DmaMemory>(&mut self, dma: &D) {
        for c in core::mem::take(&mut self.chunks) {
            if let Chunk::App(p) | Chunk::Free(p) | Chunk::Tx(p) = c {
                onic_core::queue::pool::release_to_hal(dma, DIR, p);
            }
        }
        for p in core::mem::take(&mut self.stray) {
            onic_core::queue::pool::release_to_hal(dma, DIR, p);
        }
        self.free.clear();
    }

    /// Unbinds: the free list goes back to the application, the UMEM's pages are freed; the
    /// caller checked that the driver holds no chunk ([`XskSocket::driver_held`]).
    pub(crate) fn close<D: DmaMemory>(mut self, dma: &D) -> XskStats {
        let stats = self.stats;
        self.free_pages(dma);
        stats
    }

    /// The application reads or writes chunk `addr` falls in (the whole chunk, nothing past it)
    /// while it owns it.
    ///
    /// # Errors
    ///
    /// `NotOwned` for an address outside the UMEM or of a chunk the application does not own.
    pub fn with_chunk<R>(&mut self, addr: u64, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, XskError> {
        let size = self.size;
        match self.index(addr).and_then(|i| self.chunks.get_mut(i)) {
            Some(Chunk::App(p)) => Ok(f(p.bytes_mut().get_mut(..size).unwrap_or(&mut []))),
            _ => Err(XskError::NotOwned(addr)),
        }
    }

    /// A copy of the frame an RX descriptor names (the application's read).
    ///
    /// # Errors
    ///
    /// `NotOwned` when the descriptor does not lie in a chunk the application owns.
    pub fn frame(&mut self, d: XskDesc) -> Result<Vec<u8>, XskError> {
        let off = self.offset_of(d.addr);
        let end = off + d.len as usize;
        self.with_chunk(d.addr, |b| b.get(off..end).map(<[u8]>::to_vec))?
            .ok_or(XskError::NotOwned(d.addr))
    }
}

/// The driver's side (what the port's host calls).
impl XskSocket {
    /// An RX buffer: the free list first, then the fill ring (refusing and counting entries that
    /// do not name a chunk the application owns).
    pub(crate) fn alloc<D: DmaMemory>(&mut self, dma: &D) -> Option<XskBuf<DmaPage>> {
        let i = match self.free.pop() {
            Some(i) => i as usize,
            None => self.take_fill()?,
        };
        let page = match core::mem::replace(self.chunks.get_mut(i)?, Chunk::Rx) {
            Chunk::App(p) | Chunk::Free(p) => p,
            other => {
                // Not reached: the free list and `take_fill` name only such chunks.
                if let Some(c) = self.chunks.get_mut(i) {
                    *c = other;
                }
                return None;
            }
        };
        let off = usize::from(self.headroom);
        dma.sync_for_device(&page, off, self.size - off, DIR);
        Some(XskBuf {
            page,
            addr: self.addr_of(i),
            headroom: self.headroom,
            size: self.chunk_size(),
        })
    }

    fn take_fill(&mut self) -> Option<usize> {
        while let Some(addr) = self.fill.consume() {
            match self.index(addr) {
                Some(i) if matches!(self.chunks.get(i), Some(Chunk::App(_))) => {
                    self.stats.fill_taken += 1;
                    return Some(i);
                }
                _ => self.stats.fill_invalid += 1,
            }
        }
        None
    }

    /// Takes an RX buffer back from the driver into the chunk it came from, in state `to`;
    /// `Err` gives it back when that chunk is not the driver's RX buffer.
    fn put_back(&mut self, buf: XskBuf<DmaPage>, to: fn(DmaPage) -> Chunk) -> Result<usize, XskBuf<DmaPage>> {
        let i = match self.index(buf.addr) {
            Some(i)
                if matches!(self.chunks.get(i), Some(Chunk::Rx))
                    && self.offset_of(buf.addr) == 0
                    && buf.size == self.chunk_size() =>
            {
                i
            }
            _ => return Err(buf),
        };
        if let Some(c) = self.chunks.get_mut(i) {
            *c = to(buf.page);
        }
        Ok(i)
    }

    /// An RX buffer back on the free list.
    pub(crate) fn free_buf(&mut self, buf: XskBuf<DmaPage>) {
        match self.put_back(buf, Chunk::Free) {
            // CAST: at most 2^20 chunks.
            Ok(i) => self.free.push(i as u32),
            Err(b) => {
                self.stats.stray += 1;
                self.stray.push(b.page);
            }
        }
    }

    /// A redirected frame into the RX ring, the chunk the application's.
    pub(crate) fn deliver(&mut self, buf: XskBuf<DmaPage>, at: FrameAt) -> Result<(), XskBuf<DmaPage>> {
        if self.rx.free() == 0 {
            self.stats.rx_ring_full += 1;
            return Err(buf);
        }
        let desc = XskDesc {
            addr: buf.view_addr() + u64::from(at.offset),
            len: u32::from(at.len),
            options: 0,
        };
        self.put_back(buf, Chunk::App)?;
        // Room checked above.
        let _ = self.rx.produce(desc);
        self.stats.rx_delivered += 1;
        Ok(())
    }

    /// The next valid frame of the TX ring, padded and synced, its completion reserved.
    pub(crate) fn tx_take<D: DmaMemory>(&mut self, dma: &D) -> Option<XskTxDesc> {
        if self.comp.free() <= self.reserved {
            return None;
        }
        while let Some(d) = self.tx.consume() {
            if let Some(t) = self.tx_frame(dma, d) {
                self.reserved += 1;
                self.stats.tx_taken += 1;
                return Some(t);
            }
            self.stats.tx_invalid += 1;
        }
        None
    }

    fn tx_frame<D: DmaMemory>(&mut self, dma: &D, d: XskDesc) -> Option<XskTxDesc> {
        let i = self.index(d.addr)?;
        let off = self.offset_of(d.addr);
        let len = d.len as usize;
        let ready = len.max(ETH_ZLEN);
        if len == 0 || off + ready > self.size {
            return None;
        }
        let slot = self.chunks.get_mut(i)?;
        let mut page = match core::mem::replace(slot, Chunk::Rx) {
            Chunk::App(p) => p,
            other => {
                // Not the application's now: refused, the chunk stays where it is.
                *slot = other;
                return None;
            }
        };
        if let Some(pad) = page.bytes_mut().get_mut(off + len..off + ready) {
            pad.fill(0);
        }
        dma.sync_for_device(&page, off, ready, DIR);
        let dma_addr = DmaAddr::new(page.dma_addr().get() + off as u64);
        *slot = Chunk::Tx(page);
        Some(XskTxDesc {
            addr: d.addr,
            // CAST: at most a chunk.
            len: ready as u32,
            dma: dma_addr,
        })
    }

    /// The device is done with a TX frame: the chunk back to the application, its address into
    /// the completion ring (room was reserved when it was taken).
    pub(crate) fn tx_done(&mut self, t: XskTxDesc) {
        let slot = self.index(t.addr).and_then(|i| self.chunks.get_mut(i));
        let Some(slot) = slot else {
            self.stats.stray += 1;
            return;
        };
        match core::mem::replace(slot, Chunk::Rx) {
            Chunk::Tx(p) => *slot = Chunk::App(p),
            other => {
                *slot = other;
                self.stats.stray += 1;
                return;
            }
        }
        self.reserved = self.reserved.saturating_sub(1);
        let _ = self.comp.produce(t.addr);
        self.stats.completed += 1;
    }
}

/// Where a socket's chunks are ([`XskSocket::census`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskCensus {
    /// The application's, idle.
    pub idle: u32,
    /// In the fill ring.
    pub fill: u32,
    /// In the RX ring.
    pub rx: u32,
    /// In the completion ring.
    pub comp: u32,
    /// In the TX ring, not taken yet.
    pub tx: u32,
    /// On the pool's free list.
    pub free: u32,
    /// RX buffers of the driver (RX slots, XDP_TX).
    pub driver_rx: u32,
    /// Application frames on a TX ring.
    pub driver_tx: u32,
    /// Entries of the application's idle list and rings that name no chunk it owns, or one
    /// named before: its own mistakes, which the driver refuses when it gets to them (an honest
    /// application has none: [`XskSocket::census_strict`]).
    pub garbage: u32,
}

/// A UMEM census that does not add up: a chunk lost or handed out twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XskCensusError {
    /// The socket holds other RX buffers out than the port's rings hold.
    DriverRx {
        /// Chunks the socket sees with the driver.
        socket: u32,
        /// What the port's rings hold.
        port: u64,
    },
    /// The socket has other TX frames out than the port's rings carry, or other completions
    /// reserved.
    DriverTx {
        /// Chunks the socket sees on a TX ring.
        socket: u32,
        /// What the port's rings carry.
        port: u64,
        /// Completion entries reserved.
        reserved: u32,
    },
    /// A chunk of the application's that neither its idle list nor any of its rings names:
    /// lost.
    Lost {
        /// The chunk's address.
        addr: u64,
    },
    /// Entries of the application's idle list or rings that name no chunk it owns, or name one
    /// twice ([`XskCensus::garbage`]), where none may be.
    Garbage(u32),
    /// The free list and the chunks on it differ.
    FreeList {
        /// Entries of the list.
        listed: u32,
        /// Chunks in that state.
        chunks: u32,
    },
    /// Buffers came back that the socket never handed out, or of the wrong kind.
    Stray(u64),
}

impl core::fmt::Display for XskCensusError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::DriverRx { socket, port } => {
                write!(f, "UMEM: {socket} RX buffers out, the port's rings hold {port}")
            }
            Self::DriverTx {
                socket,
                port,
                reserved,
            } => write!(
                f,
                "UMEM: {socket} TX frames out, the port's rings carry {port}, {reserved} completions reserved"
            ),
            Self::Lost { addr } => write!(
                f,
                "UMEM: chunk {addr:#x} is the application's, but none of its rings names it"
            ),
            Self::Garbage(n) => write!(
                f,
                "UMEM: {n} entries of the application's rings name no chunk it owns, or one twice"
            ),
            Self::FreeList { listed, chunks } => {
                write!(f, "UMEM: free list of {listed}, {chunks} chunks free")
            }
            Self::Stray(n) => write!(f, "UMEM: {n} buffers came back that were never handed out"),
        }
    }
}

impl XskSocket {
    /// Checks that every chunk is in exactly one place: the application's chunks each named by
    /// its idle list or one of its rings (entries beyond that are counted as
    /// [`XskCensus::garbage`]), the free list exactly the free chunks, the driver's exactly what
    /// the port's rings hold (`port`: the port's holdings of this queue, `None` when the queue
    /// does not run on this socket).
    ///
    /// # Errors
    ///
    /// The first discrepancy found: a chunk lost, the driver's count and the port's apart.
    pub fn census(&self, port: Option<&XskHoldings>) -> Result<XskCensus, XskCensusError> {
        let foreign = port.map_or(0, |h| h.foreign);
        if self.stats.stray + foreign > 0 {
            return Err(XskCensusError::Stray(self.stats.stray + foreign));
        }
        let mut c = XskCensus::default();
        let mut named = alloc::vec![false; self.chunks.len()];
        for (addrs, n) in [
            (self.idle.clone(), &mut c.idle),
            (self.fill.entries().collect(), &mut c.fill),
            (self.rx.entries().map(|d| d.addr).collect(), &mut c.rx),
            (self.comp.entries().collect(), &mut c.comp),
            (self.tx.entries().map(|d| d.addr).collect::<Vec<_>>(), &mut c.tx),
        ] {
            for addr in addrs {
                let owned = self
                    .index(addr)
                    .filter(|&i| matches!(self.chunks.get(i), Some(Chunk::App(_))));
                match owned.and_then(|i| named.get_mut(i)) {
                    Some(seen) if !*seen => {
                        *seen = true;
                        *n += 1;
                    }
                    _ => c.garbage += 1,
                }
            }
        }
        for (i, ch) in self.chunks.iter().enumerate() {
            match ch {
                Chunk::App(_) if !named.get(i).copied().unwrap_or(false) => {
                    return Err(XskCensusError::Lost {
                        addr: self.addr_of(i),
                    })
                }
                Chunk::App(_) => {}
                Chunk::Free(_) => c.free += 1,
                Chunk::Rx => c.driver_rx += 1,
                Chunk::Tx(_) => c.driver_tx += 1,
            }
        }
        self.check_driver(&c, port)?;
        Ok(c)
    }

    /// [`XskSocket::census`] for an honest application: no garbage either.
    ///
    /// # Errors
    ///
    /// As [`XskSocket::census`], and [`XskCensusError::Garbage`].
    pub fn census_strict(&self, port: Option<&XskHoldings>) -> Result<XskCensus, XskCensusError> {
        let c = self.census(port)?;
        if c.garbage > 0 {
            return Err(XskCensusError::Garbage(c.garbage));
        }
        Ok(c)
    }

    fn check_driver(&self, c: &XskCensus, port: Option<&XskHoldings>) -> Result<(), XskCensusError> {
        // CAST: at most 2^20 chunks.
        let listed = self.free.len() as u32;
        if listed != c.free {
            return Err(XskCensusError::FreeList {
                listed,
                chunks: c.free,
            });
        }
        let h = port.copied().unwrap_or_default();
        let rx = h.in_rx_ring + h.in_tx_flight + h.tx_parked;
        if u64::from(c.driver_rx) != rx {
            return Err(XskCensusError::DriverRx {
                socket: c.driver_rx,
                port: rx,
            });
        }
        if u64::from(c.driver_tx) != h.app_tx_in_flight || c.driver_tx != self.reserved {
            return Err(XskCensusError::DriverTx {
                socket: c.driver_tx,
                port: h.app_tx_in_flight,
                reserved: self.reserved,
            });
        }
        Ok(())
    }
}

/// The application's side of the rings.
impl XskSocket {
    /// Puts up to `n` idle chunks in the fill ring; returns how many.
    pub fn app_fill(&mut self, n: usize) -> usize {
        let mut put = 0;
        while put < n && self.fill.free() > 0 {
            let Some(addr) = self.idle.pop() else { break };
            // Room checked above.
            let _ = self.fill.produce(addr);
            put += 1;
        }
        put
    }

    /// Takes the oldest frame of the RX ring: the application owns its chunk, named by the
    /// descriptor only, until it puts it in a ring or back in [`XskSocket::idle`].
    pub fn app_take_rx(&mut self) -> Option<XskDesc> {
        self.rx.consume()
    }

    /// Makes chunk `addr` falls in idle again (after reading a frame).
    pub fn app_release(&mut self, addr: u64) {
        self.idle.push(addr - self.offset_of(addr) as u64);
    }

    /// Moves every completion to the idle list; returns how many.
    pub fn app_reap(&mut self) -> usize {
        let mut n = 0;
        while let Some(a) = self.comp.consume() {
            self.app_release(a);
            n += 1;
        }
        n
    }

    /// Puts a frame of the application's own chunk in the TX ring (l2fwd: a received frame
    /// sent back from where it lies).
    ///
    /// # Errors
    ///
    /// The descriptor, when the TX ring is full.
    pub fn app_tx(&mut self, d: XskDesc) -> Result<(), XskDesc> {
        self.tx.produce(d)
    }

    /// Writes `frame` at the start of an idle chunk and puts it in the TX ring; `false` when no
    /// chunk is idle, the TX ring is full or the frame is longer than a chunk.
    pub fn app_send(&mut self, frame: &[u8]) -> bool {
        if self.tx.free() == 0 || frame.len() > self.size || frame.is_empty() {
            return false;
        }
        let Some(addr) = self.idle.pop() else { return false };
        let written = self.with_chunk(addr, |b| {
            if let Some(d) = b.get_mut(..frame.len()) {
                d.copy_from_slice(frame);
            }
        });
        if written.is_err() {
            self.idle.push(addr);
            return false;
        }
        let d = XskDesc {
            addr,
            // CAST: at most a chunk.
            len: frame.len() as u32,
            options: 0,
        };
        // Room checked above.
        let _ = self.tx.produce(d);
        true
    }
}

impl<P: RawXdpProgram, A: ModelAccess> ModelHost<P, A> {
    /// Binds a new socket with `cfg`'s UMEM and rings to queue index `qid` of this host's port
    /// (the kernel's `bind` of an AF_XDP socket); the port takes its frames once told so
    /// (`Port::set_queue_source`).
    ///
    /// # Errors
    ///
    /// `Bound` when a socket is bound there already; the settings' errors; `NoMemory`.
    pub fn xsk_bind(&self, qid: u16, cfg: XskConfig) -> Result<(), XskError> {
        let mut net = self.net.borrow_mut();
        if net.xsk.contains_key(&(self.port, qid)) {
            return Err(XskError::Bound);
        }
        let s = XskSocket::new(&self.dma, cfg)?;
        net.xsk.insert((self.port, qid), s);
        Ok(())
    }

    /// Unbinds queue `qid`'s socket (after the port went back to its page pool, or stopped) and
    /// frees its UMEM; returns its counters.
    ///
    /// # Errors
    ///
    /// `NotBound`; `InUse` while the driver holds chunks (the socket stays bound).
    pub fn xsk_unbind(&self, qid: u16) -> Result<XskStats, XskError> {
        let mut net = self.net.borrow_mut();
        let s = net.xsk.get(&(self.port, qid)).ok_or(XskError::NotBound)?;
        let held = s.driver_held();
        if held > 0 {
            return Err(XskError::InUse { held });
        }
        let s = net.xsk.remove(&(self.port, qid)).ok_or(XskError::NotBound)?;
        Ok(s.close(&self.dma))
    }

    /// Chunks of queue `qid`'s socket written past their end ([`XskSocket::overruns`]); `None`
    /// when no socket is bound there.
    pub fn xsk_overruns(&self, qid: u16) -> Option<u32> {
        self.xsk_mut(qid, |s, dma| s.overruns(dma))
    }

    /// Runs `f` on queue `qid`'s socket (the application's side: its rings, its chunks); `None`
    /// when none is bound. `f` must not call the port.
    pub fn with_xsk<R>(&self, qid: u16, f: impl FnOnce(&mut XskSocket) -> R) -> Option<R> {
        self.net.borrow_mut().xsk.get_mut(&(self.port, qid)).map(f)
    }

    pub(super) fn xsk_mut<R>(&self, qid: u16, f: impl FnOnce(&mut XskSocket, &A::Dma) -> R) -> Option<R> {
        let dma = self.dma;
        self.with_xsk(qid, |s| f(s, &dma))
    }

    /// An RX buffer back to its socket's free list (to the HAL if the socket is gone, which
    /// `xsk_unbind` rules out while the driver holds chunks).
    pub(super) fn xsk_put(&self, qid: u16, buf: XskBuf<DmaPage>) {
        let mut net = self.net.borrow_mut();
        match net.xsk.get_mut(&(self.port, qid)) {
            Some(s) => s.free_buf(buf),
            None => onic_core::queue::pool::release_to_hal(&self.dma, DIR, buf.page),
        }
    }

    /// A redirect of a UMEM frame: into the RX ring of the socket of the frame's own queue
    /// when the program named that queue (an xskmap indexed by queue, as AF_XDP programs do)
    /// or no target.
    pub(super) fn xsk_deliver(
        &self,
        qid: u16,
        buf: XskBuf<DmaPage>,
        at: FrameAt,
        target: Option<u32>,
    ) -> Result<(), XskBuf<DmaPage>> {
        if target.is_some_and(|t| t != u32::from(qid)) {
            return Err(buf);
        }
        let mut net = self.net.borrow_mut();
        match net.xsk.get_mut(&(self.port, qid)) {
            Some(s) => s.deliver(buf, at),
            None => Err(buf),
        }
    }

    /// A copy of a frame of a zero-copy queue for the stack, in a page of the queue's pool.
    pub(super) fn deliver_copy(
        &self,
        (mem, qid): (QMem, u16),
        frame: &[u8],
        meta: u8,
        hash: Option<SkbHash>,
    ) -> bool {
        let mut net = self.net.borrow_mut();
        // The copy's page: a queue on an XSK pool has no page pool (as in the kernel module,
        // whose copy is a fresh skb), so it comes from the HAL, and goes back there when the
        // stack is done with it.
        let page = match net.pools.get_mut(usize::from(mem)).and_then(Option::as_mut) {
            Some(p) => p.alloc(),
            None => take_from_hal(&self.dma, super::PAGE_DIR),
        };
        let Some(mut page) = page else {
            return false;
        };
        let start = RX_HEADROOM as usize;
        let Some(dst) = page.bytes_mut().get_mut(start..start + frame.len()) else {
            match net.pools.get_mut(usize::from(mem)).and_then(Option::as_mut) {
                Some(p) => p.recycle(page, 0),
                None => release_to_hal(&self.dma, super::PAGE_DIR, page),
            }
            return false;
        };
        dst.copy_from_slice(frame);
        // CAST: a frame fits a page.
        let len = (frame.len() - usize::from(meta)) as u16;
        let at = FrameAt {
            offset: (start + usize::from(meta)) as u16,
            len,
            meta,
        };
        if let Some(s) = net.xsk.get_mut(&(self.port, qid)) {
            s.stats.rx_copied += 1;
        }
        net.received.push(super::Received {
            port: self.port,
            qid,
            mem,
            page,
            at,
            hash,
        });
        true
    }
}
