//! Functions of the C glue that the Rust side calls (`os-linux/kernel/onic_glue.h` declares the
//! same prototypes). Everything the kernel keeps in inline functions or macros (kmalloc flags,
//! spinlocks, the DMA API, NAPI, skbs) is reached through these small helpers.

use core::ffi::{c_int, c_void};

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
    /// `spin_lock_bh`.
    pub fn onic_lock_bh(lock: *mut c_void);
    /// `spin_unlock_bh`.
    pub fn onic_unlock_bh(lock: *mut c_void);

    /// Waits `us` microseconds (sleeps when the context allows it).
    pub fn onic_udelay(us: u32);
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
    /// `dma_sync_single_for_cpu` (`for_cpu`) or `_for_device`.
    pub fn onic_dma_sync(dev: *mut c_void, dma: u64, len: usize, dir: c_int, for_cpu: bool);

    /// A model interrupt for PCI function `func`, MSI-X vector `vector`: schedules that queue's
    /// NAPI (simulation mode).
    pub fn onic_sim_irq(sim: *mut c_void, func: u8, vector: u16);
    /// Builds an skb from a copy of the frame and hands it to GRO on `napi`. False when no skb
    /// could be allocated.
    pub fn onic_rx_frame(napi: *mut c_void, data: *const u8, len: u32) -> bool;
}
