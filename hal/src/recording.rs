//! The recording register bus: a register file that remembers what was written and logs every
//! access as one line of text (feature `alloc`).
//!
//! Line format, one access per line, offsets relative to the BAR start:
//!
//! ```text
//! W <bar> 0x<offset, 8 hex digits> 0x<value written, 8 hex digits>
//! R <bar> 0x<offset, 8 hex digits> 0x<value returned, 8 hex digits>
//! ```
//!
//! with `<bar>` = 0 for the QDMA BAR and 2 for the shell BAR. A read returns, in this order of
//! precedence: a [`Preset`] that matches the register, else the last value written, else 0.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::fmt;

use crate::regs::{cmac, qdma, shell};
use crate::window::{Bar, RegisterWindow, UNMAPPED_READ};

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A register read.
    Read,
    /// A register write.
    Write,
}

/// One logged register access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// Read or write.
    pub kind: AccessKind,
    /// Which BAR.
    pub bar: Bar,
    /// Byte offset from the BAR start.
    pub offset: u32,
    /// Value written, or value returned by the read.
    pub value: u32,
}

impl Access {
    /// A write access.
    #[must_use]
    pub const fn write(bar: Bar, offset: u32, value: u32) -> Self {
        Self {
            kind: AccessKind::Write,
            bar,
            offset,
            value,
        }
    }

    /// A read access.
    #[must_use]
    pub const fn read(bar: Bar, offset: u32, value: u32) -> Self {
        Self {
            kind: AccessKind::Read,
            bar,
            offset,
            value,
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            AccessKind::Read => 'R',
            AccessKind::Write => 'W',
        };
        write!(
            f,
            "{k} {} 0x{:08x} 0x{:08x}",
            self.bar.index(),
            self.offset,
            self.value
        )
    }
}

/// How a register reads, overriding the register file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresetValue {
    /// Always reads this value (a read-only register).
    Fixed(u32),
    /// Reads the last value written with these bits cleared (e.g. a busy bit that completes at
    /// once).
    WrittenWithCleared(u32),
    /// Reads `base | offset` (offset within the BAR), so that every register of a range returns a
    /// value that names it.
    OffsetPattern(u32),
}

/// A preset for a range of registers `[start, end)` in one BAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// Human-readable name, listed by `onic trace --help`.
    pub name: &'static str,
    /// The BAR.
    pub bar: Bar,
    /// First offset (inclusive).
    pub start: u32,
    /// Last offset (exclusive).
    pub end: u32,
    /// How the registers read.
    pub value: PresetValue,
}

/// Base of the recognisable value every statistics register reads under [`Recorder::opennic`]:
/// the value is this base ORed with the register's BAR2 offset.
pub const STATS_PATTERN: u32 = 0x5A00_0000;

/// Prefetch cache depth preset (C2H_PFCH_CACHE_DEPTH).
pub const PRESET_PFCH_CACHE_DEPTH: u32 = 16;
/// Completion-coalesce buffer depth preset (C2H_CMPL_COAL_BUF_DEPTH).
pub const PRESET_CMPL_COAL_BUF_DEPTH: u32 = 32;

/// The presets of [`Recorder::opennic`]: an OpenNIC card whose operations complete at once.
#[must_use]
pub fn opennic_presets() -> Vec<Preset> {
    let mut p = alloc::vec![
        Preset {
            name: "IND_CTXT_CMD reads back the command with the busy bit clear",
            bar: Bar::Qdma,
            start: qdma::IND_CTXT_CMD.offset(),
            end: qdma::IND_CTXT_CMD.offset() + 4,
            value: PresetValue::WrittenWithCleared(1),
        },
        Preset {
            name: "C2H_PFCH_CACHE_DEPTH reads 16",
            bar: Bar::Qdma,
            start: qdma::C2H_PFCH_CACHE_DEPTH.offset(),
            end: qdma::C2H_PFCH_CACHE_DEPTH.offset() + 4,
            value: PresetValue::Fixed(PRESET_PFCH_CACHE_DEPTH),
        },
        Preset {
            name: "C2H_CMPL_COAL_BUF_DEPTH reads 32",
            bar: Bar::Qdma,
            start: qdma::C2H_CMPL_COAL_BUF_DEPTH.offset(),
            end: qdma::C2H_CMPL_COAL_BUF_DEPTH.offset() + 4,
            value: PresetValue::Fixed(PRESET_CMPL_COAL_BUF_DEPTH),
        },
        Preset {
            name: "SHELL_STATUS reads every reset done (QDMA0, CMAC0/1, adapter 0/1)",
            bar: Bar::Shell,
            start: shell::SHELL_STATUS.offset(),
            end: shell::SHELL_STATUS.offset() + 4,
            value: PresetValue::Fixed(
                shell::reset_bits::QDMA0
                    | shell::reset_bits::CMAC0
                    | shell::reset_bits::ADAPTER0
                    | shell::reset_bits::CMAC1
                    | shell::reset_bits::ADAPTER1,
            ),
        },
    ];
    for port in 0..cmac::MAX_PORTS {
        let base = cmac::cmac_base(port);
        p.push(Preset {
            name: "CMAC CORE_VERSION reads 0x301 (both ports)",
            bar: Bar::Shell,
            start: cmac::CORE_VERSION.on(base).offset(),
            end: cmac::CORE_VERSION.on(base).offset() + 4,
            value: PresetValue::Fixed(cmac::CORE_VERSION_EXPECTED),
        });
        p.push(Preset {
            name: "CMAC STAT_RX_STATUS reads 0x3 (link up, aligned)",
            bar: Bar::Shell,
            start: cmac::STAT_RX_STATUS.on(base).offset(),
            end: cmac::STAT_RX_STATUS.on(base).offset() + 4,
            value: PresetValue::Fixed(cmac::STAT_RX_STATUS_UP),
        });
        p.push(Preset {
            name: "CMAC statistics read 0x5A000000 | BAR2 offset",
            bar: Bar::Shell,
            start: cmac::CMAC_STATS[0].low.on(base).offset(),
            end: cmac::CMAC_STATS[cmac::CMAC_STATS.len() - 1]
                .high()
                .on(base)
                .offset()
                + 4,
            value: PresetValue::OffsetPattern(STATS_PATTERN),
        });
        let ab = cmac::adapter_base(port);
        p.push(Preset {
            name: "packet adapter counters read 0x5A000000 | BAR2 offset",
            bar: Bar::Shell,
            start: ab,
            end: ab + cmac::adapter::BLOCK_LEN,
            value: PresetValue::OffsetPattern(STATS_PATTERN),
        });
    }
    p
}

#[derive(Default)]
struct State {
    regs: BTreeMap<(Bar, u32), u32>,
    presets: Vec<Preset>,
    log: Vec<Access>,
}

/// A register file for both BARs that logs every access. Hand out windows with
/// [`Recorder::window`].
#[derive(Default)]
pub struct Recorder {
    state: RefCell<State>,
}

impl Recorder {
    /// A register file with no presets: every register reads its last written value, or 0.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A register file with the OpenNIC presets of [`opennic_presets`].
    #[must_use]
    pub fn opennic() -> Self {
        let r = Self::new();
        r.state.borrow_mut().presets = opennic_presets();
        r
    }

    /// Adds a preset; later presets take precedence over earlier ones.
    pub fn add_preset(&self, preset: Preset) {
        self.state.borrow_mut().presets.push(preset);
    }

    /// Sets a register's value without logging (scenario set-up).
    pub fn poke(&self, bar: Bar, offset: u32, value: u32) {
        self.state.borrow_mut().regs.insert((bar, offset), value);
    }

    /// The value a read would return now, without logging it.
    #[must_use]
    pub fn peek(&self, bar: Bar, offset: u32) -> u32 {
        self.state.borrow().read(bar, offset)
    }

    /// A window onto one BAR.
    #[must_use]
    pub fn window(&self, bar: Bar) -> RecordingWindow<'_> {
        RecordingWindow { rec: self, bar }
    }

    /// The accesses logged so far.
    #[must_use]
    pub fn log(&self) -> Vec<Access> {
        self.state.borrow().log.clone()
    }

    /// Takes the accesses logged so far, leaving the log empty.
    pub fn take_log(&self) -> Vec<Access> {
        core::mem::take(&mut self.state.borrow_mut().log)
    }

    /// The log as text, one access per line.
    #[must_use]
    pub fn log_text(&self) -> String {
        use core::fmt::Write as _;
        let mut s = String::new();
        for a in &self.state.borrow().log {
            let _ = writeln!(s, "{a}");
        }
        s
    }
}

impl State {
    fn read(&self, bar: Bar, offset: u32) -> u32 {
        let written = self.regs.get(&(bar, offset)).copied();
        let preset = self
            .presets
            .iter()
            .rev()
            .find(|p| p.bar == bar && (p.start..p.end).contains(&offset));
        match preset.map(|p| p.value) {
            Some(PresetValue::Fixed(v)) => v,
            Some(PresetValue::WrittenWithCleared(mask)) => written.unwrap_or(0) & !mask,
            Some(PresetValue::OffsetPattern(base)) => base | offset,
            None => written.unwrap_or(0),
        }
    }
}

/// One BAR of a [`Recorder`].
#[derive(Clone, Copy)]
pub struct RecordingWindow<'a> {
    rec: &'a Recorder,
    bar: Bar,
}

impl fmt::Debug for RecordingWindow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingWindow")
            .field("bar", &self.bar)
            .finish_non_exhaustive()
    }
}

// SAFETY: no device is behind the window: accesses touch only the recorder's map; misaligned
// offsets read UNMAPPED_READ and are dropped on write, as the contract asks. Every call is logged
// exactly once, in order.
unsafe impl RegisterWindow for RecordingWindow<'_> {
    fn read32(&self, offset: u32) -> u32 {
        let mut st = self.rec.state.borrow_mut();
        let v = if offset.is_multiple_of(4) {
            st.read(self.bar, offset)
        } else {
            UNMAPPED_READ
        };
        st.log.push(Access::read(self.bar, offset, v));
        v
    }

    fn write32(&self, offset: u32, value: u32) {
        let mut st = self.rec.state.borrow_mut();
        if offset.is_multiple_of(4) {
            st.regs.insert((self.bar, offset), value);
        }
        st.log.push(Access::write(self.bar, offset, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::IndCtxtCmd;
    use crate::window::RegisterAccess;

    #[test]
    fn logs_in_the_documented_format() {
        let r = Recorder::new();
        r.window(Bar::Shell).write32(0x1000, 8);
        assert_eq!(r.window(Bar::Shell).read32(0x1000), 8);
        assert_eq!(r.window(Bar::Qdma).read32(0x18004), 0);
        assert_eq!(
            r.log_text(),
            "W 2 0x00001000 0x00000008\nR 2 0x00001000 0x00000008\nR 0 0x00018004 0x00000000\n"
        );
    }

    #[test]
    fn opennic_presets_behave_as_documented() {
        let r = Recorder::opennic();
        let q = r.window(Bar::Qdma);
        let s = r.window(Bar::Shell);
        q.write(qdma::IND_CTXT_CMD, IndCtxtCmd::from_bits(0x39));
        assert_eq!(q.read(qdma::IND_CTXT_CMD).bits(), 0x38);
        assert_eq!(q.read(qdma::C2H_PFCH_CACHE_DEPTH), 16);
        assert_eq!(q.read(qdma::C2H_CMPL_COAL_BUF_DEPTH), 32);
        assert_eq!(s.read(shell::SHELL_STATUS) & 0x110, 0x110);
        assert_eq!(s.read32(0x8024), 0x301);
        assert_eq!(s.read32(0xC024), 0x301);
        assert_eq!(s.read32(0xC204), 0x3);
        assert_eq!(s.read32(0x8500), 0x5A00_8500);
        assert_eq!(s.read32(0xF030), 0x5A00_F030);
        // A register without a preset reads what was written.
        s.write32(0x1400, 0xABCD_0003);
        assert_eq!(s.read32(0x1400), 0xABCD_0003);
    }
}
