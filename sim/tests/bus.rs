//! A card behind a host bus (`Card::with_bus`): every device access goes to the bus with the
//! queue's function as requester, and an access the bus refuses is a `BusFault` violation.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::*;
use onic_hal::regs::qdma;
use onic_hal::{RegValue, RegisterAccess};
use onic_sim::{AccessProblem, BusError, Card, CardConfig, DeviceAccess, DeviceBus, Violation};

/// Host memory at bus addresses `BASE..BASE + LEN`; function `f` may reach only its own half
/// (an IOMMU domain per function). Every access is logged as (func, addr, len, write).
struct Memory {
    bytes: RefCell<Vec<u8>>,
    log: RefCell<Vec<(u8, u64, usize, bool)>>,
    /// Functions whose bus mastering is off (bit per function).
    master_off: core::cell::Cell<u8>,
}

const BASE: u64 = 0x4000_0000;
const LEN: usize = 0x10000;

impl Memory {
    fn window(&self, func: u8, addr: u64, len: usize) -> Result<usize, BusError> {
        if self.master_off.get() & 1 << func != 0 {
            return Err(BusError::MasterOff);
        }
        let half = LEN as u64 / 2;
        let lo = BASE + half * u64::from(func);
        let end = addr.checked_add(len as u64).ok_or(BusError::Refused)?;
        if addr < lo || end > lo + half {
            return Err(BusError::Refused);
        }
        Ok((addr - BASE) as usize)
    }
}

#[derive(Clone)]
struct Shared(Rc<Memory>);

impl DeviceBus for Shared {
    fn read(&self, func: u8, addr: u64, out: &mut [u8]) -> Result<(), BusError> {
        self.0.log.borrow_mut().push((func, addr, out.len(), false));
        let at = self.0.window(func, addr, out.len())?;
        out.copy_from_slice(&self.0.bytes.borrow()[at..at + out.len()]);
        Ok(())
    }

    fn write(&self, func: u8, addr: u64, data: &[u8]) -> Result<(), BusError> {
        self.0.log.borrow_mut().push((func, addr, data.len(), true));
        let at = self.0.window(func, addr, data.len())?;
        self.0.bytes.borrow_mut()[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }
}

fn bus_card() -> (Card, Shared) {
    let mem = Shared(Rc::new(Memory {
        bytes: RefCell::new(vec![0; LEN]),
        log: RefCell::new(Vec::new()),
        master_off: core::cell::Cell::new(0),
    }));
    let card = Card::with_bus(CardConfig::default(), Box::new(mem.clone()));
    init_globals(&card);
    setup_function(&card, 0, 8);
    setup_function(&card, 1, 8);
    enable_cmacs(&card);
    (card, mem)
}

/// An H2C queue of function `func` (queue 0, 64-entry ring) whose ring is at `ring`.
fn h2c_queue(card: &Card, func: u8, ring: u64) {
    let abs = 64 * u32::from(func);
    ctxt_cmd(card, SEL_SW_H2C, OP_CLEAR, abs);
    ctxt_write(
        card,
        SEL_SW_H2C,
        abs,
        &[
            u32::from(func) << 17,
            0x0011000D | (SMALL_RING << 12),
            ring as u32,
            (ring >> 32) as u32,
            0,
        ],
    );
    ctxt_cmd(card, SEL_HW_H2C, OP_CLEAR, abs);
    ctxt_cmd(card, SEL_CR_H2C, OP_CLEAR, abs);
}

fn post(mem: &Shared, ring: u64, slot: u64, data: u64, len: u16) {
    let at = (ring - BASE + 16 * slot) as usize;
    let mut b = mem.0.bytes.borrow_mut();
    b[at..at + 8].copy_from_slice(&(u64::from(len) | u64::from(len) << 32).to_le_bytes());
    b[at + 8..at + 16].copy_from_slice(&data.to_le_bytes());
}

fn doorbell(card: &Card, func: u8, pidx: u32) {
    card.qdma(func).write(
        qdma::dmap_sel_h2c_dsc_pidx(onic_hal::QueueId::new(0)),
        RegValue::from_bits(pidx),
    );
}

#[test]
fn transmit_reads_descriptors_and_data_over_the_bus_as_the_queues_function() {
    let (card, mem) = bus_card();
    let ring = BASE + LEN as u64 / 2; // function 1's half
    let data = ring + 0x2000;
    let frame: Vec<u8> = (0..60u8).collect();
    {
        let at = (data - BASE) as usize;
        mem.0.bytes.borrow_mut()[at..at + 60].copy_from_slice(&frame);
    }
    h2c_queue(&card, 1, ring);
    post(&mem, ring, 0, data, 60);
    doorbell(&card, 1, 1);
    card.run_until_idle();
    assert_eq!(card.violations(), []);
    assert_eq!(card.take_egress(1), vec![frame]);
    let log = mem.0.log.borrow();
    assert!(
        log.iter().all(|&(f, ..)| f == 1),
        "requester is the queue's function: {log:?}"
    );
    assert!(log.contains(&(1, ring, 16, false)), "descriptor fetch: {log:?}");
    assert!(log.contains(&(1, data, 60, false)), "data read: {log:?}");
    assert!(log.iter().any(|&(_, _, _, w)| w), "status writeback: {log:?}");
}

#[test]
fn an_access_the_bus_refuses_is_a_bus_fault_and_nothing_leaves() {
    let (card, mem) = bus_card();
    let ring = BASE + LEN as u64 / 2;
    // Function 0's half: outside function 1's IOMMU domain.
    let data = BASE + 0x100;
    h2c_queue(&card, 1, ring);
    post(&mem, ring, 0, data, 60);
    doorbell(&card, 1, 1);
    card.run_until_idle();
    assert_eq!(card.take_egress(1), Vec::<Vec<u8>>::new());
    assert_eq!(
        card.violations(),
        [Violation::DeviceAccess {
            access: DeviceAccess::H2cDataRead,
            addr: onic_hal::DmaAddr::new(data),
            len: 60,
            problem: AccessProblem::BusFault,
        }]
    );
}

#[test]
fn an_access_of_a_function_whose_bus_mastering_is_off_is_told_apart() {
    let (card, mem) = bus_card();
    let ring = BASE + LEN as u64 / 2;
    h2c_queue(&card, 1, ring);
    post(&mem, ring, 0, ring + 0x2000, 60);
    mem.0.master_off.set(0b10);
    doorbell(&card, 1, 1);
    card.run_until_idle();
    assert_eq!(card.take_egress(1), Vec::<Vec<u8>>::new());
    assert_eq!(
        card.violations(),
        [Violation::DeviceAccess {
            access: DeviceAccess::H2cDescFetch,
            addr: onic_hal::DmaAddr::new(ring),
            len: 16,
            problem: AccessProblem::MasterOff,
        }]
    );
}

#[test]
fn no_deadline_until_a_completion_timer_runs() {
    let (card, _mem) = bus_card();
    assert_eq!(card.next_deadline_ns(), None);
}
