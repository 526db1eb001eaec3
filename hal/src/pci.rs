//! The card's PCI view (hardware.md §1, §11.1): the IDs a stock shell's functions carry, the BARs
//! and their sizes, and how many MSI-X vectors each function offers. The kernel module's
//! `pci_device_id` table is the C side of §1.1; the emulated card (`onic-qemu-card`) takes
//! its identity from here.

use crate::regs::qdma::{DMAP_SEL_BASE, DMAP_SEL_STRIDE};

/// PCI vendor ID of every OpenNIC function (Xilinx), hardware.md §1.1.
pub const VENDOR_XILINX: u16 = 0x10EE;

/// Device ID of physical function `pf` (0..=3) for PCIe generation `gen` (3 or 4) and lane code
/// `lanes` (1, 2, 4, 8 or 0xF for x16): `0x9<pf><gen><lanes>`, hardware.md §1.1.
#[must_use]
pub const fn pf_device_id(pf: u8, gen: u8, lanes: u8) -> u16 {
    0x9000 | (pf as u16 & 0xF) << 8 | (gen as u16 & 0xF) << 4 | (lanes as u16 & 0xF)
}

/// Device IDs of a stock shell (Gen3 x16): PF0 0x903F, PF1 0x913F, hardware.md §1.1.
pub const STOCK_PF_IDS: [u16; 2] = [pf_device_id(0, 3, 0xF), pf_device_id(1, 3, 0xF)];

/// PCI class code of every function: network controller, other (0x0280), hardware.md §1.1.
pub const CLASS_NETWORK_OTHER: u16 = 0x0280;

/// BAR index of the QDMA's configuration space, hardware.md §1.2.
pub const QDMA_BAR: u8 = 0;
/// BAR index of the shell's register window, hardware.md §1.2.
pub const SHELL_BAR: u8 = 2;
/// Length of the shell window the driver maps (`SHELL_START`..`SHELL_END`), hardware.md §1.2.
pub const SHELL_BAR_LEN: u64 = 0x40_0000;

/// Smallest QDMA BAR that holds the doorbells of `queues` function-relative queues (hardware.md
/// §1.2: at least 0x18000 + 16 x queues), rounded up to a power of two as a BAR's size is.
#[must_use]
pub const fn qdma_bar_len(queues: u16) -> u64 {
    let end = DMAP_SEL_BASE as u64 + DMAP_SEL_STRIDE as u64 * queues as u64;
    end.next_power_of_two()
}

/// MSI-X vectors of function `func` with `queue_vectors` queue vectors (hardware.md §11.1): one
/// per queue, the user vector, and on the master PF (function 0) the error vector.
#[must_use]
pub const fn msix_vectors(func: u8, queue_vectors: u16) -> u16 {
    queue_vectors + if func == 0 { 2 } else { 1 }
}

/// Queue vectors of a stock shell's functions (hardware.md §11.1: PF0 vectors 0-7, user 8,
/// error 9; PF1 vectors 0-7, user 8).
pub const STOCK_QUEUE_VECTORS: u16 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_vectors_and_bars_are_the_stock_shells() {
        assert_eq!(STOCK_PF_IDS, [0x903F, 0x913F]);
        assert_eq!(pf_device_id(3, 4, 8), 0x9348);
        assert_eq!(msix_vectors(0, STOCK_QUEUE_VECTORS), 10);
        assert_eq!(msix_vectors(1, STOCK_QUEUE_VECTORS), 9);
        // 512 queues (the shell's default NUM_QUEUE): doorbells end at 0x1A000.
        assert_eq!(qdma_bar_len(512), 0x2_0000);
        assert_eq!(qdma_bar_len(2048), 0x2_0000);
        assert_eq!(qdma_bar_len(2049), 0x4_0000);
    }
}
