//! The emulated card's adapter: BAR access rules, the control window, violations reaching the
//! log, and the C entry points with C callbacks.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr};
use std::rc::Rc;

use onic_hal::regs::cmac;
use onic_qemu_card::ctl;
use onic_qemu_card::ffi::{self, OnicModelConfig, OnicModelHost};
use onic_qemu_card::model::{Bar, Host, Model, ModelConfig};
use onic_sim::{BusError, DeviceBus};

/// A host that records what the card did.
#[derive(Clone, Default)]
struct Recorder(Rc<RefCell<Vec<String>>>);

impl DeviceBus for Recorder {
    fn read(&self, func: u8, addr: u64, _out: &mut [u8]) -> Result<(), BusError> {
        self.0.borrow_mut().push(format!("read {func} {addr:#x}"));
        Err(BusError::Refused)
    }
    fn write(&self, func: u8, addr: u64, _data: &[u8]) -> Result<(), BusError> {
        self.0.borrow_mut().push(format!("write {func} {addr:#x}"));
        Err(BusError::Refused)
    }
}

impl Host for Recorder {
    fn irq(&self, func: u8, vector: u16) {
        self.0.borrow_mut().push(format!("irq {func} {vector}"));
    }
    fn egress(&self, port: u8, frame: &[u8]) {
        self.0.borrow_mut().push(format!("egress {port} {}", frame.len()));
    }
    fn log(&self, line: &str) {
        self.0.borrow_mut().push(line.to_string());
    }
}

const CFG: ModelConfig = ModelConfig {
    functions: 2,
    ports: 2,
    total_queues: 512,
    open_ports: false,
};

fn core_version(port: u8) -> u64 {
    u64::from(cmac::CORE_VERSION.on(cmac::cmac_base(port)).offset())
}

#[test]
fn bars_reach_the_model_with_aligned_32_bit_accesses_only() {
    let mut m = Model::new(CFG, Recorder::default());
    assert_eq!(
        m.bar_read(0, Bar::Shell, core_version(1), 4),
        cmac::CORE_VERSION_EXPECTED
    );
    assert_eq!(m.ctl_read(ctl::BAD_MMIO.into()), 0);
    assert_eq!(m.bar_read(0, Bar::Shell, core_version(1), 8), u32::MAX);
    assert_eq!(m.bar_read(0, Bar::Shell, core_version(1) + 2, 4), u32::MAX);
    m.bar_write(0, Bar::Qdma, 0x18004, 2, 1);
    assert_eq!(m.ctl_read(ctl::BAD_MMIO.into()), 3);
}

#[test]
fn a_violation_is_counted_and_logged() {
    let rec = Recorder::default();
    let mut m = Model::new(CFG, rec.clone());
    m.bar_write(0, Bar::Shell, 0x3F_0000, 4, 1);
    assert_eq!(m.run(1_000), None);
    assert_eq!(m.ctl_read(ctl::VIOLATIONS.into()), 1);
    assert_eq!(m.ctl_read(ctl::BUS_FAULTS.into()), 0);
    let log = rec.0.borrow();
    assert!(
        log[0].starts_with("onic-card: model violation: BAR2 write 0x3f0000"),
        "{log:?}"
    );
    drop(log);
    m.ctl_write(ctl::VIOLATIONS.into(), 0);
    assert_eq!(m.ctl_read(ctl::VIOLATIONS.into()), 0);
}

#[test]
fn a_wedged_context_engine_reads_busy_and_carries_out_nothing_until_released() {
    let mut m = Model::new(CFG, Recorder::default());
    let cmd = u64::from(onic_hal::regs::qdma::IND_CTXT_CMD.offset());
    let data0 = u64::from(onic_hal::regs::qdma::ind_ctxt_data(0).offset());
    let mask0 = u64::from(onic_hal::regs::qdma::ind_ctxt_mask(0).offset());
    // SW H2C context (sel 1) of queue 3: WRITE (op 1) word 0 = 0x1234, then READ (op 2) it back.
    let write = |m: &mut Model<Recorder>| {
        m.bar_write(0, Bar::Qdma, data0, 4, 0x1234);
        m.bar_write(0, Bar::Qdma, mask0, 4, u32::MAX);
        m.bar_write(0, Bar::Qdma, cmd, 4, 3 << 7 | 1 << 5 | 1 << 1);
    };
    let read_back = |m: &mut Model<Recorder>| {
        m.bar_write(0, Bar::Qdma, cmd, 4, 3 << 7 | 2 << 5 | 1 << 1);
        m.bar_read(0, Bar::Qdma, data0, 4)
    };
    m.ctl_write(ctl::CTXT_BUSY.into(), 1);
    write(&mut m);
    assert_eq!(m.bar_read(0, Bar::Qdma, cmd, 4) & 1, 1, "busy");
    m.ctl_write(ctl::CTXT_BUSY.into(), 0);
    assert_eq!(m.bar_read(0, Bar::Qdma, cmd, 4) & 1, 0, "idle again");
    assert_eq!(read_back(&mut m), 0, "the command written while wedged was lost");
    write(&mut m);
    assert_eq!(read_back(&mut m), 0x1234);
    assert_eq!(m.ctl_read(ctl::VIOLATIONS.into()), 0);
}

#[test]
fn a_card_gone_from_the_bus_reads_all_ones_and_comes_back_reset() {
    let mut m = Model::new(CFG, Recorder::default());
    m.ctl_write(ctl::LINK.into(), 0b01);
    assert_eq!(m.ctl_read(ctl::LINK.into()), 0b01, "port 1 down");
    m.ctl_write(ctl::GONE.into(), 1);
    assert_eq!(m.bar_read(0, Bar::Shell, core_version(0), 4), u32::MAX);
    assert_eq!(m.run(5), None, "a card that is gone does nothing");
    m.ctl_write(ctl::GONE.into(), 0);
    assert_eq!(m.ctl_read(ctl::GONE.into()), 0);
    assert_eq!(
        m.bar_read(0, Bar::Shell, core_version(0), 4),
        cmac::CORE_VERSION_EXPECTED
    );
    assert_eq!(m.ctl_read(ctl::LINK.into()), 0b11, "reset: both links up again");
}

#[test]
fn a_raised_error_reaches_the_error_vector_once_per_arming() {
    let rec = Recorder::default();
    let mut m = Model::new(CFG, rec.clone());
    let glbl_err_int = u64::from(onic_hal::regs::qdma::GLBL_ERR_INT.offset());
    // PF0's vector 9, armed (hardware.md §11.3).
    m.bar_write(0, Bar::Qdma, glbl_err_int, 4, 0x0100_9000);
    m.ctl_write(ctl::RAISE_ERROR.into(), 2 << 24 | 0x8);
    m.ctl_write(ctl::RAISE_ERROR.into(), 2 << 24 | 0x10);
    m.run(1_000);
    let glbl_err_stat = u64::from(onic_hal::regs::qdma::GLBL_ERR_STAT.offset());
    let c2h_err_stat = u64::from(onic_hal::regs::qdma::C2H_ERR_STAT.offset());
    assert_eq!(m.bar_read(0, Bar::Qdma, glbl_err_stat, 4), 1 << 8);
    assert_eq!(m.bar_read(0, Bar::Qdma, c2h_err_stat, 4), 0x18);
    let irqs: Vec<String> = rec
        .0
        .borrow()
        .iter()
        .filter(|l| l.starts_with("irq"))
        .cloned()
        .collect();
    assert_eq!(irqs, ["irq 0 9"]);
    assert_eq!(m.ctl_read(ctl::INTERRUPTS.into()), 1);
}

#[test]
fn the_control_window_identifies_itself() {
    let m = Model::new(CFG, Recorder::default());
    assert_eq!(m.ctl_read(ctl::MAGIC.into()), ctl::MAGIC_VALUE);
    assert_eq!(&ctl::MAGIC_VALUE.to_le_bytes(), b"ONIC");
    assert_eq!(m.ctl_read(ctl::VERSION.into()), ctl::VERSION_VALUE);
    assert_eq!(m.ctl_read(0xFFC), 0);
}

// ---- the C entry points, with C callbacks

unsafe extern "C" fn c_dma_read(_: *mut c_void, _: u8, _: u64, _: *mut u8, _: usize) -> u32 {
    ffi::ONIC_DMA_REFUSED
}
unsafe extern "C" fn c_dma_write(_: *mut c_void, _: u8, _: u64, _: *const u8, _: usize) -> u32 {
    ffi::ONIC_DMA_REFUSED
}
unsafe extern "C" fn c_irq(_: *mut c_void, _: u8, _: u16) {}
unsafe extern "C" fn c_egress(_: *mut c_void, _: u8, _: *const u8, _: usize) {}
unsafe extern "C" fn c_log(opaque: *mut c_void, line: *const c_char) {
    // SAFETY: the test passes a `Vec<String>` as `opaque`; the model passes a C string.
    let (log, line) = unsafe { (&mut *opaque.cast::<Vec<String>>(), CStr::from_ptr(line)) };
    log.push(line.to_string_lossy().into_owned());
}

#[test]
fn the_c_entry_points_drive_the_same_model() {
    let mut log: Vec<String> = Vec::new();
    let host = OnicModelHost {
        opaque: (&raw mut log).cast(),
        dma_read: c_dma_read,
        dma_write: c_dma_write,
        irq: c_irq,
        egress: c_egress,
        log: c_log,
    };
    let cfg = OnicModelConfig {
        functions: 2,
        ports: 2,
        total_queues: 512,
        open_ports: false,
    };
    // SAFETY: valid config and host; the callbacks outlive the model, which is freed below.
    unsafe {
        let m = ffi::onic_model_new(&cfg, &host);
        assert!(!m.is_null());
        assert_eq!(
            ffi::onic_model_bar_read(m, 0, onic_hal::pci::SHELL_BAR, core_version(0), 4),
            cmac::CORE_VERSION_EXPECTED
        );
        assert_eq!(ffi::onic_model_bar_read(m, 0, 4, 0, 4), u32::MAX, "no such BAR");
        ffi::onic_model_bar_write(m, 1, onic_hal::pci::SHELL_BAR, 0x3F_0000, 4, 7);
        assert_eq!(ffi::onic_model_run(m, 10), ffi::ONIC_MODEL_NO_DEADLINE);
        assert_eq!(ffi::onic_model_ctl_read(m, ctl::VIOLATIONS.into()), 1);
        ffi::onic_model_free(m);
        assert!(ffi::onic_model_new(core::ptr::null(), &host).is_null());
        assert_eq!(
            ffi::onic_model_run(core::ptr::null_mut(), 1),
            ffi::ONIC_MODEL_NO_DEADLINE
        );
    }
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].contains("unmapped shell address"), "{log:?}");
}

#[test]
fn frames_from_a_network_backend_are_padded_as_a_sending_mac_would() {
    use onic_qemu_card::model::padded_for_wire;
    let arp = [0xAAu8; 42];
    let p = padded_for_wire(&arp);
    assert_eq!(p.len(), 60);
    assert_eq!(&p[..42], &arp[..]);
    assert!(p[42..].iter().all(|&b| b == 0));
    let full = [0x55u8; 60];
    assert_eq!(&*padded_for_wire(&full), &full[..]);
    assert_eq!(padded_for_wire(&[0u8; 1514]).len(), 1514);
    assert_eq!(padded_for_wire(&[]).len(), 60);
}
