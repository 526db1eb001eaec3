//! Typed, validated configuration. Every value is checked when it is built, so the bring-up code
//! never writes a register for a configuration the hardware cannot accept.

use onic_hal::layout::desc::CmptEntrySize;
use onic_hal::regs::qdma;
use onic_hal::{AbsQueueId, FunctionId, QueueId, PAGE_SIZE};

use crate::error::ConfigError;

pub use onic_hal::id::MAX_QUEUES_PER_FUNCTION;

/// Headroom in front of every received frame, for XDP (`XDP_PACKET_HEADROOM`): the C2H descriptor
/// points 256 bytes into its page (hardware.md §12.1).
pub const RX_HEADROOM: u32 = 256;

/// Bytes of an RX page after [`RX_HEADROOM`] up to the end of a frame `len` bytes long at
/// `offset`: what the CPU may have written there (XDP rewrote headers, moved or padded the frame),
/// so what a recycle syncs for the device before the device writes the page again.
#[must_use]
pub(crate) const fn written_after_headroom(offset: u16, len: u16) -> usize {
    (offset as usize + len as usize).saturating_sub(RX_HEADROOM as usize)
}

/// Room kept free at the end of each RX page: what an OS needs to build a packet around the page
/// without a copy (Linux puts its `skb_shared_info`, 320 bytes on x86-64, there; XDP multi-buffer
/// frames keep their fragment list in the same place).
pub const RX_TAILROOM: u32 = 320;

/// Bytes of a page the device may write after the headroom and before the tailroom.
pub(crate) const RX_BUFFER_ROOM: u32 = PAGE_SIZE as u32 - RX_HEADROOM - RX_TAILROOM;

/// Bytes a UMEM frame (its chunk less the UMEM headroom) needs for a C2H buffer of `buf_bytes`:
/// the RX headroom and the buffer. No tailroom is kept: the device may write up to the chunk's
/// end, as Linux lets it on zero-copy frames (`xsk_pool_get_rx_frame_size` is the chunk less the
/// headrooms), and the XDP view of such a frame never grows past the chunk
/// ([`crate::xdp::XdpBuff`]). The one rule of the port's tuning, its frames and the core's pool.
#[must_use]
pub const fn xsk_room_for(buf_bytes: u32) -> u32 {
    RX_HEADROOM.saturating_add(buf_bytes)
}

/// Entry of the C2H buffer-size table the driver changes for 2 KiB UMEM chunks: the reference
/// table holds 4096 at 6..=12, this one holds [`XSK_2K_BUFFER`] here.
pub const XSK_2K_BUF_SIZE_INDEX: u8 = 6;

/// The buffer of entry [`XSK_2K_BUF_SIZE_INDEX`]: a 2 KiB chunk less the RX headroom (1792), which
/// holds a 1514-byte frame (DPDK's AF_XDP PMD uses 2 KiB chunks by default).
pub const XSK_2K_BUFFER: u32 = 2048 - RX_HEADROOM;

/// The C2H buffer-size table the driver programs (C2H_BUF_SZ, hardware.md §3.1), with two
/// deliberate changes: entry [`RX_BUF_SIZE_INDEX_DEFAULT`] holds [`RX_BUFFER_ROOM`] (3520) instead
/// of 3968, so that one page per descriptor can hold a full buffer behind the XDP headroom (the
/// reference driver uses entry 8, 4096 bytes, with data at page offset 256, which lets the device
/// write up to 256 bytes past the page, hardware.md §15 item 9); entry [`XSK_2K_BUF_SIZE_INDEX`],
/// one of the reference table's seven 4096 entries, holds [`XSK_2K_BUFFER`] (1792), the buffer a
/// 2 KiB UMEM chunk holds behind the RX headroom. See `docs/deviations.md`.
pub(crate) const C2H_BUF_SIZES: [u32; qdma::GLOBAL_TABLE_LEN] = {
    let mut t = qdma::tables::C2H_BUF_SIZES;
    t[RX_BUF_SIZE_INDEX_DEFAULT as usize] = RX_BUFFER_ROOM;
    t[XSK_2K_BUF_SIZE_INDEX as usize] = XSK_2K_BUFFER;
    t
};

/// The buffer-size index RX queues use unless told otherwise.
pub const RX_BUF_SIZE_INDEX_DEFAULT: u8 = 5;
/// The ring-size index TX queues use unless told otherwise (entry 0: 4096 entries, as the
/// reference driver).
pub const TX_RING_SIZE_INDEX_DEFAULT: u8 = 0;
/// The ring-size index of RX descriptor and completion rings unless told otherwise (entry 8: 1024
/// entries, as the reference driver).
pub const RX_RING_SIZE_INDEX_DEFAULT: u8 = 8;

/// An index into the GLBL_RNG_SZ table (hardware.md §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingSizeIdx(u8);

impl RingSizeIdx {
    /// Validates a ring-size index.
    ///
    /// # Errors
    ///
    /// [`ConfigError::RingSizeIndex`] outside 0..=15.
    pub const fn new(index: u8) -> Result<Self, ConfigError> {
        if (index as usize) < qdma::GLOBAL_TABLE_LEN {
            Ok(Self(index))
        } else {
            Err(ConfigError::RingSizeIndex { index })
        }
    }

    /// The index.
    #[must_use]
    pub const fn index(self) -> u8 {
        self.0
    }

    /// Ring entries including the status slot.
    #[must_use]
    pub const fn entries(self) -> u16 {
        // The index is below GLOBAL_TABLE_LEN (`new`); the remainder says so to the compiler,
        // which then needs no bounds check (and no panic path in the kernel module's datapath).
        qdma::tables::RING_SIZES[self.0 as usize % qdma::GLOBAL_TABLE_LEN] as u16
    }

    /// Entries usable for descriptors or completions (all but the status slot).
    #[must_use]
    pub const fn usable(self) -> u16 {
        self.entries() - 1
    }

    /// Finds the index of a ring with `entries` entries (status slot included).
    #[must_use]
    pub fn for_entries(entries: u16) -> Option<Self> {
        qdma::tables::RING_SIZES
            .iter()
            .position(|&n| n == u32::from(entries))
            .map(|i| Self(i as u8))
    }
}

/// An index into the C2H_BUF_SZ table whose buffer fits a page behind the headroom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BufSizeIdx(u8);

impl BufSizeIdx {
    /// Validates a buffer-size index against the C2H buffer-size table the driver programs
    /// (hardware.md §3.1, with entry [`RX_BUF_SIZE_INDEX_DEFAULT`] changed to the room of one
    /// page; `docs/deviations.md`).
    ///
    /// # Errors
    ///
    /// [`ConfigError::BufferSizeIndex`] outside 0..=15; [`ConfigError::BufferTooLarge`] when the
    /// buffer would not fit in one page between [`RX_HEADROOM`] and [`RX_TAILROOM`] (3520
    /// bytes).
    pub const fn new(index: u8) -> Result<Self, ConfigError> {
        if index as usize >= qdma::GLOBAL_TABLE_LEN {
            return Err(ConfigError::BufferSizeIndex { index });
        }
        let buffer = C2H_BUF_SIZES[index as usize];
        if buffer > RX_BUFFER_ROOM {
            return Err(ConfigError::BufferTooLarge {
                buffer,
                room: RX_BUFFER_ROOM,
            });
        }
        Ok(Self(index))
    }

    /// The index.
    #[must_use]
    pub const fn index(self) -> u8 {
        self.0
    }

    /// Bytes the device writes per descriptor.
    #[must_use]
    pub const fn bytes(self) -> u32 {
        // Below GLOBAL_TABLE_LEN (`new`): the remainder lets the compiler drop the bounds check
        // (no panic path in the kernel module, `cargo xtask panic-paths`).
        C2H_BUF_SIZES[self.0 as usize % qdma::GLOBAL_TABLE_LEN]
    }
}

/// Device-wide settings for one PCI function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceConfig {
    /// The PCI function.
    pub func: FunctionId,
    /// Queue pairs (TX = RX count). MSI-X queue vectors are `0..queues`; the user vector is
    /// `queues`, the master PF's error vector `queues + 1` (hardware.md §11.1).
    pub queues: u16,
    /// TX (H2C) queues beyond the pairs, at queue ids `queues..queues + tx_only`: their own rings
    /// for XDP_TX and for frames other devices redirect here, so that those never share a ring
    /// with the OS stack's transmit. FMAP qmax and QCONF numq cover them ([`DeviceConfig::span`];
    /// the reference driver has none, so its qmax is `queues`).
    pub tx_only: u16,
    /// Enable RS-FEC on the CMACs (the reference driver's module parameter, default on).
    pub rs_fec: bool,
    /// SHELL_STATUS reads allowed while waiting for a CMAC reset, 1 ms apart.
    pub cmac_reset_polls: u32,
}

impl DeviceConfig {
    /// Default number of 1 ms polls for a CMAC reset (the reference driver waits forever).
    pub(crate) const CMAC_RESET_POLLS_DEFAULT: u32 = 1000;

    /// Validates a device configuration with the reference driver's defaults for the rest.
    ///
    /// # Errors
    ///
    /// [`ConfigError::FunctionOutOfRange`], [`ConfigError::QueueCount`].
    pub const fn new(func: u8, queues: u16) -> Result<Self, ConfigError> {
        let Some(func) = FunctionId::new(func) else {
            return Err(ConfigError::FunctionOutOfRange { func });
        };
        if queues == 0 || queues > MAX_QUEUES_PER_FUNCTION {
            return Err(ConfigError::QueueCount {
                requested: queues,
                max: MAX_QUEUES_PER_FUNCTION,
            });
        }
        Ok(Self {
            func,
            queues,
            tx_only: 0,
            rs_fec: true,
            cmac_reset_polls: Self::CMAC_RESET_POLLS_DEFAULT,
        })
    }

    /// The same configuration with `tx_only` TX-only queues after the pairs.
    ///
    /// # Errors
    ///
    /// [`ConfigError::QueueCount`] when pairs and TX-only queues together exceed the function's
    /// [`MAX_QUEUES_PER_FUNCTION`] queue ids.
    pub const fn with_tx_only(self, tx_only: u16) -> Result<Self, ConfigError> {
        let total = self.queues as u32 + tx_only as u32;
        if total > MAX_QUEUES_PER_FUNCTION as u32 {
            return Err(ConfigError::QueueCount {
                // CAST: at most 2 x u16::MAX, saturated into the error's field.
                requested: if total > u16::MAX as u32 {
                    u16::MAX
                } else {
                    total as u16
                },
                max: MAX_QUEUES_PER_FUNCTION,
            });
        }
        Ok(Self { tx_only, ..self })
    }

    /// Queue ids the function owns: the pairs and the TX-only queues (FMAP qmax, QCONF numq).
    #[must_use]
    pub const fn span(&self) -> u16 {
        self.queues + self.tx_only
    }

    /// Checks that `qid` names a TX queue of this function (a pair's or a TX-only one) and gives
    /// its absolute id.
    ///
    /// # Errors
    ///
    /// [`ConfigError::QueueIndex`].
    pub(crate) const fn check_tx_queue(&self, qid: QueueId) -> Result<AbsQueueId, ConfigError> {
        self.abs_queue(qid, self.span())
    }

    /// Checks that `qid` is one of this function's queue pairs (RX queues exist for pairs only)
    /// and gives its absolute id.
    ///
    /// # Errors
    ///
    /// [`ConfigError::QueueIndex`].
    pub const fn check_queue(&self, qid: QueueId) -> Result<AbsQueueId, ConfigError> {
        self.abs_queue(qid, self.queues)
    }

    /// `qbase + qid` for a `qid` below `queues` (at most [`MAX_QUEUES_PER_FUNCTION`]).
    const fn abs_queue(&self, qid: QueueId, queues: u16) -> Result<AbsQueueId, ConfigError> {
        match self.func.abs_queue(qid) {
            Some(abs) if qid.get() < queues => Ok(abs),
            _ => Err(ConfigError::QueueIndex { qid, queues }),
        }
    }

    /// Checks a queue vector (`0..queues`).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Vector`].
    pub(crate) const fn check_vector(&self, vector: u16) -> Result<(), ConfigError> {
        if vector < self.queues {
            Ok(())
        } else {
            Err(ConfigError::Vector {
                vector,
                available: self.queues,
            })
        }
    }
}

/// Settings of one TX (H2C) queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxQueueConfig {
    /// Function-relative queue.
    pub qid: QueueId,
    /// Descriptor ring size.
    pub ring: RingSizeIdx,
    /// MSI-X vector recorded in the context (TX interrupts are off, hardware.md §11.2).
    pub vector: u16,
}

impl TxQueueConfig {
    /// The reference driver's TX queue: 4096-entry ring, vector = qid.
    #[must_use]
    pub const fn new(qid: QueueId) -> Self {
        Self {
            qid,
            ring: RingSizeIdx(TX_RING_SIZE_INDEX_DEFAULT),
            vector: qid.get(),
        }
    }
}

/// The completion entry size for a size in bytes.
///
/// # Errors
///
/// [`ConfigError::CmptEntrySize`] unless `bytes` is 8, 16, 32 or 64.
pub const fn cmpt_entry_size(bytes: u16) -> Result<CmptEntrySize, ConfigError> {
    match bytes {
        8 => Ok(CmptEntrySize::B8),
        16 => Ok(CmptEntrySize::B16),
        32 => Ok(CmptEntrySize::B32),
        64 => Ok(CmptEntrySize::B64),
        _ => Err(ConfigError::CmptEntrySize { bytes }),
    }
}

/// Settings of one RX (C2H + CMPT) queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxQueueConfig {
    /// Function-relative queue.
    pub qid: QueueId,
    /// C2H buffer size.
    pub buf: BufSizeIdx,
    /// C2H descriptor ring size.
    pub desc_ring: RingSizeIdx,
    /// Completion ring size.
    pub cmpt_ring: RingSizeIdx,
    /// Completion entry size.
    pub cmpt_entry: CmptEntrySize,
    /// MSI-X vector of the queue's completion interrupt.
    pub vector: u16,
}

impl RxQueueConfig {
    /// The driver's default RX queue: 1024-entry rings, 8-byte completions, the page-fitting
    /// buffer size, vector = qid.
    #[must_use]
    pub const fn new(qid: QueueId) -> Self {
        Self {
            qid,
            buf: BufSizeIdx(RX_BUF_SIZE_INDEX_DEFAULT),
            desc_ring: RingSizeIdx(RX_RING_SIZE_INDEX_DEFAULT),
            cmpt_ring: RingSizeIdx(RX_RING_SIZE_INDEX_DEFAULT),
            cmpt_entry: CmptEntrySize::B8,
            vector: qid.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_size_index_is_checked() {
        assert_eq!(RingSizeIdx::new(0).unwrap().entries(), 4096);
        assert_eq!(RingSizeIdx::new(8).unwrap().usable(), 1023);
        assert_eq!(RingSizeIdx::new(15).unwrap().entries(), 16384);
        assert_eq!(
            RingSizeIdx::new(16),
            Err(ConfigError::RingSizeIndex { index: 16 })
        );
        assert_eq!(RingSizeIdx::for_entries(1024), RingSizeIdx::new(8).ok());
        assert_eq!(RingSizeIdx::for_entries(1000), None);
    }

    #[test]
    fn buffer_must_fit_behind_the_headroom() {
        assert_eq!(RX_BUFFER_ROOM, 3520);
        assert_eq!(BufSizeIdx::new(5).unwrap().bytes(), 3520);
        assert_eq!(BufSizeIdx::new(4).unwrap().bytes(), 2048);
        // The 2 KiB-chunk entry: one of the reference's 4096 entries, now a 2 KiB chunk's room.
        let two_k = BufSizeIdx::new(XSK_2K_BUF_SIZE_INDEX).unwrap();
        assert_eq!(two_k.bytes(), 1792);
        assert_eq!(xsk_room_for(two_k.bytes()), 2048);
        assert_eq!(
            qdma::tables::C2H_BUF_SIZES[usize::from(XSK_2K_BUF_SIZE_INDEX)],
            4096
        );
        // The other entries the driver leaves as the reference programs them.
        let changed = [RX_BUF_SIZE_INDEX_DEFAULT, XSK_2K_BUF_SIZE_INDEX].map(usize::from);
        for (i, (&ours, &theirs)) in C2H_BUF_SIZES.iter().zip(&qdma::tables::C2H_BUF_SIZES).enumerate() {
            assert!(changed.contains(&i) || ours == theirs, "entry {i}");
        }
        // The reference driver's choice, 4096 bytes at offset 256, overruns the page.
        assert_eq!(
            BufSizeIdx::new(8),
            Err(ConfigError::BufferTooLarge {
                buffer: 4096,
                room: 3520
            })
        );
        assert_eq!(
            BufSizeIdx::new(0),
            Err(ConfigError::BufferTooLarge {
                buffer: 4096,
                room: 3520
            })
        );
        assert_eq!(
            BufSizeIdx::new(16),
            Err(ConfigError::BufferSizeIndex { index: 16 })
        );
    }

    #[test]
    fn cmpt_entry_sizes_are_checked() {
        assert_eq!(cmpt_entry_size(32), Ok(CmptEntrySize::B32));
        assert_eq!(cmpt_entry_size(12), Err(ConfigError::CmptEntrySize { bytes: 12 }));
    }

    #[test]
    fn device_config_is_checked() {
        assert!(DeviceConfig::new(0, 1).is_ok());
        assert!(DeviceConfig::new(3, 64).is_ok());
        assert_eq!(
            DeviceConfig::new(0, 65),
            Err(ConfigError::QueueCount {
                requested: 65,
                max: 64
            })
        );
        assert_eq!(
            DeviceConfig::new(0, 0),
            Err(ConfigError::QueueCount {
                requested: 0,
                max: 64
            })
        );
        assert_eq!(
            DeviceConfig::new(4, 8),
            Err(ConfigError::FunctionOutOfRange { func: 4 })
        );
        let c = DeviceConfig::new(1, 8).unwrap();
        assert_eq!(c.func.qbase(), AbsQueueId::new(64));
        assert_eq!(c.func.port(), 1);
        assert_eq!(c.check_queue(QueueId::new(7)), Ok(AbsQueueId::new(71)));
        assert_eq!(
            c.check_queue(QueueId::new(8)),
            Err(ConfigError::QueueIndex {
                qid: QueueId::new(8),
                queues: 8
            })
        );
        let c = c.with_tx_only(2).unwrap();
        assert_eq!(c.check_tx_queue(QueueId::new(9)), Ok(AbsQueueId::new(73)));
        assert!(c.check_tx_queue(QueueId::new(10)).is_err());
        assert!(c.check_queue(QueueId::new(9)).is_err());
    }
}
