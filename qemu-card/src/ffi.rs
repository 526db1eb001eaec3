//! The C ABI QEMU's `onic-card` device calls (`qemu-card/qemu/onic_card.c`). Its header,
//! `onic_model.h`, is generated from this file by cbindgen (`cargo xtask qemu-card`).
//!
//! Contract: every call on one model comes from one thread at a time (QEMU calls device code
//! under its big lock), the host's callbacks never call back into the model, and a model is
//! used only between `onic_model_new` and `onic_model_free`.

use core::ffi::{c_char, c_void};
use std::ffi::CString;

use onic_sim::{BusError, DeviceBus};

use crate::model::{Bar, Host, Model, ModelConfig};

/// `onic_model_run`'s answer when no completion timer is running and the traffic generator is
/// stopped.
pub const ONIC_MODEL_NO_DEADLINE: u64 = u64::MAX;

/// A DMA callback's answer: the access was carried out.
pub const ONIC_DMA_OK: u32 = 0;
/// A DMA callback's answer: the bus refused the access (an IOMMU without a mapping for it,
/// nothing behind the address).
pub const ONIC_DMA_REFUSED: u32 = 1;
/// A DMA callback's answer: the function's bus mastering is off (its PCI command register),
/// so the access never left the card.
pub const ONIC_DMA_MASTER_OFF: u32 = 2;

/// What the emulator gives the model: its DMA, interrupts, network backend and log, each a
/// callback that receives `opaque` first.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OnicModelHost {
    /// Passed back to every callback.
    pub opaque: *mut c_void,
    /// Reads `len` bytes of guest memory at bus address `addr` into `buf`, as PCI function
    /// `func` (through its IOMMU domain). Returns [`ONIC_DMA_OK`], [`ONIC_DMA_REFUSED`] or
    /// [`ONIC_DMA_MASTER_OFF`].
    pub dma_read:
        unsafe extern "C" fn(opaque: *mut c_void, func: u8, addr: u64, buf: *mut u8, len: usize) -> u32,
    /// Writes `len` bytes from `buf` to guest memory at `addr`, as function `func`. Returns as
    /// `dma_read`.
    pub dma_write:
        unsafe extern "C" fn(opaque: *mut c_void, func: u8, addr: u64, buf: *const u8, len: usize) -> u32,
    /// Raises MSI-X vector `vector` of function `func`.
    pub irq: unsafe extern "C" fn(opaque: *mut c_void, func: u8, vector: u16),
    /// A frame of `len` bytes at `buf` left port `port` (open ports only).
    pub egress: unsafe extern "C" fn(opaque: *mut c_void, port: u8, buf: *const u8, len: usize),
    /// One line (NUL-terminated, no newline) for the emulator's log.
    pub log: unsafe extern "C" fn(opaque: *mut c_void, line: *const c_char),
}

/// The card's build, as `onic_model_new` takes it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OnicModelConfig {
    /// PCI functions (1..=4).
    pub functions: u8,
    /// CMAC ports (1..=2).
    pub ports: u8,
    /// The shell's queue budget.
    pub total_queues: u16,
    /// false: the two ports are cabled to each other; true: frames go to `egress` and come in
    /// through `onic_model_inject`.
    pub open_ports: bool,
}

/// The host's callbacks as the model's [`Host`].
#[derive(Clone, Copy, Debug)]
struct CHost(OnicModelHost);

impl DeviceBus for CHost {
    fn read(&self, func: u8, addr: u64, out: &mut [u8]) -> Result<(), BusError> {
        // SAFETY: `onic_model_new`'s contract: `dma_read` stays callable with this `opaque` for
        // the model's life and writes at most `len` bytes to `buf`; `out` is `len` writable
        // bytes that nothing else references during the call.
        bus_result(unsafe { (self.0.dma_read)(self.0.opaque, func, addr, out.as_mut_ptr(), out.len()) })
    }

    fn write(&self, func: u8, addr: u64, data: &[u8]) -> Result<(), BusError> {
        // SAFETY: as in `read`; `dma_write` only reads the `len` bytes at `buf`.
        bus_result(unsafe { (self.0.dma_write)(self.0.opaque, func, addr, data.as_ptr(), data.len()) })
    }
}

/// A DMA callback's answer as the model's bus result (an unknown answer is a refusal).
fn bus_result(status: u32) -> Result<(), BusError> {
    match status {
        ONIC_DMA_OK => Ok(()),
        ONIC_DMA_MASTER_OFF => Err(BusError::MasterOff),
        _ => Err(BusError::Refused),
    }
}

impl Host for CHost {
    fn irq(&self, func: u8, vector: u16) {
        // SAFETY: `onic_model_new`'s contract: `irq` stays callable with this `opaque`.
        unsafe { (self.0.irq)(self.0.opaque, func, vector) };
    }

    fn egress(&self, port: u8, frame: &[u8]) {
        // SAFETY: as for `irq`; `egress` only reads the `len` bytes at `buf` during the call.
        unsafe { (self.0.egress)(self.0.opaque, port, frame.as_ptr(), frame.len()) };
    }

    fn log(&self, line: &str) {
        let Ok(line) = CString::new(line) else {
            return;
        };
        // SAFETY: as for `irq`; `line` is NUL-terminated and lives across the call.
        unsafe { (self.0.log)(self.0.opaque, line.as_ptr()) };
    }
}

/// One emulated card (opaque to C).
#[derive(Debug)]
pub struct OnicModel(Model<CHost>);

/// Creates a card in its power-on state. Returns NULL if `cfg` or `host` is NULL.
///
/// # Safety
///
/// `cfg` and `host` are NULL or valid for reads. The callbacks in `host` stay callable with
/// `host.opaque` until `onic_model_free`; `dma_read` writes at most `len` bytes to its buffer,
/// and no callback calls into this model.
#[no_mangle]
pub unsafe extern "C" fn onic_model_new(
    cfg: *const OnicModelConfig,
    host: *const OnicModelHost,
) -> *mut OnicModel {
    // SAFETY: the caller passes NULL or pointers valid for reads.
    let (Some(cfg), Some(host)) = (unsafe { cfg.as_ref() }, unsafe { host.as_ref() }) else {
        return core::ptr::null_mut();
    };
    let cfg = ModelConfig {
        functions: cfg.functions,
        ports: cfg.ports,
        total_queues: cfg.total_queues,
        open_ports: cfg.open_ports,
    };
    Box::into_raw(Box::new(OnicModel(Model::new(cfg, CHost(*host)))))
}

/// Frees a card; NULL is ignored.
///
/// # Safety
///
/// `m` is NULL or came from `onic_model_new` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn onic_model_free(m: *mut OnicModel) {
    if !m.is_null() {
        // SAFETY: `m` came from `Box::into_raw` in `onic_model_new` and is freed once.
        drop(unsafe { Box::from_raw(m) });
    }
}

/// The model behind `m`.
///
/// # Safety
///
/// `m` came from `onic_model_new`, is not freed, and no other reference to it is live (the
/// one-thread contract of this module).
unsafe fn model<'a>(m: *mut OnicModel) -> Option<&'a mut Model<CHost>> {
    // SAFETY: the caller's contract.
    unsafe { m.as_mut() }.map(|m| &mut m.0)
}

/// Back to the power-on state (a PCI reset of the card).
///
/// # Safety
///
/// `m` is NULL or a live model, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn onic_model_reset(m: *mut OnicModel) {
    // SAFETY: the caller's contract.
    if let Some(m) = unsafe { model(m) } {
        m.reset();
    }
}

fn bar(index: u8) -> Option<Bar> {
    match index {
        onic_hal::pci::QDMA_BAR => Some(Bar::Qdma),
        onic_hal::pci::SHELL_BAR => Some(Bar::Shell),
        _ => None,
    }
}

/// A read of `size` bytes at `offset` of BAR `bar_index` (0: QDMA, 2: shell) of function
/// `func`. Anything but an aligned 32-bit access reads all ones (and is counted).
///
/// # Safety
///
/// `m` is NULL or a live model, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn onic_model_bar_read(
    m: *mut OnicModel,
    func: u8,
    bar_index: u8,
    offset: u64,
    size: u32,
) -> u32 {
    // SAFETY: the caller's contract.
    match (unsafe { model(m) }, bar(bar_index)) {
        (Some(m), Some(b)) => m.bar_read(func, b, offset, size),
        _ => u32::MAX,
    }
}

/// A write of `size` bytes at `offset` of BAR `bar_index` of function `func`. Call
/// `onic_model_run` afterwards to let the card act on it.
///
/// # Safety
///
/// `m` is NULL or a live model, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn onic_model_bar_write(
    m: *mut OnicModel,
    func: u8,
    bar_index: u8,
    offset: u64,
    size: u32,
    value: u32,
) {
    // SAFETY: the caller's contract.
    if let (Some(m), Some(b)) = (unsafe { model(m) }, bar(bar_index)) {
        m.bar_write(func, b, offset, size, value);
    }
}

/// Runs the card up to host time `now_ns` (any monotonic nanosecond clock) and delivers
/// interrupts, frames and log lines through the host's callbacks. Returns the host time at
/// which to call again (a completion timer, the traffic generator's next frame), or
/// `ONIC_MODEL_NO_DEADLINE`.
///
/// # Safety
///
/// `m` is NULL or a live model, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn onic_model_run(m: *mut OnicModel, now_ns: u64) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { model(m) }
        .and_then(|m| m.run(now_ns))
        .unwrap_or(ONIC_MODEL_NO_DEADLINE)
}

/// A frame of `len` bytes at `buf` arrives at port `port` from outside (open ports only).
///
/// # Safety
///
/// `m` is NULL or a live model, used by one thread at a time; `buf` is valid for `len` bytes
/// (or NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn onic_model_inject(m: *mut OnicModel, port: u8, buf: *const u8, len: usize) {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { model(m) }) else {
        return;
    };
    if buf.is_null() {
        return;
    }
    // SAFETY: `buf` is valid for reads of `len` bytes (the caller's contract).
    let frame = unsafe { core::slice::from_raw_parts(buf, len) };
    m.inject(port, frame);
}

/// A read of the test control window (`ctl.rs`).
///
/// # Safety
///
/// `m` is NULL or a live model, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn onic_model_ctl_read(m: *mut OnicModel, offset: u64) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { model(m) }.map_or(u32::MAX, |m| m.ctl_read(offset))
}

/// A write of the test control window (`ctl.rs`).
///
/// # Safety
///
/// `m` is NULL or a live model, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn onic_model_ctl_write(m: *mut OnicModel, offset: u64, value: u32) {
    // SAFETY: the caller's contract.
    if let Some(m) = unsafe { model(m) } {
        m.ctl_write(offset, value);
    }
}
