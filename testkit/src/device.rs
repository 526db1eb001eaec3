//! The device side's writes into ring memory, in one place: where a ring's entries and its status
//! record lie (the record is in the slot after the last usable entry, hardware.md §7.4), the
//! status record's word, and the memory the writes go to.
//!
//! Two kinds of code play the QDMA here. The rigs ([`crate::rig`]) write completion entries and
//! status records into [`HostDma`] so that the driver can be timed without the model; tests and
//! fuzz targets write entries and records the model would never write (a lying device) into the
//! model's memory through its fault knob. Both go through [`DeviceRing`] and [`DeviceMemory`].

use onic_hal::layout::desc::{CmptEntrySize, WbStatus, C2H_DESC_BYTES, H2C_DESC_BYTES};
use onic_hal::DmaAddr;

use crate::hostdma::HostDma;

/// Memory the device side writes into, as the device's own DMA writes.
pub trait DeviceMemory {
    /// The device writes the little-endian `word` at `at` (8-byte aligned).
    ///
    /// # Errors
    ///
    /// Why the write was refused; nothing was written. `at` is not memory the device may write.
    fn write_word(&self, at: DmaAddr, word: u64) -> Result<(), String>;
}

impl DeviceMemory for HostDma {
    fn write_word(&self, at: DmaAddr, word: u64) -> Result<(), String> {
        if self.device_write_u64(at, word) {
            Ok(())
        } else {
            Err(format!(
                "{:#x} is not an aligned word of a live region or mapped page",
                at.get()
            ))
        }
    }
}

/// The model's memory, written through its fault knob (`Faults::device_write`): the write is
/// checked like every device access of the model, and a refused one is the caller's mistake, not
/// recorded as a violation of the driver.
impl DeviceMemory for onic_sim::Card {
    fn write_word(&self, at: DmaAddr, word: u64) -> Result<(), String> {
        self.faults()
            .device_write(at, &word.to_le_bytes())
            .map_err(|v| v.to_string())
    }
}

/// A ring as the device finds it: its device address, the size of its entries and how many of
/// them are usable (one less than the ring's slots: the last slot holds the status record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceRing {
    base: u64,
    entry_bytes: u64,
    usable: u16,
}

impl DeviceRing {
    /// An H2C descriptor ring at `base` with `usable` entries.
    #[must_use]
    pub const fn h2c(base: DmaAddr, usable: u16) -> Self {
        Self::with_entry_bytes(base, H2C_DESC_BYTES as u64, usable)
    }

    /// A C2H descriptor ring at `base` with `usable` entries.
    #[must_use]
    pub const fn c2h(base: DmaAddr, usable: u16) -> Self {
        Self::with_entry_bytes(base, C2H_DESC_BYTES as u64, usable)
    }

    /// A completion ring at `base` with `usable` entries of `entry` bytes.
    #[must_use]
    pub const fn cmpt(base: DmaAddr, entry: CmptEntrySize, usable: u16) -> Self {
        Self::with_entry_bytes(base, entry.bytes() as u64, usable)
    }

    /// A ring at `base` with `usable` entries of `entry_bytes` each (for the rigs, which keep
    /// a completion ring's entry size as a byte count).
    pub(crate) const fn with_entry_bytes(base: DmaAddr, entry_bytes: u64, usable: u16) -> Self {
        Self {
            base: base.get(),
            entry_bytes,
            usable,
        }
    }

    /// Where entry `index` lies (`index` below the ring's usable entries).
    #[must_use]
    pub const fn entry(&self, index: u16) -> DmaAddr {
        DmaAddr::new(self.base + self.entry_bytes * index as u64)
    }

    /// Where the status record lies: the slot after the last usable entry.
    #[must_use]
    pub const fn status(&self) -> DmaAddr {
        self.entry(self.usable)
    }
}

/// The word of a status record with producer index `pidx`, consumer index `cidx` and, for a
/// completion ring, its current `color` (false for the descriptor rings).
#[must_use]
pub fn status_word(pidx: u16, cidx: u16, color: bool) -> u64 {
    let mut st = WbStatus::default();
    st.set_pidx(pidx);
    st.set_cidx(cidx);
    st.set_color(color);
    st.to_word()
}

#[cfg(test)]
mod tests {
    use super::*;
    use onic_hal::{AddrLimit, DmaMemory};

    #[test]
    fn status_records_lie_after_the_last_usable_entry() {
        let at = DmaAddr::new(0x1000_0000);
        assert_eq!(DeviceRing::h2c(at, 63).status().get(), 0x1000_0000 + 16 * 63);
        assert_eq!(DeviceRing::c2h(at, 1023).status().get(), 0x1000_0000 + 8184);
        let cmpt = DeviceRing::cmpt(at, CmptEntrySize::B16, 63);
        assert_eq!(cmpt.entry(2).get(), 0x1000_0000 + 32);
        assert_eq!(cmpt.status().get(), 0x1000_0000 + 16 * 63);
        let st = WbStatus::from_word(status_word(5, 7, true));
        assert_eq!((st.pidx(), st.cidx(), st.color()), (5, 7, true));
    }

    #[test]
    fn both_memories_take_writes_inside_and_refuse_them_outside() {
        let dma = HostDma::new();
        let r = dma.alloc_coherent(4096, AddrLimit::Below4G).unwrap();
        let ring = DeviceRing::c2h(r.dma_addr(), 511);
        dma.write_word(ring.status(), 9).unwrap();
        assert_eq!(dma.device_read_u64(ring.status()), Some(9));
        assert!(dma
            .write_word(DeviceRing::c2h(r.dma_addr(), 512).status(), 9)
            .is_err());
        // SAFETY: nothing of the device side reaches the region any more.
        unsafe { dma.free_coherent(r) };

        let card = onic_sim::Card::new(onic_sim::CardConfig::default());
        let dma = card.dma();
        let r = dma.alloc_coherent(4096, AddrLimit::Below4G).unwrap();
        card.write_word(DeviceRing::c2h(r.dma_addr(), 511).status(), 9)
            .unwrap();
        assert!(card
            .write_word(DmaAddr::new(r.dma_addr().get() + 4096), 9)
            .is_err());
        // SAFETY: as above.
        unsafe { dma.free_coherent(r) };
        assert_eq!(card.violations(), []);
    }
}
