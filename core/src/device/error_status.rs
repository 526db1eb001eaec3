//! The QDMA's error state as the error interrupt's handler reports it: GLBL_ERR_STAT with its
//! groups named, the leaf status register behind each group that is set, and the queues the C2H
//! and H2C engines name as the first to fail (hardware.md §3.3). Reading changes nothing: the
//! status registers are read-only for the driver, and the error interrupt is not re-armed (as in
//! the reference driver: an error that stays asserted cannot become an interrupt storm).

use core::fmt;

use onic_hal::regs::qdma::{self, errors};
use onic_hal::{RegisterAccess, RegisterWindow};

/// A snapshot of the QDMA's error registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorStatus {
    /// GLBL_ERR_STAT.
    pub global: u32,
    /// Each register of [`errors::LEAF_STATUS`], in its order; 0 where its group bit is clear
    /// (not read).
    pub leaves: [u32; errors::LEAF_STATUS.len()],
    /// C2H_FIRST_ERR_QID, read when the streaming C2H group is set.
    pub c2h_first_qid: Option<u32>,
    /// H2C_FIRST_ERR_QID, read when the streaming H2C group is set.
    pub h2c_first_qid: Option<u32>,
}

impl ErrorStatus {
    /// Reads GLBL_ERR_STAT and the leaves of the groups it reports.
    pub fn read<Q: RegisterWindow>(qdma: &Q) -> Self {
        let global = qdma.read(qdma::GLBL_ERR_STAT);
        let mut leaves = [0; errors::LEAF_STATUS.len()];
        for (value, leaf) in leaves.iter_mut().zip(errors::LEAF_STATUS) {
            if global & leaf.group_bits != 0 {
                *value = qdma.read(leaf.reg);
            }
        }
        let h2c = errors::GROUP_ST_H2C_V4 | errors::GROUP_ST_H2C_V5;
        Self {
            global,
            leaves,
            c2h_first_qid: (global & errors::GROUP_ST_C2H != 0).then(|| qdma.read(qdma::C2H_FIRST_ERR_QID)),
            h2c_first_qid: (global & h2c != 0).then(|| qdma.read(qdma::H2C_FIRST_ERR_QID)),
        }
    }

    /// Whether any error is reported.
    #[must_use]
    pub const fn any(&self) -> bool {
        self.global != 0
    }
}

/// One line: `GLBL_ERR_STAT 0x00000100 (streaming C2H); C2H_ERR_STAT 0x00000008: bit 3
/// QID_MISMATCH (a packet's queue id did not match its queue); C2H first error on queue 3`, or
/// `no error reported`. Each leaf bit set is named with its meaning
/// ([`errors::ErrBit`], the QDMA's definitions); bits the QDMA does not define are shown as
/// `bit N`, and so are group bits the spec does not name.
impl fmt::Display for ErrorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.any() {
            return f.write_str("no error reported");
        }
        write!(f, "GLBL_ERR_STAT {:#010x} (", self.global)?;
        let mut sep = "";
        let mut named = 0;
        for (bit, name) in errors::GROUP_NAMES {
            if self.global & bit != 0 {
                write!(f, "{sep}{name}")?;
                sep = ", ";
                named |= bit;
            }
        }
        let mut rest = self.global & !named;
        while rest != 0 {
            write!(f, "{sep}bit {}", rest.trailing_zeros())?;
            sep = ", ";
            rest &= rest - 1;
        }
        f.write_str(")")?;
        for (value, leaf) in self.leaves.iter().zip(errors::LEAF_STATUS) {
            if *value != 0 {
                write!(f, "; {} {value:#010x}:", leaf.name)?;
                write_leaf_bits(f, *value, leaf.bits)?;
            }
        }
        if let Some(q) = self.c2h_first_qid {
            write!(f, "; C2H first error on queue {q}")?;
        }
        if let Some(q) = self.h2c_first_qid {
            write!(f, "; H2C first error on queue {q}")?;
        }
        Ok(())
    }
}

/// The bits set in a leaf status value, each with its name and meaning where the QDMA defines
/// it: ` bit 3 QID_MISMATCH (...), bit 5`.
fn write_leaf_bits(f: &mut fmt::Formatter<'_>, value: u32, bits: &[errors::ErrBit]) -> fmt::Result {
    let mut rest = value;
    let mut sep = " ";
    while rest != 0 {
        let n = rest.trailing_zeros();
        rest &= rest - 1;
        write!(f, "{sep}bit {n}")?;
        if let Some(b) = bits.iter().find(|b| u32::from(b.bit) == n) {
            write!(f, " {} ({})", b.name, b.meaning)?;
        }
        sep = ", ";
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use onic_hal::recording::{Preset, PresetValue, Recorder};
    use onic_hal::Bar;
    use std::string::ToString;

    fn preset(rec: &Recorder, name: &'static str, reg: onic_hal::regs::Reg<u32>, value: u32) {
        rec.add_preset(Preset {
            name,
            bar: Bar::Qdma,
            start: reg.offset(),
            end: reg.offset() + 4,
            value: PresetValue::Fixed(value),
        });
    }

    #[test]
    fn a_quiet_device_reads_one_register() {
        let rec = Recorder::opennic();
        preset(&rec, "stat", qdma::GLBL_ERR_STAT, 0);
        let s = ErrorStatus::read(&rec.window(Bar::Qdma));
        assert_eq!(rec.log().len(), 1);
        assert!(!s.any());
        assert_eq!(s.to_string(), "no error reported");
    }

    #[test]
    fn groups_are_named_and_only_their_leaves_read() {
        let rec = Recorder::opennic();
        preset(
            &rec,
            "stat",
            qdma::GLBL_ERR_STAT,
            errors::GROUP_ST_C2H | errors::GROUP_DSC | 1 << 20,
        );
        preset(&rec, "dsc", qdma::GLBL_DSC_ERR_STS, 0x4);
        preset(&rec, "c2h", qdma::C2H_ERR_STAT, 0x8);
        preset(&rec, "fatal", qdma::C2H_FATAL_ERR_STAT, 0);
        preset(&rec, "qid", qdma::C2H_FIRST_ERR_QID, 3);
        let s = ErrorStatus::read(&rec.window(Bar::Qdma));
        // GLBL_ERR_STAT, the DSC leaf, both C2H leaves and the first C2H queue; nothing of H2C,
        // TRQ or RAM.
        assert_eq!(rec.log().len(), 5);
        assert_eq!(s.h2c_first_qid, None);
        assert_eq!(
            s.to_string(),
            "GLBL_ERR_STAT 0x00100104 (descriptor, streaming C2H, bit 20); GLBL_DSC_ERR_STS \
             0x00000004: bit 2 PARAM (a descriptor fetch completion did not match its request); \
             C2H_ERR_STAT 0x00000008: bit 3 QID_MISMATCH (a packet's queue id did not match its \
             queue); C2H first error on queue 3"
        );
    }

    #[test]
    fn bits_the_qdma_does_not_define_are_shown_by_number() {
        let rec = Recorder::opennic();
        preset(&rec, "stat", qdma::GLBL_ERR_STAT, errors::GROUP_ST_C2H);
        preset(&rec, "c2h", qdma::C2H_ERR_STAT, 1 << 13 | 1 << 2);
        preset(&rec, "fatal", qdma::C2H_FATAL_ERR_STAT, 1 << 31);
        preset(&rec, "qid", qdma::C2H_FIRST_ERR_QID, 0);
        let s = ErrorStatus::read(&rec.window(Bar::Qdma)).to_string();
        assert!(
            s.contains(
                "C2H_ERR_STAT 0x00002004: bit 2, bit 13 CMPT_QFULL_ERR (a completion ring was full); \
                 C2H_FATAL_ERR_STAT 0x80000000: bit 31;"
            ),
            "{s}"
        );
    }

    #[test]
    fn both_h2c_group_bits_read_the_h2c_leaf() {
        for bit in [errors::GROUP_ST_H2C_V4, errors::GROUP_ST_H2C_V5] {
            let rec = Recorder::opennic();
            preset(&rec, "stat", qdma::GLBL_ERR_STAT, bit);
            preset(&rec, "h2c", qdma::H2C_ERR_STAT, 0x10);
            preset(&rec, "qid", qdma::H2C_FIRST_ERR_QID, 70);
            let s = ErrorStatus::read(&rec.window(Bar::Qdma));
            assert_eq!(s.h2c_first_qid, Some(70));
            assert!(
                s.to_string().ends_with(
                    "(streaming H2C); H2C_ERR_STAT 0x00000010: bit 4 DBE (uncorrectable ECC error \
                         in H2C stream data); H2C first error on queue 70"
                ),
                "{s}"
            );
        }
    }
}
