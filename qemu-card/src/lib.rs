//! # onic-qemu-card
//!
//! The card model (`onic-sim`) as the engine of an emulated OpenNIC PCI device: QEMU's
//! `onic-card` device (`qemu/onic_card.c`, built into Debian's QEMU by `cargo xtask qemu-card`)
//! is a thin adapter that forwards BAR accesses here and lends the model its DMA (through
//! QEMU's IOMMU), its MSI-X and its network backends. Registers, queues, contexts, completions,
//! writeback, CMAC counters and the RSS hash are the model's; nothing of the card is written
//! twice.
//!
//! - [`model`]: the safe core of it, [`model::Model`] over a [`model::Host`].
//! - [`ffi`]: the C entry points and the host's callbacks (header `onic_model.h`, by cbindgen).
//! - [`ctl`]: the test-control window (fault knobs and counters) of the card's third function.
//! - [`gen`]: the traffic generator the control window drives (frames at a fixed interval of
//!   the emulator's clock).
//! - [`c_constants`]: the PCI identity and sizes the C side needs, from `onic-hal` (printed as
//!   `onic_model_ids.h` by `examples/c_constants.rs`).

pub mod ctl;
pub mod ffi;
pub mod gen;
pub mod model;

use onic_hal::pci;

/// PCI device ID of the test-control function (`onic-card-ctl`). It is not a shell function:
/// 0x9xxx IDs are the shell's (hardware.md §1.1), and no driver binds this one.
pub const CTL_DEVICE_ID: u16 = 0x0C7E;

/// The `#define`s of `onic_model_ids.h`: name and value.
#[must_use]
pub fn c_constants() -> Vec<(&'static str, u64)> {
    let queues = 512;
    vec![
        ("ONIC_PCI_VENDOR", pci::VENDOR_XILINX.into()),
        ("ONIC_PCI_PF0_DEVICE", pci::STOCK_PF_IDS[0].into()),
        ("ONIC_PCI_PF1_DEVICE", pci::STOCK_PF_IDS[1].into()),
        ("ONIC_PCI_CTL_DEVICE", CTL_DEVICE_ID.into()),
        ("ONIC_PCI_CLASS", pci::CLASS_NETWORK_OTHER.into()),
        ("ONIC_QDMA_BAR", pci::QDMA_BAR.into()),
        ("ONIC_SHELL_BAR", pci::SHELL_BAR.into()),
        ("ONIC_QDMA_BAR_LEN", pci::qdma_bar_len(queues)),
        ("ONIC_SHELL_BAR_LEN", pci::SHELL_BAR_LEN),
        ("ONIC_CTL_BAR_LEN", ctl::BAR_SIZE),
        ("ONIC_CTL_GONE", ctl::GONE.into()),
        ("ONIC_TOTAL_QUEUES", queues.into()),
        (
            "ONIC_PF0_VECTORS",
            pci::msix_vectors(0, pci::STOCK_QUEUE_VECTORS).into(),
        ),
        (
            "ONIC_PF1_VECTORS",
            pci::msix_vectors(1, pci::STOCK_QUEUE_VECTORS).into(),
        ),
    ]
}
