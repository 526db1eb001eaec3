//! Functions of the C glue that the Rust side calls (`os-linux/kernel/onic_glue.h` declares the
//! same prototypes). Everything the kernel keeps in inline functions or macros (kmalloc flags,
//! spinlocks, the DMA API, NAPI, skbs) is reached through these small helpers.

use core::ffi::{c_int, c_void};

use crate::abi::XskChunk;

/// `DMA_BIDIRECTIONAL`.
pub const DMA_BIDIRECTIONAL: c_int = 0;
/// `DMA_TO_DEVICE`.
pub const DMA_TO_DEVICE: c_int = 1;
/// `DMA_FROM_DEVICE`.
pub const DMA_FROM_DEVICE: c_int = 2;

extern "C" {
    /// `kmalloc(size)`, GFP_ATOMIC when called in atomic context, else GFP_KERNEL; 8-byte aligned.
    pub fn onic_kmalloc(size: usize) -> *mut u8;
    /// `kfree`.
    pub fn onic_kfree(ptr: *mut u8);
    /// `alloc_pages_exact(size)`: page aligned, whole pages.
    pub fn onic_alloc_pages_exact(size: usize) -> *mut u8;
    /// `free_pages_exact`.
    pub fn onic_free_pages_exact(ptr: *mut u8, size: usize);

    /// printk at `level` (0..7, KERN_EMERG..KERN_DEBUG) of `len` bytes at `msg`.
    pub fn onic_printk(level: c_int, msg: *const u8, len: usize);
    /// `panic()` with the message. Declared returning here (the caller follows it with `ud2`)
    /// so that objtool sees a well-formed end of function.
    pub fn onic_rust_panic(msg: *const u8, len: usize);

    /// A new kernel spinlock (kmalloc'd), or null.
    pub fn onic_lock_new() -> *mut c_void;
    /// Frees a lock from `onic_lock_new`.
    pub fn onic_lock_free(lock: *mut c_void);
    /// `spin_lock_irqsave` (the flags are kept with the lock).
    pub fn onic_lock(lock: *mut c_void);
    /// `spin_unlock_irqrestore`.
    pub fn onic_unlock(lock: *mut c_void);
    /// `mutex_lock` of a card's context-command mutex (process context only).
    pub fn onic_ctx_lock(lock: *mut c_void);
    /// `mutex_unlock`.
    pub fn onic_ctx_unlock(lock: *mut c_void);

    /// Waits `us` microseconds (sleeps when the context allows it).
    pub fn onic_udelay(us: u32);
    /// Makes sure the PCI function behind `dev` reaches no memory: true when it has left the
    /// bus or its bus mastering is now off (false for the model).
    pub fn onic_dma_cut_off(dev: *mut c_void) -> bool;
    /// Busy-waits `ns` nanoseconds.
    pub fn onic_ndelay(ns: u32);

    /// `dma_alloc_coherent(dev, len)`; the device address goes to `*dma`.
    pub fn onic_dma_alloc_coherent(dev: *mut c_void, len: usize, dma: *mut u64) -> *mut u8;
    /// `dma_free_coherent`.
    pub fn onic_dma_free_coherent(dev: *mut c_void, len: usize, cpu: *mut u8, dma: u64);
    /// One zeroed order-0 page (`alloc_page` + `page_address`), or null.
    pub fn onic_page_alloc() -> *mut u8;
    /// Frees a page from `onic_page_alloc`.
    pub fn onic_page_free(cpu: *mut u8);
    /// `dma_map_page` of the page at `cpu`; 0 on success with the address in `*dma`.
    pub fn onic_dma_map_page(dev: *mut c_void, cpu: *mut u8, dir: c_int, dma: *mut u64) -> c_int;
    /// `dma_unmap_page` of a whole page.
    pub fn onic_dma_unmap_page(dev: *mut c_void, dma: u64, dir: c_int);
    /// Whether every DMA sync of the device's streaming mappings does nothing (its masks set).
    pub fn onic_dma_sync_is_noop(dev: *mut c_void) -> bool;
    /// `dma_sync_single_range_for_cpu` (`for_cpu`) or `_for_device`: `len` bytes from `offset`
    /// into the mapping that starts at `dma`.
    pub fn onic_dma_sync(dev: *mut c_void, dma: u64, offset: usize, len: usize, dir: c_int, for_cpu: bool);

    /// `dma_map_single`; 0 on success with the address in `*dma`.
    pub fn onic_dma_map_single(
        dev: *mut c_void,
        cpu: *mut u8,
        len: usize,
        dir: c_int,
        dma: *mut u64,
    ) -> c_int;
    /// `dma_unmap_single`.
    pub fn onic_dma_unmap_single(dev: *mut c_void, dma: u64, len: usize, dir: c_int);
    /// The CPU address of device address `dma` of `dev` under the direct DMA mapping
    /// (`phys_to_virt(dma_to_phys())`: a swiotlb bounce slot when the kernel bounces), or null
    /// when it is not memory the kernel maps.
    pub fn onic_dma_to_virt(dev: *mut c_void, dma: u64) -> *mut u8;

    /// A model interrupt for PCI function `func`, MSI-X vector `vector`: schedules that queue's
    /// NAPI (simulation mode).
    pub fn onic_sim_irq(sim: *mut c_void, func: u8, vector: u16);

    /// Creates queue `qid`'s page_pool and registers its `xdp_rxq_info` with it (MEM_TYPE_PAGE_POOL);
    /// null with `*err` set on failure.
    pub fn onic_qmem_new(
        nd: *mut c_void,
        qid: u16,
        pages: u32,
        page_pool: bool,
        err: *mut c_int,
    ) -> *mut c_void;
    /// Unregisters the queue and destroys its pool.
    pub fn onic_qmem_free(qmem: *mut c_void);
    /// `page_pool_dev_alloc_pages`: the `struct page *`, its address in `*virt` and, when the pool
    /// maps pages, its device address in `*dma`.
    pub fn onic_pp_alloc(qmem: *mut c_void, virt: *mut *mut u8, dma: *mut u64) -> *mut c_void;
    /// `page_pool_put_page(pool, page, dirty, direct)`.
    pub fn onic_pp_put(qmem: *mut c_void, page: *mut c_void, dirty: u32, direct: bool);
    /// `page_pool_get_stats` into 11 values (zeros without CONFIG_PAGE_POOL_STATS).
    pub fn onic_pp_stats(qmem: *mut c_void, out: *mut u64);
    /// `napi_build_skb` over the page, data at `off`, `len` bytes, `meta` bytes of metadata,
    /// marked for recycling into the queue's pool (or unmapped, page-per-packet model); null
    /// when no skb could be had.
    pub fn onic_rx_build(
        qmem: *mut c_void,
        napi: *mut c_void,
        virt: *mut u8,
        off: u16,
        len: u16,
        meta: u8,
    ) -> *mut c_void;
    /// `eth_type_trans`, `skb_record_rx_queue`, `skb_set_hash` (kind 2 L3, 3 L4, 0 none),
    /// `napi_gro_receive`.
    pub fn onic_rx_deliver(napi: *mut c_void, skb: *mut c_void, qid: u16, hash: u32, kind: u8);
    /// A packet's linear data and length.
    pub fn onic_skb_data(skb: *mut c_void, len: *mut usize) -> *mut u8;
    /// `napi_consume_skb(skb, budget)`, or `dev_kfree_skb_any` for a negative budget.
    pub fn onic_skb_done(skb: *mut c_void, budget: c_int);
    /// An xdp_frame's data and length.
    pub fn onic_xdpf_data(frame: *mut c_void, len: *mut usize) -> *mut u8;
    /// `xdp_return_frame`.
    pub fn onic_xdpf_return(frame: *mut c_void);
    /// `bpf_prog_run_xdp` over a kernel xdp_buff of the page, `frame_sz` bytes from `hard_start`
    /// (a page, or a UMEM frame's view); `off` = data_meta, data, data_end (in and out); the hash
    /// is what the RX-metadata callback reports.
    pub fn onic_xdp_run(
        prog: *mut c_void,
        qmem: *mut c_void,
        hard_start: *mut u8,
        frame_sz: u32,
        off: *mut u32,
        hash: u32,
        hash_type: u32,
        has_hash: bool,
    ) -> u32;
    /// Whether the program can call the RX-metadata kfuncs (device-bound, 6.3+).
    pub fn onic_xdp_prog_reads_meta(prog: *mut c_void) -> bool;
    /// `xdp_do_redirect` of the frame; 0 when the kernel took it.
    pub fn onic_xdp_redirect(
        prog: *mut c_void,
        qmem: *mut c_void,
        hard_start: *mut u8,
        off: u16,
        len: u16,
        meta: u8,
    ) -> c_int;
    /// `synchronize_net`.
    pub fn onic_synchronize_net();

    // AF_XDP zero copy (kernel/onic_zc.c).
    /// Bytes per frame of the zero-copy XSK pool of queue `qid` (chunk less UMEM headroom), 0
    /// without one.
    pub fn onic_xsk_room(nd: *mut c_void, qid: u16) -> u32;
    /// `xsk_buff_alloc_batch` from that pool: up to `max` frames, frame `i`'s `struct xdp_buff *`
    /// in `xdps[i]` and its chunk in `out[i]`; returns how many (fewer: the fill ring ran dry).
    pub fn onic_xsk_alloc_batch(
        nd: *mut c_void,
        qid: u16,
        out: *mut XskChunk,
        xdps: *mut *mut c_void,
        max: u32,
    ) -> u32;
    /// `xsk_buff_free`.
    pub fn onic_xsk_free(xdp: *mut c_void);
    /// `xdp_do_redirect` of the frame (`off` from `data_hard_start`); 0 when the kernel took it.
    pub fn onic_xsk_redirect(
        nd: *mut c_void,
        prog: *mut c_void,
        xdp: *mut c_void,
        off: u16,
        len: u16,
        meta: u8,
    ) -> c_int;
    /// `napi_alloc_skb` holding a copy of `len` bytes at `frame` (`meta` bytes of metadata
    /// first); null when none could be had.
    pub fn onic_rx_copy(napi: *mut c_void, frame: *const u8, len: u32, meta: u8) -> *mut c_void;
    /// `xsk_tx_peek_release_desc_batch` of up to `max` descriptors of queue `qid`'s pool into
    /// `out[..n]`, each synced for the device and its completion reserved; returns `n`.
    pub fn onic_xsk_tx_take(nd: *mut c_void, qid: u16, out: *mut XskChunk, max: u32) -> u32;
    /// `xsk_tx_completed(pool, 1)` of queue `qid`'s pool.
    pub fn onic_xsk_tx_done(nd: *mut c_void, qid: u16);
}
