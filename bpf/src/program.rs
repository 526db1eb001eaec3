//! A loaded program: its instructions after relocation, where it starts, and the names of its
//! functions (for fault messages).

use alloc::string::String;
use alloc::vec::Vec;

use crate::insn::Insn;

/// A program an object holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramInfo {
    /// Function name.
    pub name: String,
    /// Section name (`xdp`, `xdp/foo`, ...).
    pub section: String,
    /// Byte offset of the function in its section.
    pub offset: u64,
    /// Whether the section names an XDP program.
    pub is_xdp: bool,
}

/// A relocated program, ready to validate and run.
#[derive(Clone, Debug)]
pub struct Program {
    info: ProgramInfo,
    code: Vec<Insn>,
    entry: usize,
    funcs: Vec<(usize, String)>,
}

impl Program {
    /// A program made of `code`, entered at slot `entry`; `funcs` names the slots where functions
    /// start.
    #[must_use]
    pub fn new(info: ProgramInfo, code: Vec<Insn>, entry: usize, mut funcs: Vec<(usize, String)>) -> Self {
        funcs.sort();
        Self {
            info,
            code,
            entry,
            funcs,
        }
    }

    /// A program from raw instructions (no object, no maps): for tests, the fuzzer and tools
    /// that assemble their own code.
    #[must_use]
    pub fn from_insns(name: &str, code: Vec<Insn>) -> Self {
        let info = ProgramInfo {
            name: name.into(),
            section: "xdp".into(),
            offset: 0,
            is_xdp: true,
        };
        Self::new(info, code, 0, Vec::new())
    }

    /// What the object said about it.
    #[must_use]
    pub const fn info(&self) -> &ProgramInfo {
        &self.info
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The instructions.
    #[must_use]
    pub fn code(&self) -> &[Insn] {
        &self.code
    }

    /// The instructions, for the loader's late relocations (CO-RE).
    pub(crate) fn code_mut(&mut self) -> &mut [Insn] {
        &mut self.code
    }

    /// The first instruction run.
    #[must_use]
    pub const fn entry(&self) -> usize {
        self.entry
    }

    /// "function+offset" of slot `pc`, for messages.
    #[must_use]
    pub fn locate(&self, pc: usize) -> (Option<&str>, usize) {
        match self.funcs.iter().rev().find(|(start, _)| *start <= pc) {
            Some((start, name)) => (Some(name.as_str()), pc - start),
            None => (None, pc),
        }
    }
}
