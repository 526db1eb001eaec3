//! PCI configuration space through configuration mechanism #1 (I/O ports 0xCF8 and 0xCFC), as
//! the firmware (SeaBIOS) left it: functions found by their IDs, the addresses the firmware gave
//! their 64-bit memory BARs (and the BARs' sizes), memory decoding and bus mastering turned on
//! and off, and the bridges between a bus and the CPU.
//!
//! The image assigns no resources of its own: it takes what the firmware programmed. The offsets
//! and bits below are the PCI specification's configuration header (type 0 for endpoints, type 1
//! for bridges); nothing here is specific to the OpenNIC card, whose IDs and BAR indexes come
//! from `onic_hal::pci`.

use core::fmt;

use heapless::Vec;

use crate::platform::{inl, outl, without_interrupts};

/// CONFIG_ADDRESS: selects bus, device, function and register.
const CONFIG_ADDRESS: u16 = 0xCF8;
/// CONFIG_DATA: the selected register.
const CONFIG_DATA: u16 = 0xCFC;
/// Bit 31 of CONFIG_ADDRESS: the access goes to configuration space.
const CONFIG_ENABLE: u32 = 1 << 31;

/// Vendor ID (15:0) and device ID (31:16).
const REG_ID: u8 = 0x00;
/// Command (15:0) and status (31:16).
const REG_COMMAND: u8 = 0x04;
/// Revision (7:0) and class code (31:8).
const REG_CLASS: u8 = 0x08;
/// Cache line size, latency timer, header type (23:16), BIST.
const REG_HEADER: u8 = 0x0C;
/// The first base address register.
const REG_BAR0: u8 = 0x10;
/// Type 1 header: primary (7:0), secondary (15:8) and subordinate (23:16) bus numbers.
const REG_BUS_NUMBERS: u8 = 0x18;

/// Command bit: the function answers memory accesses to its BARs.
pub const CMD_MEMORY: u16 = 1 << 1;
/// Command bit: the function may issue memory requests (DMA, MSI).
pub const CMD_BUS_MASTER: u16 = 1 << 2;

/// Header type bit 7: a multi-function device.
const HEADER_MULTI_FUNCTION: u32 = 0x80;
/// Header type 1: a PCI-to-PCI bridge (a PCIe root or switch port).
const HEADER_BRIDGE: u32 = 0x01;
/// A vendor ID nobody has: no function answers.
const NO_VENDOR: u16 = 0xFFFF;

/// BAR bit 0: an I/O BAR.
const BAR_IO: u32 = 1;
/// BAR bits 2:1: the memory BAR's type.
const BAR_TYPE: u32 = 0b110;
/// BAR type 0b10: 64 bits wide, the next BAR holds the upper half.
const BAR_TYPE_64: u32 = 0b100;
/// BAR bits 3:0 are flags; the address starts at bit 4.
const BAR_FLAGS: u32 = 0xF;
/// Index of the last BAR of a type 0 header.
const LAST_BAR: u8 = 5;

/// Devices on one bus.
const DEVICES: u8 = 32;
/// Functions of one device.
const FUNCTIONS: u8 = 8;

/// One PCI function, by bus, device and function number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    /// Bus number.
    pub bus: u8,
    /// Device number (0..32).
    pub dev: u8,
    /// Function number (0..8).
    pub func: u8,
}

/// A memory BAR as the firmware assigned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemBar {
    /// Bus address of the first byte (the CPU's physical address: no translation on x86).
    pub base: u64,
    /// Size in bytes (a power of two).
    pub len: u64,
}

impl MemBar {
    /// Whether the whole BAR lies below 4 GiB.
    #[must_use]
    pub fn below_4g(&self) -> bool {
        self.base.checked_add(self.len).is_some_and(|end| end <= 1 << 32)
    }
}

/// Why a BAR cannot be used as a 64-bit memory BAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarError {
    /// There is no BAR of that index (a 64-bit BAR needs the next register too).
    NoSuchBar(u8),
    /// It is an I/O BAR.
    Io(u8),
    /// It is a 32-bit memory BAR.
    Not64Bit(u8),
    /// It decodes nothing (size 0) or the firmware left it at address 0.
    Unassigned(u8),
}

impl fmt::Display for BarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchBar(i) => write!(f, "BAR{i} cannot hold a 64-bit BAR"),
            Self::Io(i) => write!(f, "BAR{i} is an I/O BAR"),
            Self::Not64Bit(i) => write!(f, "BAR{i} is a 32-bit memory BAR"),
            Self::Unassigned(i) => write!(f, "BAR{i} was not assigned an address"),
        }
    }
}

impl Function {
    fn address(self, offset: u8) -> u32 {
        CONFIG_ENABLE
            | u32::from(self.bus) << 16
            | u32::from(self.dev & (DEVICES - 1)) << 11
            | u32::from(self.func & (FUNCTIONS - 1)) << 8
            | u32::from(offset & 0xFC)
    }

    /// The 32-bit configuration register at `offset` (rounded down to a multiple of 4).
    #[must_use]
    pub fn read32(self, offset: u8) -> u32 {
        // The two port accesses must not be split by another configuration access; no handler
        // makes one, and interrupts are off for the pair anyway.
        without_interrupts(|| {
            outl(CONFIG_ADDRESS, self.address(offset));
            inl(CONFIG_DATA)
        })
    }

    fn write32(self, offset: u8, value: u32) {
        without_interrupts(|| {
            outl(CONFIG_ADDRESS, self.address(offset));
            outl(CONFIG_DATA, value);
        });
    }

    /// Vendor and device ID, or `None` when no function answers here.
    #[must_use]
    pub fn ids(self) -> Option<(u16, u16)> {
        let v = self.read32(REG_ID);
        // CAST: the two halves of the register.
        let (vendor, device) = (v as u16, (v >> 16) as u16);
        (vendor != NO_VENDOR).then_some((vendor, device))
    }

    /// The 24-bit class code (class, subclass, programming interface).
    #[must_use]
    pub fn class_code(self) -> u32 {
        self.read32(REG_CLASS) >> 8
    }

    fn header_type(self) -> u32 {
        self.read32(REG_HEADER) >> 16 & 0xFF
    }

    /// The command register.
    #[must_use]
    pub fn command(self) -> u16 {
        // CAST: the low half of the register.
        self.read32(REG_COMMAND) as u16
    }

    /// Writes the command register. The status half is written as zeros, which leaves its
    /// write-one-to-clear bits as they are.
    fn set_command(self, command: u16) {
        self.write32(REG_COMMAND, u32::from(command));
    }

    /// Turns on memory decoding and bus mastering; returns the command register read back.
    ///
    /// With bus mastering on, the function may write any memory address it is told; the caller
    /// programs it (through its driver) to reach only memory handed to it as DMA memory.
    pub fn enable(self) -> u16 {
        self.set_command(self.command() | CMD_MEMORY | CMD_BUS_MASTER);
        self.command()
    }

    /// Turns memory decoding and bus mastering off; returns the command register read back.
    pub fn disable(self) -> u16 {
        self.set_command(self.command() & !(CMD_MEMORY | CMD_BUS_MASTER));
        self.command()
    }

    /// The 64-bit memory BAR `index` (and `index + 1`, its upper half): address and size. The
    /// size is found the standard way (all ones written, the read-back mask taken, the address
    /// put back) with memory decoding off for the moment, so the BAR never decodes a stray
    /// address.
    ///
    /// # Errors
    ///
    /// [`BarError`] when the BAR is not a 64-bit memory BAR with an address.
    pub fn mem_bar64(self, index: u8) -> Result<MemBar, BarError> {
        if index >= LAST_BAR {
            return Err(BarError::NoSuchBar(index));
        }
        let lo_reg = REG_BAR0 + 4 * index;
        let hi_reg = lo_reg + 4;
        let lo = self.read32(lo_reg);
        if lo & BAR_IO != 0 {
            return Err(BarError::Io(index));
        }
        if lo & BAR_TYPE != BAR_TYPE_64 {
            return Err(BarError::Not64Bit(index));
        }
        let hi = self.read32(hi_reg);
        let command = self.command();
        self.set_command(command & !CMD_MEMORY);
        self.write32(lo_reg, u32::MAX);
        self.write32(hi_reg, u32::MAX);
        let mask = u64::from(self.read32(hi_reg)) << 32 | u64::from(self.read32(lo_reg) & !BAR_FLAGS);
        self.write32(lo_reg, lo);
        self.write32(hi_reg, hi);
        self.set_command(command);
        let base = u64::from(hi) << 32 | u64::from(lo & !BAR_FLAGS);
        let len = (!mask).wrapping_add(1);
        if mask == 0 || base == 0 {
            return Err(BarError::Unassigned(index));
        }
        Ok(MemBar { base, len })
    }

    /// For a bridge: the range of bus numbers behind it (secondary through subordinate).
    fn buses_behind(self) -> Option<core::ops::RangeInclusive<u8>> {
        if self.header_type() & !HEADER_MULTI_FUNCTION != HEADER_BRIDGE {
            return None;
        }
        let n = self.read32(REG_BUS_NUMBERS);
        // CAST: bytes 1 and 2 of the register.
        Some((n >> 8) as u8..=(n >> 16) as u8)
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.dev, self.func)
    }
}

/// Calls `visit` with every function that answers, on every bus, with its vendor and device ID
/// (function 0 of each device first; the others only on a multi-function device).
pub fn for_each_function(mut visit: impl FnMut(Function, u16, u16)) {
    for bus in 0..=u8::MAX {
        for dev in 0..DEVICES {
            let first = Function { bus, dev, func: 0 };
            let Some((vendor, device)) = first.ids() else {
                continue;
            };
            visit(first, vendor, device);
            if first.header_type() & HEADER_MULTI_FUNCTION == 0 {
                continue;
            }
            for func in 1..FUNCTIONS {
                let f = Function { bus, dev, func };
                if let Some((vendor, device)) = f.ids() {
                    visit(f, vendor, device);
                }
            }
        }
    }
}

/// Most bridges between one bus and the CPU that [`enable_bridges_to`] handles.
const MAX_BRIDGES: usize = 8;

/// Turns on memory forwarding and bus mastering in every bridge with `bus` behind it (a root
/// port, and the switch ports below it if any), so that BAR accesses reach the bus and the
/// functions on it can reach memory. Returns the bridges found and whether all now read back
/// both bits.
pub fn enable_bridges_to(bus: u8) -> (usize, bool) {
    let mut bridges: Vec<Function, MAX_BRIDGES> = Vec::new();
    for_each_function(|f, _, _| {
        if f.buses_behind().is_some_and(|r| r.contains(&bus)) {
            // More than MAX_BRIDGES levels do not occur under QEMU; the rest stay as they are.
            let _ = bridges.push(f);
        }
    });
    let want = CMD_MEMORY | CMD_BUS_MASTER;
    let all = bridges.iter().all(|b| b.enable() & want == want);
    (bridges.len(), all)
}
