//! A small writer of 64-bit little-endian BPF relocatable objects, for tests that need objects no
//! compiler would emit (tens of thousands of maps or programs, definitions that lie): sections,
//! one symbol table, relocation sections against it, and a `.BTF` made of a few type records.

/// `SHT_PROGBITS`.
pub const PROGBITS: u32 = 1;
/// `SHT_NOBITS`.
pub const NOBITS: u32 = 8;
/// `SHT_REL`.
const REL: u32 = 9;
/// `SHF_WRITE | SHF_ALLOC`.
pub const DATA: u64 = 3;
/// `SHF_ALLOC | SHF_EXECINSTR`.
pub const CODE: u64 = 6;
/// `STT_OBJECT`.
pub const OBJECT: u8 = 1;
/// `STT_FUNC`.
pub const FUNC: u8 = 2;
/// `R_BPF_64_64` (the immediate of an `lddw`).
pub const R_BPF_64_64: u32 = 1;
/// `EM_BPF`.
const EM_BPF: u16 = 247;

struct Section {
    name: String,
    kind: u32,
    flags: u64,
    data: Vec<u8>,
    /// Bytes of a `NOBITS` section (its data is empty).
    size: u64,
    /// For a relocation section: the section it applies to.
    target: u32,
}

struct Symbol {
    name: String,
    kind: u8,
    section: u32,
    value: u64,
}

/// An object under construction. Section and symbol numbers are those of the written file:
/// sections from 1 (0 is the null section), symbols from 1 (0 is the null symbol).
#[derive(Default)]
pub struct ElfBuilder {
    sections: Vec<Section>,
    symbols: Vec<Symbol>,
}

impl ElfBuilder {
    /// Adds a section with these bytes; returns its number.
    pub fn section(&mut self, name: &str, kind: u32, flags: u64, data: Vec<u8>) -> u32 {
        let size = data.len() as u64;
        self.sections.push(Section {
            name: name.into(),
            kind,
            flags,
            data,
            size,
            target: 0,
        });
        self.sections.len() as u32
    }

    /// Adds a `.bss`-like section of `size` bytes that takes no room in the file.
    pub fn nobits(&mut self, name: &str, size: u64) -> u32 {
        let n = self.section(name, NOBITS, DATA, Vec::new());
        self.sections[n as usize - 1].size = size;
        n
    }

    /// Adds a global symbol; returns its number.
    pub fn symbol(&mut self, name: &str, kind: u8, section: u32, value: u64) -> u32 {
        self.symbols.push(Symbol {
            name: name.into(),
            kind,
            section,
            value,
        });
        self.symbols.len() as u32
    }

    /// Adds the relocation section of section `target`: (byte offset, type, symbol number).
    pub fn relocations(&mut self, target: u32, relocs: &[(u64, u32, u32)]) {
        let mut data = Vec::with_capacity(relocs.len() * 16);
        for &(offset, kind, sym) in relocs {
            data.extend_from_slice(&offset.to_le_bytes());
            data.extend_from_slice(&((u64::from(sym) << 32) | u64::from(kind)).to_le_bytes());
        }
        let name = format!(".rel{}", self.sections[target as usize - 1].name);
        let n = self.section(&name, REL, 0, data);
        self.sections[n as usize - 1].target = target;
    }

    /// The object's bytes: the header, every section's data, `.strtab`, `.symtab`, `.shstrtab`,
    /// then the section headers.
    pub fn build(mut self) -> Vec<u8> {
        let (strtab, symtab) = self.symbol_table();
        let symtab_index = self.sections.len() as u32 + 2;
        self.section(".strtab", 3, 0, strtab);
        let n = self.section(".symtab", 2, 0, symtab);
        debug_assert_eq!(n, symtab_index);
        let mut shstrtab = vec![0u8];
        let mut name_at = Vec::new();
        for s in self
            .sections
            .iter()
            .map(|s| s.name.clone())
            .chain([".shstrtab".to_string()])
        {
            name_at.push(shstrtab.len() as u32);
            shstrtab.extend_from_slice(s.as_bytes());
            shstrtab.push(0);
        }
        self.section(".shstrtab", 3, 0, shstrtab);
        let mut out = vec![0u8; 64];
        let mut headers = vec![0u8; 64];
        for (s, &name) in self.sections.iter().zip(&name_at) {
            while !out.len().is_multiple_of(8) {
                out.push(0);
            }
            let (link, info, entsize) = match s.kind {
                REL => (symtab_index, s.target, 16),
                2 => (symtab_index - 1, 1, 24),
                _ => (0, 0, 0),
            };
            let h = [
                u64::from(name) | (u64::from(s.kind) << 32),
                s.flags,
                0,
                out.len() as u64,
                s.size,
                u64::from(link) | (u64::from(info) << 32),
                8,
                entsize,
            ];
            headers.extend(h.iter().flat_map(|v| v.to_le_bytes()));
            out.extend_from_slice(&s.data);
        }
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let shoff = out.len() as u64;
        out.extend_from_slice(&headers);
        let count = self.sections.len() as u16 + 1;
        out[..64].copy_from_slice(&elf_header(shoff, count));
        out
    }

    /// `.strtab` and `.symtab` of the symbols added.
    fn symbol_table(&self) -> (Vec<u8>, Vec<u8>) {
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 24];
        for s in &self.symbols {
            let name = strtab.len() as u32;
            strtab.extend_from_slice(s.name.as_bytes());
            strtab.push(0);
            symtab.extend_from_slice(&name.to_le_bytes());
            // STB_GLOBAL, the symbol's type; st_other 0; st_shndx.
            symtab.push(0x10 | s.kind);
            symtab.push(0);
            symtab.extend_from_slice(&(s.section as u16).to_le_bytes());
            symtab.extend_from_slice(&s.value.to_le_bytes());
            symtab.extend_from_slice(&0u64.to_le_bytes());
        }
        (strtab, symtab)
    }
}

fn elf_header(shoff: u64, sections: u16) -> [u8; 64] {
    let mut h = [0u8; 64];
    h[..8].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    h[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
    h[18..20].copy_from_slice(&EM_BPF.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[40..48].copy_from_slice(&shoff.to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    h[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
    h[60..62].copy_from_slice(&sections.to_le_bytes());
    h[62..64].copy_from_slice(&(sections - 1).to_le_bytes()); // .shstrtab comes last
    h
}

/// One BPF instruction: opcode, registers, offset, immediate.
pub fn insn(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = op;
    b[1] = (src << 4) | dst;
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..].copy_from_slice(&imm.to_le_bytes());
    b
}

/// `exit`.
pub const EXIT: [u8; 8] = [0x95, 0, 0, 0, 0, 0, 0, 0];

/// A `.BTF` section under construction: type records numbered from 1, and their strings.
pub struct BtfBuilder {
    types: Vec<u8>,
    strings: Vec<u8>,
    count: u32,
}

impl Default for BtfBuilder {
    fn default() -> Self {
        Self {
            types: Vec::new(),
            strings: vec![0],
            count: 0,
        }
    }
}

impl BtfBuilder {
    /// The offset of `s` in the string section (added at the end).
    pub fn string(&mut self, s: &str) -> u32 {
        let at = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        at
    }

    /// Adds a record of `kind` with `vlen`, its third word and its kind-specific words; returns
    /// its type id.
    pub fn record(&mut self, name: u32, kind: u32, vlen: u32, third: u32, extra: &[u32]) -> u32 {
        for w in [name, (kind << 24) | vlen, third].iter().chain(extra) {
            self.types.extend_from_slice(&w.to_le_bytes());
        }
        self.count += 1;
        self.count
    }

    /// A 4-byte `int`.
    pub fn int(&mut self) -> u32 {
        let name = self.string("int");
        self.record(name, 1, 0, 4, &[32])
    }

    /// The member type `__uint(name, n)` declares: a pointer to an array of `n` ints.
    pub fn uint(&mut self, int: u32, n: u32) -> u32 {
        let array = self.record(0, 3, 0, 0, &[int, int, n]);
        self.record(0, 2, 0, array, &[])
    }

    /// The member type `__type(name, T)` declares: a pointer to `t`.
    pub fn pointer(&mut self, t: u32) -> u32 {
        self.record(0, 2, 0, t, &[])
    }

    /// A struct of 8-byte members (name, type).
    pub fn structure(&mut self, members: &[(&str, u32)]) -> u32 {
        let mut extra = Vec::with_capacity(members.len() * 3);
        for (i, &(name, ty)) in members.iter().enumerate() {
            extra.extend([self.string(name), ty, 64 * i as u32]);
        }
        let size = 8 * members.len() as u32;
        self.record(0, 4, members.len() as u32, size, &extra)
    }

    /// A global variable of type `t`.
    pub fn var(&mut self, name: &str, t: u32) -> u32 {
        let name = self.string(name);
        self.record(name, 14, 0, t, &[1])
    }

    /// A data section of variables (type id, offset, size).
    pub fn datasec(&mut self, name: &str, vars: &[(u32, u32, u32)]) -> u32 {
        let name = self.string(name);
        let size = vars.iter().map(|v| v.1 + v.2).max().unwrap_or(0);
        let extra: Vec<u32> = vars.iter().flat_map(|&(t, o, s)| [t, o, s]).collect();
        self.record(name, 15, vars.len() as u32, size, &extra)
    }

    /// The section's bytes.
    pub fn build(self) -> Vec<u8> {
        let mut out = vec![0x9f, 0xeb, 1, 0];
        let tlen = self.types.len() as u32;
        for w in [24, 0, tlen, tlen, self.strings.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&self.strings);
        out
    }
}
