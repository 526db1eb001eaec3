//! Queue doorbell register values (hardware.md §6).
//!
//! The offsets are in [`crate::regs::qdma`] (`dmap_sel_*`, 16-byte stride per function-relative
//! queue). Only the bits listed in the spec are ever set; every other bit stays 0.

use bitfield::bitfield;

use super::{code_enum, register_u32};

code_enum! {
    /// Completion trigger mode: when the IP writes the completion status record and raises the
    /// queue's interrupt (hardware.md §5.6, §6).
    pub enum TrigMode {
        /// 0: no trigger.
        Off = 0,
        /// 1: on every completion.
        Every = 1,
        /// 2: user count.
        UserCount = 2,
        /// 3: user.
        User = 3,
        /// 4: user timer.
        UserTimer = 4,
        /// 5: timer or count threshold, whichever is reached first (what the reference driver uses).
        TimerCount = 5,
    }
}

bitfield! {
    /// H2C_DESC_PIDX doorbell: publishes the transmit ring's producer index (hardware.md §6).
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct H2cPidxDb(u32);
    impl Debug;
    /// \[15:0\]: producer index (the driver's next_to_use).
    pub u16, pidx, set_pidx: 15, 0;
    /// \[16\]: re-arm the queue interrupt (the reference driver writes 0).
    pub irq_arm, set_irq_arm: 16;
}
register_u32!(H2cPidxDb);

impl H2cPidxDb {
    /// The doorbell value for `pidx`, with `irq_arm`.
    #[must_use]
    pub fn new(pidx: u16, irq_arm: bool) -> Self {
        let mut db = Self(0);
        db.set_pidx(pidx);
        db.set_irq_arm(irq_arm);
        db
    }
}

bitfield! {
    /// C2H_DESC_PIDX doorbell: hands receive descriptors up to `pidx` to the IP (hardware.md §6).
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct C2hPidxDb(u32);
    impl Debug;
    /// \[15:0\]: producer index (the driver's next_to_use).
    pub u16, pidx, set_pidx: 15, 0;
    /// \[16\]: re-arm the queue interrupt (the reference driver writes 0).
    pub irq_arm, set_irq_arm: 16;
}
register_u32!(C2hPidxDb);

impl C2hPidxDb {
    /// The doorbell value for `pidx`, with `irq_arm`.
    #[must_use]
    pub fn new(pidx: u16, irq_arm: bool) -> Self {
        let mut db = Self(0);
        db.set_pidx(pidx);
        db.set_irq_arm(irq_arm);
        db
    }
}

bitfield! {
    /// CMPT_CIDX doorbell: returns completion entries up to `cidx` to the IP and sets the queue's
    /// trigger (hardware.md §6).
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct CmptCidxDb(u32);
    impl Debug;
    /// \[15:0\]: consumer index (the driver's next_to_clean).
    pub u16, cidx, set_cidx: 15, 0;
    /// \[19:16\]: C2H_CNT_TH index of the count threshold.
    pub u8, counter_idx, set_counter_idx: 19, 16;
    /// \[23:20\]: C2H_TIMER_CNT index of the timer.
    pub u8, timer_idx, set_timer_idx: 23, 20;
    /// \[26:24\]: trigger mode; codes 6 and 7 are undefined and decode to an error.
    pub u8, from try_into TrigMode, trig_mode, set_trig_mode: 26, 24;
    /// \[27\]: write the status record on this update.
    pub stat_en, set_stat_en: 27;
    /// \[28\]: re-arm the queue interrupt.
    pub irq_arm, set_irq_arm: 28;
}
register_u32!(CmptCidxDb);

impl CmptCidxDb {
    /// The reference driver's doorbell: `cidx`, counter index 0, timer index 0, trigger mode 5
    /// (timer or count), status writeback on, and `irq_arm`. That is `cidx | 0x1D000000` armed,
    /// `cidx | 0x0D000000` not armed.
    #[must_use]
    pub fn reference(cidx: u16, irq_arm: bool) -> Self {
        let mut db = Self(0);
        db.set_cidx(cidx);
        db.set_counter_idx(0);
        db.set_timer_idx(0);
        db.set_trig_mode(TrigMode::TimerCount);
        db.set_stat_en(true);
        db.set_irq_arm(irq_arm);
        db
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::UnknownCode;

    #[test]
    fn spec_examples() {
        // hardware.md §6: H2C PIDX of queue 3 set to 17, C2H PIDX set to 300, CMPT CIDX 42 with
        // arm.
        assert_eq!(H2cPidxDb::new(17, false).bits(), 0x00000011);
        assert_eq!(C2hPidxDb::new(300, false).bits(), 0x0000012C);
        assert_eq!(CmptCidxDb::reference(42, true).bits(), 0x1D00002A);
        // hardware.md §5.8 / §13.2: queue init writes C2H PIDX = 256, CMPT CIDX = 0 armed.
        assert_eq!(C2hPidxDb::new(256, false).bits(), 0x00000100);
        assert_eq!(CmptCidxDb::reference(0, true).bits(), 0x1D000000);
        // The same doorbell without arm.
        assert_eq!(CmptCidxDb::reference(42, false).bits(), 0x0D00002A);
        assert_eq!(CmptCidxDb::reference(1022, true).bits(), 0x1D0003FE);
        assert_eq!(CmptCidxDb::reference(u16::MAX, false).bits(), 0x0D00FFFF);
    }

    #[test]
    fn decodes_cmpt_doorbell() {
        let db = CmptCidxDb::from_bits(0x1D00002A);
        assert_eq!(db.cidx(), 42);
        assert_eq!(db.counter_idx(), 0);
        assert_eq!(db.timer_idx(), 0);
        assert_eq!(db.trig_mode(), Ok(TrigMode::TimerCount));
        assert!(db.stat_en());
        assert!(db.irq_arm());
        let db = CmptCidxDb::from_bits(0x0E5A_0007);
        assert_eq!(db.cidx(), 7);
        assert_eq!(db.counter_idx(), 0xA);
        assert_eq!(db.timer_idx(), 0x5);
        assert_eq!(db.trig_mode(), Err(UnknownCode(6)));
        assert!(db.stat_en());
        assert!(!db.irq_arm());
        assert_eq!(
            CmptCidxDb::from_bits(0x0700_0000).trig_mode(),
            Err(UnknownCode(7))
        );
    }

    #[test]
    fn field_isolation() {
        let mut db = H2cPidxDb::default();
        db.set_pidx(u16::MAX);
        assert_eq!(db.bits(), 0xFFFF);
        let mut db = H2cPidxDb::default();
        db.set_irq_arm(true);
        assert_eq!(db.bits(), 1 << 16);
        assert_eq!(H2cPidxDb::new(5, true).bits(), 0x0001_0005);
        assert_eq!(C2hPidxDb::new(5, true).bits(), 0x0001_0005);

        let check = |f: fn(&mut CmptCidxDb), bits: u32| {
            let mut db = CmptCidxDb::default();
            f(&mut db);
            assert_eq!(db.bits(), bits);
        };
        check(|d| d.set_cidx(u16::MAX), 0x0000_FFFF);
        check(|d| d.set_counter_idx(u8::MAX), 0x000F_0000);
        check(|d| d.set_timer_idx(u8::MAX), 0x00F0_0000);
        check(|d| d.set_trig_mode(TrigMode::TimerCount), 0x0500_0000);
        // The typed field has no all-ones code; check its extent by decoding instead.
        assert_eq!(
            CmptCidxDb::from_bits(0x0700_0000).trig_mode(),
            Err(UnknownCode(7))
        );
        assert_eq!(CmptCidxDb::from_bits(!0x0700_0000).trig_mode(), Ok(TrigMode::Off));
        check(|d| d.set_stat_en(true), 1 << 27);
        check(|d| d.set_irq_arm(true), 1 << 28);
    }

    #[test]
    fn trig_mode_codes() {
        let all = [
            TrigMode::Off,
            TrigMode::Every,
            TrigMode::UserCount,
            TrigMode::User,
            TrigMode::UserTimer,
            TrigMode::TimerCount,
        ];
        for (code, mode) in all.into_iter().enumerate() {
            assert_eq!(usize::from(mode.code()), code);
            assert_eq!(TrigMode::try_from(mode.code()), Ok(mode));
            let mut db = CmptCidxDb::default();
            db.set_trig_mode(mode);
            assert_eq!(db.trig_mode(), Ok(mode));
            assert_eq!(db.bits(), u32::from(mode.code()) << 24);
        }
        assert_eq!(TrigMode::try_from(6), Err(UnknownCode(6)));
        assert_eq!(TrigMode::default(), TrigMode::Off);
    }

    #[test]
    fn round_trips() {
        for bits in [0, u32::MAX, 0x1D00002A, 0xA5A5_5A5A] {
            assert_eq!(H2cPidxDb::from_bits(bits).bits(), bits);
            assert_eq!(u32::from(C2hPidxDb::from(bits)), bits);
            assert_eq!(CmptCidxDb::from_bits(bits).bits(), bits);
        }
    }
}
