//! The port's line side, as ethtool controls it: RS-FEC (`--show-fec`, `--set-fec`, the FEC
//! counters), the CMAC's near-end loopback (`-K loopback`) and the self-tests (`-t`): a test of
//! the port's registers, and the frames a loopback test sends and recognises.
//!
//! The registers are `onic_hal::regs::cmac`'s (hardware.md §10.2, §10.7); what each setting means
//! for the user is decided here, so every OS shim offers the same.

use core::fmt;
use core::sync::atomic::Ordering;

use onic_hal::regs::{cmac, shell};
use onic_hal::window::UNMAPPED_READ;
use onic_hal::{RegisterAccess, RegisterWindow, SharedLock};

use super::settings::EthtoolError;
use super::Device;
use crate::stats::hw::read_latched;

/// ethtool's FEC mode bits (`ETHTOOL_FEC_*` of the Linux UAPI, `enum ethtool_fec_config_bits`).
pub mod fec_bits {
    /// "FEC mode configuration is not supported".
    pub const NONE: u32 = 1 << 0;
    /// The device chooses.
    pub const AUTO: u32 = 1 << 1;
    /// No FEC.
    pub const OFF: u32 = 1 << 2;
    /// Reed-Solomon FEC (IEEE 802.3 clause 91 for 100GBASE-R).
    pub const RS: u32 = 1 << 3;
    /// BASE-R (Fire code) FEC.
    pub const BASER: u32 = 1 << 4;
    /// Low-latency Reed-Solomon FEC.
    pub const LLRS: u32 = 1 << 5;
}

/// A FEC setting the user asks for (`ethtool --set-fec encoding ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FecMode {
    /// RS-FEC off in both directions.
    Off,
    /// RS-FEC (RS(528,514), clause 91) in both directions, with correction and error indication.
    Rs,
    /// The device's choice: RS-FEC, the FEC 100GBASE-CR4/KR4/SR4 require and what the reference
    /// driver turns on by default (`RS_FEC_ENABLED`). The CMAC negotiates nothing.
    Auto,
}

impl FecMode {
    /// The request ethtool's mode bits make. Exactly one of AUTO, OFF and RS is accepted.
    ///
    /// # Errors
    ///
    /// [`EthtoolError::FecUnsupported`] for BASE-R or LL-RS FEC, which the CMAC does not have;
    /// [`EthtoolError::Fec`] for no mode, several modes, "none" or unknown bits.
    pub const fn from_ethtool(bits: u32) -> Result<Self, EthtoolError> {
        match bits {
            fec_bits::AUTO => Ok(Self::Auto),
            fec_bits::OFF => Ok(Self::Off),
            fec_bits::RS => Ok(Self::Rs),
            fec_bits::BASER | fec_bits::LLRS => Err(EthtoolError::FecUnsupported { requested: bits }),
            _ => Err(EthtoolError::Fec { requested: bits }),
        }
    }

    /// ethtool's bit for this mode.
    #[must_use]
    pub const fn ethtool_bits(self) -> u32 {
        match self {
            Self::Off => fec_bits::OFF,
            Self::Rs => fec_bits::RS,
            Self::Auto => fec_bits::AUTO,
        }
    }

    /// Whether the CMAC runs RS-FEC in this mode.
    #[must_use]
    pub const fn rs_fec(self) -> bool {
        !matches!(self, Self::Off)
    }

    /// The value [`Device`] keeps for a request (0: none made).
    pub(crate) const fn to_bits(self) -> u8 {
        match self {
            Self::Off => 1,
            Self::Rs => 2,
            Self::Auto => 3,
        }
    }

    pub(crate) const fn from_bits(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Off),
            2 => Some(Self::Rs),
            3 => Some(Self::Auto),
            _ => None,
        }
    }
}

/// What the CMAC's RSFEC_CONF_ENABLE says runs on the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FecActive {
    /// Neither direction encodes or decodes RS-FEC.
    Off,
    /// Both directions run RS-FEC.
    Rs,
    /// Only one direction does (someone else wrote the register; not a setting this driver
    /// makes): the raw register value.
    OneWay(u32),
}

impl FecActive {
    /// Decodes RSFEC_CONF_ENABLE.
    #[must_use]
    pub const fn from_register(v: u32) -> Self {
        let both = cmac::RSFEC_ENABLE_RX | cmac::RSFEC_ENABLE_TX;
        match v & both {
            0 => Self::Off,
            b if b == both => Self::Rs,
            _ => Self::OneWay(v),
        }
    }

    /// ethtool's bit for the active FEC (`active_fec` holds one mode: a one-way setting is
    /// shown as RS, the half that runs).
    #[must_use]
    pub const fn ethtool_bits(self) -> u32 {
        match self {
            Self::Off => fec_bits::OFF,
            Self::Rs | Self::OneWay(_) => fec_bits::RS,
        }
    }
}

/// `ethtool --show-fec`: the mode asked for and the one running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FecParams {
    /// The last `--set-fec` request; before any, the mode the registers show (RS or off).
    pub configured: FecMode,
    /// What the CMAC runs.
    pub active: FecActive,
}

/// The RS-FEC decoder's codeword counters (one TICK; `ethtool -I --show-fec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FecStats {
    /// `stat_rx_rsfec_corrected_cw`: codewords with errors the decoder corrected.
    pub corrected_blocks: u64,
    /// `stat_rx_rsfec_uncorrected_cw`: codewords with more errors than it corrects.
    pub uncorrectable_blocks: u64,
}

/// Patterns the register test writes to the scratch register: alternating bits both ways, all
/// ones, all zeroes.
const SCRATCH_PATTERNS: [u32; 4] = [0x5A5A_5A5A, 0xA5A5_A5A5, 0xFFFF_FFFF, 0];

/// Why the register test failed: the first register that did not read as it must.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RegisterTestError {
    /// BAR2 offset of the register.
    pub offset: u32,
    /// What it should have read.
    pub expected: u32,
    /// What it read.
    pub read: u32,
}

impl fmt::Display for RegisterTestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "register test: BAR2 {:#07x} read {:#010x}, expected {:#010x}",
            self.offset, self.read, self.expected
        )
    }
}

impl<Q: RegisterWindow, S: RegisterWindow, L: SharedLock> Device<Q, S, L> {
    fn cmac_base(&self) -> u32 {
        cmac::cmac_base(self.cfg.func.port())
    }

    /// `ethtool --show-fec`: the mode last asked for and what the function's CMAC runs.
    pub fn fec(&self) -> FecParams {
        let active = FecActive::from_register(self.shell.read(cmac::RSFEC_CONF_ENABLE.on(self.cmac_base())));
        let configured =
            FecMode::from_bits(self.fec_request.load(Ordering::Relaxed)).unwrap_or(match active {
                FecActive::Off => FecMode::Off,
                FecActive::Rs | FecActive::OneWay(_) => FecMode::Rs,
            });
        FecParams { configured, active }
    }

    /// `ethtool --set-fec`: RS-FEC on (the enable sequence's two writes, hardware.md §10.2 steps
    /// 3-4) or off in both directions on the function's CMAC. The other end of the link must run
    /// the same: a receiver expecting RS-FEC cannot align to a signal without it, and the reverse.
    pub fn set_fec(&self, mode: FecMode) {
        let base = self.cmac_base();
        if mode.rs_fec() {
            for w in cmac::ENABLE_RSFEC {
                self.shell.write(w.reg.on(base), w.value);
            }
        } else {
            self.shell
                .write(cmac::DISABLE_RSFEC.reg.on(base), cmac::DISABLE_RSFEC.value);
        }
        self.fec_request.store(mode.to_bits(), Ordering::Relaxed);
    }

    /// The RS-FEC codeword counters of the function's CMAC: a TICK, then the two counters in full.
    pub fn fec_stats(&self) -> FecStats {
        let base = self.cmac_base();
        self.shell.write(cmac::TICK.on(base), cmac::TICK_LATCH);
        FecStats {
            corrected_blocks: read_latched(&self.shell, base, &cmac::STAT_RX_RSFEC_CORRECTED_CW),
            uncorrectable_blocks: read_latched(&self.shell, base, &cmac::STAT_RX_RSFEC_UNCORRECTED_CW),
        }
    }

    /// Whether the function's CMAC is in near-end loopback (`ethtool -k`: `loopback`).
    pub fn loopback(&self) -> bool {
        self.shell.read(cmac::GT_LOOPBACK.on(self.cmac_base())) == cmac::GT_LOOPBACK_NEAR_END
    }

    /// `ethtool -K loopback on|off`: the function's CMAC loops what it sends back into its own
    /// receiver (nothing leaves the port, nothing from the line arrives), or not.
    pub fn set_loopback(&self, on: bool) {
        let v = if on { cmac::GT_LOOPBACK_NEAR_END } else { 0 };
        self.shell.write(cmac::GT_LOOPBACK.on(self.cmac_base()), v);
    }

    /// The register test of `ethtool -t`: the shell answers (BUILD_STATUS is not the value of
    /// an unimplemented address), the function's CMAC is the shell's (CORE_VERSION), and its
    /// scratch register (USER_0) holds each of four patterns written to it; its value is put back.
    ///
    /// # Errors
    ///
    /// The first register that read wrong.
    pub fn register_test(&self) -> Result<(), RegisterTestError> {
        let check = |offset: u32, expected: u32, read: u32| {
            if read == expected {
                Ok(())
            } else {
                Err(RegisterTestError {
                    offset,
                    expected,
                    read,
                })
            }
        };
        let build = self.shell.read(shell::BUILD_STATUS);
        if build == UNMAPPED_READ {
            return Err(RegisterTestError {
                offset: shell::BUILD_STATUS.offset(),
                expected: 0,
                read: build,
            });
        }
        let version = cmac::CORE_VERSION.on(self.cmac_base());
        check(
            version.offset(),
            cmac::CORE_VERSION_EXPECTED,
            self.shell.read(version),
        )?;
        let scratch = cmac::USER_0.on(self.cmac_base());
        let saved = self.shell.read(scratch);
        let r = SCRATCH_PATTERNS.iter().try_for_each(|&p| {
            self.shell.write(scratch, p);
            check(scratch.offset(), p, self.shell.read(scratch))
        });
        self.shell.write(scratch, saved);
        r
    }
}

/// EtherType of the loopback test's frames: IEEE 802 local experimental EtherType 1, which no
/// protocol of the stack claims.
pub const LOOPBACK_ETHERTYPE: u16 = 0x88B5;
/// Length of a loopback test frame (without FCS): 64 bytes on the wire.
pub const LOOPBACK_FRAME_LEN: usize = 60;
/// What follows the Ethernet header of a loopback test frame, before its sequence number.
const LOOPBACK_MAGIC: [u8; 8] = *b"onic-lb\0";
/// Offset of the sequence number (big endian u32) in a loopback test frame.
const LOOPBACK_SEQ_AT: usize = 14 + LOOPBACK_MAGIC.len();
/// Offset of the payload pattern.
const LOOPBACK_PATTERN_AT: usize = LOOPBACK_SEQ_AT + 4;

/// The payload byte at `i` of frame `seq`: frames whose sequence numbers differ in one byte have
/// different payloads, so a frame put together from pieces of two does not pass.
const fn pattern(seq: u32, i: usize) -> u8 {
    let [a, b, c, d] = seq.to_be_bytes();
    // CAST: only the low bits of the index are wanted.
    (a ^ b ^ c ^ d).wrapping_mul(31).wrapping_add(i as u8)
}

/// Writes loopback test frame `seq` from and to `mac` into `out` ([`LOOPBACK_FRAME_LEN`] bytes):
/// the port's own address both ways, [`LOOPBACK_ETHERTYPE`], a magic, the sequence number and a
/// pattern.
///
/// # Errors
///
/// `Err(())` if `out` is shorter than [`LOOPBACK_FRAME_LEN`].
#[allow(clippy::result_unit_err)]
pub fn loopback_frame(mac: &[u8; 6], seq: u32, out: &mut [u8]) -> Result<usize, ()> {
    let f = out.get_mut(..LOOPBACK_FRAME_LEN).ok_or(())?;
    f[..6].copy_from_slice(mac);
    f[6..12].copy_from_slice(mac);
    f[12..14].copy_from_slice(&LOOPBACK_ETHERTYPE.to_be_bytes());
    f[14..LOOPBACK_SEQ_AT].copy_from_slice(&LOOPBACK_MAGIC);
    f[LOOPBACK_SEQ_AT..LOOPBACK_PATTERN_AT].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[LOOPBACK_PATTERN_AT..].iter_mut().enumerate() {
        *b = pattern(seq, i);
    }
    Ok(LOOPBACK_FRAME_LEN)
}

/// The sequence number of `frame` if it is, byte for byte, a loopback test frame of `mac`
/// ([`loopback_frame`]); `None` for anything else. Bytes past [`LOOPBACK_FRAME_LEN`] are
/// ignored (a receiver may add none, but a stack may hand over a padded buffer).
#[must_use]
pub fn loopback_seq(mac: &[u8; 6], frame: &[u8]) -> Option<u32> {
    let f = frame.get(..LOOPBACK_FRAME_LEN)?;
    let seq_bytes = f.get(LOOPBACK_SEQ_AT..LOOPBACK_PATTERN_AT)?;
    let seq = u32::from_be_bytes([seq_bytes[0], seq_bytes[1], seq_bytes[2], seq_bytes[3]]);
    let mut want = [0u8; LOOPBACK_FRAME_LEN];
    loopback_frame(mac, seq, &mut want).ok()?;
    (f == want).then_some(seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fec_requests_are_one_mode_of_the_three() {
        assert_eq!(FecMode::from_ethtool(fec_bits::AUTO), Ok(FecMode::Auto));
        assert_eq!(FecMode::from_ethtool(fec_bits::OFF), Ok(FecMode::Off));
        assert_eq!(FecMode::from_ethtool(fec_bits::RS), Ok(FecMode::Rs));
        for bad in [0, fec_bits::NONE, fec_bits::RS | fec_bits::OFF, 1 << 9] {
            assert_eq!(
                FecMode::from_ethtool(bad),
                Err(EthtoolError::Fec { requested: bad })
            );
        }
        for other in [fec_bits::BASER, fec_bits::LLRS] {
            assert_eq!(
                FecMode::from_ethtool(other),
                Err(EthtoolError::FecUnsupported { requested: other })
            );
        }
        for m in [FecMode::Off, FecMode::Rs, FecMode::Auto] {
            assert_eq!(FecMode::from_bits(m.to_bits()), Some(m));
            assert_eq!(FecMode::from_ethtool(m.ethtool_bits()), Ok(m));
        }
        assert_eq!(FecMode::from_bits(0), None);
    }

    #[test]
    fn active_fec_from_the_register() {
        assert_eq!(FecActive::from_register(0), FecActive::Off);
        assert_eq!(FecActive::from_register(3), FecActive::Rs);
        assert_eq!(FecActive::from_register(1), FecActive::OneWay(1));
        assert_eq!(FecActive::OneWay(2).ethtool_bits(), fec_bits::RS);
    }

    #[test]
    fn loopback_frames_are_recognised_only_whole() {
        let mac = [0x00, 0x0A, 0x35, 1, 2, 3];
        let mut f = [0u8; 64];
        assert_eq!(loopback_frame(&mac, 7, &mut f), Ok(LOOPBACK_FRAME_LEN));
        assert_eq!(loopback_seq(&mac, &f), Some(7));
        assert_eq!(loopback_seq(&mac, &f[..LOOPBACK_FRAME_LEN]), Some(7));
        assert_eq!(loopback_seq(&[0; 6], &f), None, "another port's frame");
        assert_eq!(loopback_seq(&mac, &f[..59]), None, "cut short");
        for i in 0..LOOPBACK_FRAME_LEN {
            let mut g = f;
            g[i] ^= 0x10;
            assert_eq!(loopback_seq(&mac, &g), None, "byte {i} changed");
        }
        let mut g = [0u8; 60];
        loopback_frame(&mac, 8, &mut g).unwrap();
        g[..LOOPBACK_PATTERN_AT].copy_from_slice(&f[..LOOPBACK_PATTERN_AT]);
        assert_eq!(loopback_seq(&mac, &g), None, "pieces of two frames");
        assert_eq!(loopback_frame(&mac, 1, &mut [0u8; 59]), Err(()));
    }
}
