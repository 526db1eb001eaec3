//! Loading a clang `-target bpf` object: its programs (one per function of each code section;
//! subprograms in `.text`), its maps (BTF-defined in `.maps`, legacy in `maps`, global data in
//! `.rodata*`, `.data*`, `.bss*`), and the relocations that tie the code to them.
//!
//! The ELF container is read with the `object` crate; everything BPF-specific is done here, in the
//! way libbpf interprets such objects: a program's image is its section followed by `.text`; a
//! `call` relocation targets `symbol offset / 8 + imm + 1` in the symbol's section; an `lddw`
//! relocation against a map symbol becomes the map's handle, against a global-data symbol the
//! address of `symbol offset + imm` in that map's value.

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use object::read::elf::ElfFile64;
use object::{LittleEndian, Object as _, ObjectSection, ObjectSymbol};
use object::{SectionIndex, SectionKind, SymbolIndex, SymbolKind, SymbolSection};

use crate::btf::Btf;
use crate::insn::{self, Insn, INSN_SIZE};
use crate::maps::{Map, MapDef, MapType};
use crate::mem;
use crate::msg;
use crate::program::{Program, ProgramInfo};
use crate::{LoadError, LoadOptions};

/// `R_BPF_64_64`: the 64-bit immediate of an `lddw`.
const R_BPF_64_64: u32 = 1;
/// `R_BPF_64_32`: the 32-bit immediate of a `call`.
const R_BPF_64_32: u32 = 10;
/// Bytes of the legacy `struct bpf_map_def` fields the engine reads.
const LEGACY_DEF_LEN: u64 = 20;

type Elf<'a> = ElfFile64<'a, LittleEndian>;

fn err(msg: impl Into<String>) -> LoadError {
    LoadError::new(msg)
}

/// The object's maps, and where each is defined: what a relocation against a symbol resolves
/// to, found in logarithmic time.
#[derive(Default)]
struct MapTable {
    maps: Vec<Map>,
    /// The map defined at (section, byte offset) of `.maps` or `maps`.
    defs: BTreeMap<(usize, u64), usize>,
    /// The map holding the global data of a section.
    data: BTreeMap<usize, usize>,
    /// The bytes the maps take so far ([`Map::footprint`]).
    bytes: usize,
    /// Definitions the engine cannot make (an unsupported type, ...), by place, with the reason:
    /// refused only when the chosen program refers to one, as the kernel refuses a program
    /// only for what it uses.
    refused: BTreeMap<(usize, u64), String>,
    /// Maps whose definitions may give initial entries (`.values = { ... }` of an
    /// `__array(values, ...)` member): (map, its definition's place, byte offset of the
    /// pointers in `.maps`, entries).
    inits: Vec<(usize, (SectionIndex, u64), u64, u32)>,
    /// Initial entries of program arrays: (map, index, function name), for the loader's caller
    /// to fill once the programs exist.
    prog_slots: Vec<(usize, u32, String)>,
}

/// Where a map is defined.
#[derive(Clone, Copy)]
enum Place {
    /// A definition in `.maps` or `maps`: its section and byte offset.
    Def(SectionIndex, u64),
    /// A global-data section.
    Data(SectionIndex),
}

impl MapTable {
    /// Makes the map of `def` (with `init` as its value, for global data) and records its place.
    fn add(
        &mut self,
        def: MapDef,
        place: Place,
        init: Option<&[u8]>,
        opts: &LoadOptions,
    ) -> Result<(), LoadError> {
        let name = def.name.clone();
        self.bytes = self.bytes.saturating_add(Map::footprint(&def, opts.cpus));
        if self.bytes > opts.max_map_bytes {
            return Err(LoadError::map_memory(
                format!(
                    "map {name}: the object's maps need more than {} bytes (LoadOptions::max_map_bytes)",
                    opts.max_map_bytes
                ),
                opts.max_map_bytes,
            ));
        }
        let mut m = match (Map::new(def, opts.cpus), place) {
            (Ok(m), _) => m,
            (Err(e), Place::Def(sec, off)) => {
                self.refuse(sec, off, err(format!("map {name}: {e}")));
                return Ok(());
            }
            (Err(e), Place::Data(_)) => return Err(err(format!("map {name}: {e}"))),
        };
        if let Some(init) = init {
            m.host_set(&0u32.to_le_bytes(), init)
                .map_err(|e| err(format!("map {name}: {e}")))?;
        }
        let index = self.maps.len();
        match place {
            // The first definition at a place is the one a relocation names.
            Place::Def(sec, off) => self.defs.entry((sec.0, off)).or_insert(index),
            Place::Data(sec) => self.data.entry(sec.0).or_insert(index),
        };
        self.maps.push(m);
        Ok(())
    }
}

impl MapTable {
    /// Notes the `__array(values, T)` member of the map just defined at (`sec`, `off`): `T` as
    /// the template of its inner maps (a map of maps), and where its initial entries lie.
    fn values(
        &mut self,
        sec: SectionIndex,
        off: u64,
        entries: u32,
        values: (u32, u32),
        btf: &Btf<'_>,
        unset: u32,
    ) {
        let Some(&m) = self.defs.get(&(sec.0, off)) else {
            return;
        };
        let (ty, member_off) = values;
        if self.maps[m].def().map_type.is_map_of_maps() {
            if let Ok((inner, _)) = btf_map_def(btf, "inner", ty, unset) {
                self.maps[m].set_inner_template(inner);
            }
        }
        self.inits
            .push((m, (sec, off), off + u64::from(member_off), entries));
    }

    /// Records a definition the engine cannot make: a program that refers to it is refused.
    fn refuse(&mut self, sec: SectionIndex, off: u64, why: LoadError) {
        self.refused
            .entry((sec.0, off))
            .or_insert_with(|| why.message().to_owned());
    }
}

/// The maps one section defines, read from the object before any map is made, so that how many
/// there are is known (and checked against [`mem::MAX_MAPS`]) before any work per map.
enum MapSource<'a> {
    /// `.maps`: its BTF variables (name, type), and the offsets of the section's symbols by name.
    Btf {
        sec: SectionIndex,
        vars: Vec<(&'a str, u32)>,
        syms: BTreeMap<&'a str, u64>,
    },
    /// `maps`: legacy `struct bpf_map_def`s, one per symbol (name, offset), in order of offset.
    Legacy {
        sec: SectionIndex,
        data: &'a [u8],
        syms: Vec<(&'a str, u64)>,
    },
    /// A global-data section: one map of one value of `size` bytes, `init` unless it is `.bss`.
    Data {
        sec: SectionIndex,
        name: &'a str,
        read_only: bool,
        size: u32,
        init: Option<&'a [u8]>,
    },
}

impl MapSource<'_> {
    fn count(&self) -> usize {
        match self {
            Self::Btf { vars, .. } => vars.len(),
            Self::Legacy { syms, .. } => syms.len(),
            Self::Data { .. } => 1,
        }
    }
}

/// A loaded object: the chosen program and the object's maps.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The program.
    pub program: Program,
    /// Every map of the object, in the order of its sections and definitions.
    pub maps: Vec<Map>,
    /// Every program the object holds (XDP or not).
    pub programs: Vec<ProgramInfo>,
    /// The programs the object's program arrays name in their declarations (`.values = { [i]
    /// = &prog }`), loaded as XDP: number `n + 1` here (0 is `program`), the number the
    /// program array's entry holds.
    pub tail_programs: Vec<Program>,
}

/// [`load`] with more choices than [`LoadOptions`] holds: how to size maps declared without
/// `max_entries`, whether a program in any section may be loaded as XDP, the kernel's BTF for
/// CO-RE relocations.
///
/// ```text
/// let loaded = Loader::new(opts).unsized_max_entries(64 * cpus).prog_type_xdp(true).load(&elf, Some("f"))?;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Loader<'k> {
    opts: LoadOptions,
    unsized_max_entries: Option<u32>,
    prog_type_xdp: bool,
    kernel_btf: Option<&'k [u8]>,
    kernel_checks: bool,
}

impl<'k> Loader<'k> {
    /// A loader with these options and the defaults below.
    #[must_use]
    pub const fn new(opts: LoadOptions) -> Self {
        Self {
            opts,
            unsized_max_entries: None,
            prog_type_xdp: false,
            kernel_btf: None,
            kernel_checks: true,
        }
    }

    /// Whether to refuse at load what the kernel's verifier refuses and the engine can tell
    /// without running ([`crate::verify`]: context fields, stack bounds, helper argument types).
    /// Default: yes. Without it such a program loads and faults only if the bad path runs.
    #[must_use]
    pub const fn kernel_checks(mut self, yes: bool) -> Self {
        self.kernel_checks = yes;
        self
    }

    /// The `max_entries` of a map declared without one (or with 0). The programs that do so
    /// (xdp-tools, the kernel's samples) expect their loader to size the map before loading,
    /// usually from the number of CPUs (`bpf_map__set_max_entries`). Default:
    /// [`LoadOptions::cpus`], the model's CPU count.
    #[must_use]
    pub const fn unsized_max_entries(mut self, n: u32) -> Self {
        self.unsized_max_entries = Some(n);
        self
    }

    /// Loads the chosen program as XDP whatever its section is called (libbpf's
    /// `bpf_program__set_type`, `onic run --prog-type xdp`). Default: only sections named `xdp`,
    /// `xdp/...`, `xdp.frags`, ... hold XDP programs.
    #[must_use]
    pub const fn prog_type_xdp(mut self, yes: bool) -> Self {
        self.prog_type_xdp = yes;
        self
    }

    /// The kernel's BTF (the bytes of `/sys/kernel/btf/vmlinux`) to resolve CO-RE relocations
    /// against. Default: the engine's own description of the types XDP programs read
    /// ([`crate::co_re::BUILTIN`]).
    #[must_use]
    pub const fn kernel_btf(mut self, btf: &'k [u8]) -> Self {
        self.kernel_btf = Some(btf);
        self
    }

    /// The options.
    #[must_use]
    pub const fn options(&self) -> &LoadOptions {
        &self.opts
    }

    fn max_entries_when_unset(&self) -> u32 {
        self.unsized_max_entries.unwrap_or(self.opts.cpus).max(1)
    }

    /// Loads program `select` of an object, as [`load`] does.
    ///
    /// # Errors
    ///
    /// Anything the engine cannot run, with a message that says what and where.
    pub fn load(&self, data: &[u8], select: Option<&str>) -> Result<Loaded, LoadError> {
        load_with(self, data, select)
    }
}

fn parse(data: &[u8]) -> Result<Elf<'_>, LoadError> {
    let file = Elf::parse(data).map_err(|e| err(format!("not a 64-bit little-endian ELF object: {e}")))?;
    if file.architecture() != object::Architecture::Bpf {
        return Err(err(format!(
            "not a BPF object (machine {:?}); build it with clang -target bpf",
            file.architecture()
        )));
    }
    Ok(file)
}

fn is_xdp_section(name: &str) -> bool {
    name == "xdp" || name.starts_with("xdp/") || name.starts_with("xdp.") || name.starts_with("xdp_")
}

fn is_data_section(name: &str) -> Option<bool> {
    for (prefix, ro) in [(".rodata", true), (".data", false), (".bss", false)] {
        if name == prefix || name.strip_prefix(prefix).is_some_and(|r| r.starts_with('.')) {
            return Some(ro);
        }
    }
    None
}

/// Lists the programs of an object.
///
/// # Errors
///
/// A malformed object.
pub fn list_programs(data: &[u8]) -> Result<Vec<ProgramInfo>, LoadError> {
    programs(&parse(data)?)
}

fn programs(file: &Elf<'_>) -> Result<Vec<ProgramInfo>, LoadError> {
    // The function symbols of each section, gathered in one pass over the symbol table (not one
    // pass per code section: an object may have thousands of each).
    let mut funcs: BTreeMap<usize, Vec<(u64, &str)>> = BTreeMap::new();
    for s in file.symbols().filter(|s| s.kind() == SymbolKind::Text) {
        if let (SymbolSection::Section(i), Ok(name)) = (s.section(), s.name()) {
            funcs.entry(i.0).or_default().push((s.address(), name));
        }
    }
    let mut out = Vec::new();
    for sec in file.sections() {
        let name = sec.name().map_err(|e| err(format!("section name: {e}")))?;
        if sec.kind() != SectionKind::Text || name == ".text" || sec.size() == 0 {
            continue;
        }
        let info = |(offset, func): (u64, &str)| ProgramInfo {
            name: func.to_owned(),
            section: name.to_owned(),
            offset,
            is_xdp: is_xdp_section(name),
        };
        match funcs.remove(&sec.index().0) {
            Some(mut list) => {
                list.sort_by_key(|f| f.0);
                out.extend(list.into_iter().map(info));
            }
            None => out.push(info((0, name))),
        }
    }
    Ok(out)
}

fn choose<'p>(
    progs: &'p [ProgramInfo],
    select: Option<&str>,
    any_section: bool,
) -> Result<&'p ProgramInfo, LoadError> {
    // The object decides how many programs there are and how they are named: the lists in
    // these messages are cut short (msg::list).
    let names = |v: &[&ProgramInfo]| -> String {
        msg::list(
            v.iter()
                .map(|p| format!("{} (section {})", msg::clip(&p.name), msg::clip(&p.section))),
        )
    };
    let all: Vec<&ProgramInfo> = progs.iter().collect();
    let found: Vec<&ProgramInfo> = match select {
        None => progs.iter().filter(|p| p.is_xdp).collect(),
        Some(s) => progs.iter().filter(|p| p.section == s || p.name == s).collect(),
    };
    match (found.as_slice(), select) {
        ([one], _) if one.is_xdp || any_section => Ok(one),
        ([one], _) => Err(err(format!(
            "{} in section '{}' is not an XDP program (XDP sections are named xdp, xdp/..., xdp.frags; --prog-type xdp loads it anyway)",
            one.name, one.section
        ))),
        ([], None) => Err(err(format!(
            "the object holds no XDP program (programs: {})",
            names(&all)
        ))),
        ([], Some(s)) => Err(err(format!(
            "no program or section '{s}' (programs: {})",
            names(&all)
        ))),
        (many, _) => Err(err(format!(
            "{} programs match; choose one by function name with --sec: {}",
            many.len(),
            names(many)
        ))),
    }
}

/// Loads program `select` (a section or function name; `None`: the only XDP program) of an
/// object, with all of the object's maps.
///
/// # Errors
///
/// Anything the engine cannot run, with a message that says what and where.
pub fn load(data: &[u8], select: Option<&str>, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    Loader::new(*opts).load(data, select)
}

fn load_with(ld: &Loader<'_>, data: &[u8], select: Option<&str>) -> Result<Loaded, LoadError> {
    let (mut loaded, slots) = load_one(ld, data, select)?;
    // The programs the program arrays' declarations name, in the same maps (the object makes
    // them the same way every time, so the numbers in their code are the same).
    let as_xdp = ld.prog_type_xdp(true);
    for (m, slot, func) in slots {
        let n = match loaded.tail_programs.iter().position(|p| p.name() == func) {
            Some(i) => i + 1,
            None => {
                let (other, _) = load_one(&as_xdp, data, Some(&func)).map_err(|e| {
                    err(format!(
                        "program {func}, named in a program array's declaration: {e}"
                    ))
                })?;
                loaded.tail_programs.push(other.program);
                loaded.tail_programs.len()
            }
        };
        let map = &mut loaded.maps[m];
        map.host_set(&slot.to_le_bytes(), &(n as u32).to_le_bytes())
            .map_err(err)?;
    }
    Ok(loaded)
}

/// Loads one program and the maps; the initial program array entries (map, index, function)
/// are returned to be filled.
type ProgSlots = Vec<(usize, u32, String)>;

fn load_one(ld: &Loader<'_>, data: &[u8], select: Option<&str>) -> Result<(Loaded, ProgSlots), LoadError> {
    let file = parse(data)?;
    let progs = programs(&file)?;
    let chosen = choose(&progs, select, ld.prog_type_xdp)?.clone();
    let btf_data = section_data(&file, ".BTF")?;
    let btf = btf_data.map(Btf::parse).transpose().map_err(err)?;
    let mut table = collect_maps(&file, btf.as_ref(), ld)?;
    initial_entries(&file, &mut table)?;
    let (mut program, mut pending, text_base) = link(&file, &table, &chosen)?;
    if let Some(btf) = btf.as_ref() {
        core_relocate(&file, btf, ld, &chosen, text_base, &mut program, &mut pending)?;
    }
    pending.sort_by_key(|p| p.0);
    if !pending.is_empty() {
        let reach = crate::validate::walk(&program, &[], false)?;
        if let Some((at, e)) = pending.iter().find(|(at, _)| reach.get(*at) == Some(&true)) {
            let (f, o) = program.locate(*at);
            return Err(err(format!("{} ({}+{o}): {e}", chosen.name, f.unwrap_or("?"))));
        }
    }
    let slots: Vec<usize> = pending.iter().map(|p| p.0).collect();
    crate::validate::walk(&program, &slots, true)?;
    if ld.kernel_checks {
        // libbpf gives `xdp/devmap` (and `xdp.frags/devmap`) programs the devmap attach type.
        let devmap = chosen.section.ends_with("/devmap");
        crate::verify::check(&program, &table.maps, devmap)?;
    }
    let loaded = Loaded {
        program,
        maps: table.maps,
        programs: progs,
        tail_programs: Vec::new(),
    };
    Ok((loaded, table.prog_slots))
}

fn section_data<'a>(file: &Elf<'a>, name: &str) -> Result<Option<&'a [u8]>, LoadError> {
    match file.section_by_name(name) {
        Some(s) => s
            .data()
            .map(Some)
            .map_err(|e| err(format!("section {name}: {e}"))),
        None => Ok(None),
    }
}

/// Resolves the CO-RE relocations of the chosen program's section and `.text` (at `text_base`)
/// against the kernel's BTF ([`Loader::kernel_btf`]) or the engine's ([`crate::co_re::BUILTIN`]);
/// one that cannot be resolved is pending: an error only if the program reaches it.
fn core_relocate(
    file: &Elf<'_>,
    btf: &Btf<'_>,
    ld: &Loader<'_>,
    chosen: &ProgramInfo,
    text_base: Option<usize>,
    program: &mut Program,
    pending: &mut Pending,
) -> Result<(), LoadError> {
    let Some(ext) = section_data(file, ".BTF.ext")? else {
        return Ok(());
    };
    let relos = crate::co_re::relocations(ext, btf).map_err(err)?;
    let base_of = |sec: &str| match sec {
        ".text" => text_base,
        s if s == chosen.section => Some(0),
        _ => None,
    };
    let mine: Vec<_> = relos
        .iter()
        .filter_map(|r| Some((base_of(r.section)?, r)))
        .collect();
    if mine.is_empty() {
        return Ok(());
    }
    let target_bytes = match ld.kernel_btf {
        Some(b) => b,
        None => builtin_btf()?,
    };
    let target = Btf::parse(target_bytes).map_err(|e| err(format!("the kernel's BTF: {e}")))?;
    for (base, r) in mine {
        let at = base + r.insn_off as usize / INSN_SIZE;
        let res = crate::co_re::resolve(btf, &target, r).and_then(|v| match v {
            Some(v) => crate::co_re::patch(program.code_mut(), at, v),
            None => Err("the kernel's types have no such field, type or enum value".into()),
        });
        if let Err(e) = res {
            pending.push((at, err(format!("CO-RE relocation at instruction {at}: {e}"))));
        }
    }
    Ok(())
}

/// Fills the initial entries maps of maps declare (`.values = { &inner, ... }`, relocations of
/// `.maps` against map symbols) and notes those of program arrays (against functions), as
/// libbpf does after creating the maps. A map whose entries cannot be filled is refused for the
/// programs that use it.
fn initial_entries(file: &Elf<'_>, t: &mut MapTable) -> Result<(), LoadError> {
    let Some(sec) = file.section_by_name(".maps").filter(|_| !t.inits.is_empty()) else {
        return Ok(());
    };
    for (off, _, si) in relocations_of(file, sec.index(), ".maps")? {
        let found = t
            .inits
            .iter()
            .copied()
            .find(|&(_, _, base, n)| off >= base && off - base < 8 * u64::from(n));
        let Some((m, (dsec, doff), base, _)) = found else {
            continue;
        };
        let slot = ((off - base) / 8) as u32;
        let sym = file
            .symbol_by_index(si)
            .map_err(|e| err(format!("section .maps: relocation symbol: {e}")))?;
        let target = symbol_label(file, &sym);
        if t.maps[m].def().map_type == MapType::ProgArray {
            t.prog_slots.push((m, slot, target));
            continue;
        }
        let name = t.maps[m].def().name.clone();
        let inner = match sym.section() {
            SymbolSection::Section(s) if !t.refused.contains_key(&(s.0, sym.address())) => {
                t.defs.get(&(s.0, sym.address())).copied()
            }
            _ => None,
        };
        let r = match inner {
            Some(i) => crate::maps::set_inner(&mut t.maps, m, &slot.to_le_bytes(), i),
            None => Err(format!("{target} is no map the engine made")),
        };
        if let Err(e) = r {
            let why = err(format!("map {name}: initial entry {slot}: {e}"));
            t.refuse(dsec, doff, why);
        }
    }
    Ok(())
}

/// The `.BTF` section of the engine's built-in description of the UAPI types.
fn builtin_btf() -> Result<&'static [u8], LoadError> {
    let file = parse(crate::co_re::BUILTIN)?;
    section_data(&file, ".BTF")?.ok_or_else(|| err("the built-in types have no .BTF"))
}

fn u32_at(b: &[u8], off: u64) -> Option<u32> {
    let o = usize::try_from(off).ok()?;
    let s = b.get(o..o.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn collect_maps(file: &Elf<'_>, btf: Option<&Btf<'_>>, ld: &Loader<'_>) -> Result<MapTable, LoadError> {
    let opts = &ld.opts;
    let unset = ld.max_entries_when_unset();
    let sources = map_sources(file, btf, opts)?;
    let count = sources
        .iter()
        .map(MapSource::count)
        .fold(0usize, usize::saturating_add);
    if count > mem::MAX_MAPS {
        return Err(err(format!(
            "the object has {count} maps; at most {} are supported",
            mem::MAX_MAPS
        )));
    }
    let mut t = MapTable::default();
    for source in sources {
        match source {
            MapSource::Btf { sec, vars, syms } => {
                let btf = btf.ok_or_else(no_btf)?;
                for (var, ty) in vars {
                    let off = *syms
                        .get(var)
                        .ok_or_else(|| err(format!("map {var}: no symbol in .maps")))?;
                    match btf_map_def(btf, var, ty, unset) {
                        Ok((def, values)) => {
                            let entries = def.max_entries;
                            t.add(def, Place::Def(sec, off), None, opts)?;
                            if let Some(inner) = values {
                                t.values(sec, off, entries, inner, btf, unset);
                            }
                        }
                        Err(e) => t.refuse(sec, off, e),
                    }
                }
            }
            MapSource::Legacy { sec, data, syms } => {
                for (var, off) in syms {
                    match legacy_map_def(data, var, off, unset) {
                        Ok(def) => t.add(def, Place::Def(sec, off), None, opts)?,
                        Err(e) => t.refuse(sec, off, e),
                    }
                }
            }
            MapSource::Data {
                sec,
                name,
                read_only,
                size,
                init,
            } => {
                let def = MapDef {
                    name: name.to_owned(),
                    map_type: MapType::Array,
                    key_size: 4,
                    value_size: size,
                    max_entries: 1,
                    flags: 0,
                    read_only,
                };
                t.add(def, Place::Data(sec), init, opts)?;
            }
        }
    }
    Ok(t)
}

fn no_btf() -> LoadError {
    err("the object has a .maps section but no .BTF to describe it")
}

/// The sources of the object's maps, in the order of its sections: one pass over the sections,
/// then one over the symbols for the two sections of definitions. A second `.maps` or `maps`
/// section is refused (clang emits one of each at most; the BTF names only one `.maps`).
fn map_sources<'a>(
    file: &Elf<'a>,
    btf: Option<&Btf<'a>>,
    opts: &LoadOptions,
) -> Result<Vec<MapSource<'a>>, LoadError> {
    let mut out = Vec::new();
    let (mut btf_seen, mut legacy_seen) = (false, false);
    let once = |seen: &mut bool, name: &str| match core::mem::replace(seen, true) {
        true => Err(err(format!("the object has more than one section named {name}"))),
        false => Ok(()),
    };
    for sec in file.sections() {
        let name = sec.name().map_err(|e| err(format!("section name: {e}")))?;
        let idx = sec.index();
        let source = match name {
            ".maps" => {
                once(&mut btf_seen, name)?;
                let btf = btf.ok_or_else(no_btf)?;
                MapSource::Btf {
                    sec: idx,
                    vars: btf.datasec_vars(".maps").map_err(err)?,
                    syms: BTreeMap::new(),
                }
            }
            "maps" => {
                once(&mut legacy_seen, name)?;
                MapSource::Legacy {
                    sec: idx,
                    data: sec.data().map_err(|e| err(format!("section maps: {e}")))?,
                    syms: Vec::new(),
                }
            }
            _ => match is_data_section(name) {
                Some(read_only) => match data_source(&sec, name, read_only, opts)? {
                    Some(source) => source,
                    None => continue,
                },
                None => continue,
            },
        };
        out.push(source);
    }
    definition_symbols(file, &mut out)?;
    Ok(out)
}

/// The map of global-data section `sec` (`None` when it is empty).
fn data_source<'a>(
    sec: &impl ObjectSection<'a>,
    name: &'a str,
    read_only: bool,
    opts: &LoadOptions,
) -> Result<Option<MapSource<'a>>, LoadError> {
    let size = u32::try_from(sec.size())
        .ok()
        .filter(|&s| s as usize <= opts.max_map_bytes)
        .ok_or_else(|| {
            LoadError::map_memory(
                format!(
                    "section {name} is larger than the maps may take ({} bytes, LoadOptions::max_map_bytes)",
                    opts.max_map_bytes
                ),
                opts.max_map_bytes,
            )
        })?;
    if size == 0 {
        return Ok(None);
    }
    // `.bss` has no bytes in the file: its map starts zeroed, as every new map does.
    let init = if sec.kind() == SectionKind::UninitializedData {
        None
    } else {
        Some(sec.data().map_err(|e| err(format!("section {name}: {e}")))?)
    };
    Ok(Some(MapSource::Data {
        sec: sec.index(),
        name,
        read_only,
        size,
        init,
    }))
}

/// Gives the `.maps` and `maps` sources their symbols, in one pass over the symbol table.
fn definition_symbols<'a>(file: &Elf<'a>, sources: &mut [MapSource<'a>]) -> Result<(), LoadError> {
    // At most two entries: (section, index of its source).
    let wanted: Vec<(usize, usize)> = sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            MapSource::Btf { sec, .. } | MapSource::Legacy { sec, .. } => Some((sec.0, i)),
            MapSource::Data { .. } => None,
        })
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    for s in file.symbols() {
        let SymbolSection::Section(si) = s.section() else {
            continue;
        };
        let (Some(&(_, i)), Ok(name)) = (wanted.iter().find(|w| w.0 == si.0), s.name()) else {
            continue;
        };
        match &mut sources[i] {
            // The first symbol of a name is the one the definition's address is read from.
            MapSource::Btf { syms, .. } => {
                syms.entry(name).or_insert(s.address());
            }
            MapSource::Legacy { syms, .. } if s.kind() != SymbolKind::Section => {
                syms.push((name, s.address()));
            }
            _ => {}
        }
    }
    for source in sources {
        if let MapSource::Legacy { data, syms, .. } = source {
            syms.sort_by_key(|s| s.1);
            let n = syms.len() as u64;
            if n == 0 || data.len() as u64 / n < LEGACY_DEF_LEN {
                return Err(err("section maps: definitions shorter than struct bpf_map_def"));
            }
        }
    }
    Ok(())
}

/// A BTF map definition, and its `__array(values, T)` member if it has one: (`T`, the member's
/// byte offset).
fn btf_map_def(
    btf: &Btf<'_>,
    var: &str,
    ty: u32,
    unset: u32,
) -> Result<(MapDef, Option<(u32, u32)>), LoadError> {
    let f = btf.map_fields(ty).map_err(|e| err(format!("map {var}: {e}")))?;
    let raw = f.map_type.ok_or_else(|| err(format!("map {var}: no type")))?;
    let map_type = MapType::from_raw(raw).ok_or_else(|| err(unsupported_map(var, raw)))?;
    let (key_size, value_size) = match (f.key_size, f.value_size) {
        (Some(k), Some(v)) => (k, v),
        // Devmaps and xskmaps may leave sizes out: 4-byte keys and values.
        (None, None) if map_type.is_host_filled() => (4, 4),
        // A ring buffer has neither.
        (None, None) if map_type == MapType::RingBuf => (0, 0),
        // Maps of maps and program arrays declared with `__array(values, ...)`: the value is
        // the inner map's or program's number (a file descriptor in the kernel).
        (Some(k), None) if f.values.is_some() => (k, 4),
        _ => return Err(err(format!("map {var}: key and value sizes are missing"))),
    };
    let def = MapDef {
        name: var.to_owned(),
        map_type,
        key_size,
        value_size,
        // Declared without one: the loader sizes it (Loader::unsized_max_entries).
        max_entries: f.max_entries.filter(|&n| n > 0).unwrap_or(unset),
        flags: f.flags.unwrap_or(0),
        read_only: false,
    };
    Ok((def, f.values))
}

fn unsupported_map(name: &str, raw: u32) -> String {
    format!(
        "map {name}: map type {raw} is not supported (supported: hash, array, percpu_hash, percpu_array, lru_hash, lru_percpu_hash, lpm_trie, ringbuf, prog_array, array_of_maps, hash_of_maps, perf_event_array, devmap, devmap_hash, cpumap, xskmap)"
    )
}

fn legacy_map_def(data: &[u8], name: &str, off: u64, unset: u32) -> Result<MapDef, LoadError> {
    let field = |i: u64| {
        u32_at(data, off + 4 * i).ok_or_else(|| err(format!("map {name}: definition out of bounds")))
    };
    let raw = field(0)?;
    Ok(MapDef {
        name: name.to_owned(),
        map_type: MapType::from_raw(raw).ok_or_else(|| err(unsupported_map(name, raw)))?,
        key_size: field(1)?,
        value_size: field(2)?,
        max_entries: Some(field(3)?).filter(|&n| n > 0).unwrap_or(unset),
        flags: field(4)?,
        read_only: false,
    })
}

/// One code section placed in a program image.
struct Part<'a> {
    index: SectionIndex,
    base: usize,
    insns: Vec<Insn>,
    sec: object::read::elf::ElfSection64<'a, 'a, LittleEndian>,
}

fn code_part<'a>(file: &'a Elf<'a>, index: SectionIndex, base: usize) -> Result<Part<'a>, LoadError> {
    let sec = file
        .section_by_index(index)
        .map_err(|e| err(format!("section {}: {e}", index.0)))?;
    let name = sec.name().unwrap_or("?");
    let data = sec.data().map_err(|e| err(format!("section {name}: {e}")))?;
    if data.len() % INSN_SIZE != 0 {
        return Err(err(format!(
            "section {name}: size {} is not a whole number of instructions",
            data.len()
        )));
    }
    Ok(Part {
        index,
        base,
        insns: Insn::decode_all(data),
        sec,
    })
}

/// Relocations that failed, by instruction slot: an error only if the program can reach them.
type Pending = Vec<(usize, LoadError)>;

fn link<'a>(
    file: &'a Elf<'a>,
    table: &MapTable,
    chosen: &ProgramInfo,
) -> Result<(Program, Pending, Option<usize>), LoadError> {
    let mut pending = Vec::new();
    let sec = file
        .section_by_name(&chosen.section)
        .ok_or_else(|| err(format!("section {} vanished", chosen.section)))?;
    let mut parts = vec![code_part(file, sec.index(), 0)?];
    if let Some(text) = file.section_by_name(".text").filter(|t| t.size() > 0) {
        let base = parts[0].insns.len();
        parts.push(code_part(file, text.index(), base)?);
    }
    let mut code: Vec<Insn> = parts.iter().flat_map(|p| p.insns.iter().copied()).collect();
    let spans: Vec<(SectionIndex, usize, usize)> =
        parts.iter().map(|p| (p.index, p.base, p.insns.len())).collect();
    for part in &parts {
        let sname = part.sec.name().unwrap_or("?");
        let mut relocs = relocations_of(file, part.index, sname)?;
        // One relocation per instruction: a second one means a damaged offset, which would leave
        // the instruction it belonged to unresolved (an lddw of 0 that faults on every run).
        relocs.sort_unstable_by_key(|r| r.0);
        if let Some(w) = relocs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(err(format!(
                "section {sname}: two relocations at byte {}: the relocation section is damaged",
                w[0].0
            )));
        }
        for (off, r_type, si) in relocs {
            let i = usize::try_from(off / INSN_SIZE as u64).unwrap_or(usize::MAX);
            if off % INSN_SIZE as u64 != 0 || i >= part.insns.len() {
                return Err(err(format!(
                    "section {sname}: relocation at byte {off} is not on an instruction"
                )));
            }
            if si.0 == 0 {
                return Err(err(format!("section {sname}: relocation without a symbol")));
            }
            let sym = file
                .symbol_by_index(si)
                .map_err(|e| err(format!("section {sname}: relocation symbol: {e}")))?;
            let at = part.base + i;
            let name = symbol_label(file, &sym);
            let ctx = Reloc {
                r_type,
                at,
                sym_name: &name,
                sym_sec: sym.section(),
                sym_off: sym.address(),
                where_: sname,
            };
            if let Err(e) = apply(&mut code, &ctx, table, &spans) {
                pending.push((at, e));
            }
        }
    }
    let mut funcs: Vec<(usize, String)> = Vec::new();
    for s in file.symbols().filter(|s| s.kind() == SymbolKind::Text) {
        if let Some(&(_, base, _)) = spans
            .iter()
            .find(|sp| s.section() == SymbolSection::Section(sp.0))
        {
            let at = usize::try_from(s.address() / INSN_SIZE as u64).unwrap_or(usize::MAX);
            funcs.push((base.saturating_add(at), s.name().unwrap_or("?").to_owned()));
        }
    }
    funcs.sort();
    let entry = usize::try_from(chosen.offset / INSN_SIZE as u64).unwrap_or(usize::MAX);
    let text_base = parts.get(1).map(|p| p.base);
    Ok((
        Program::new(chosen.clone(), code, entry, funcs),
        pending,
        text_base,
    ))
}

/// Every relocation (byte offset, type, symbol) of code section `target`, read from the
/// relocation sections that name it. Unlike the `object` crate's iterator, which skips a
/// relocation section it cannot read, a damaged one is an error: its size not a whole number of
/// entries, its data outside the file, or its symbols in another table.
fn relocations_of(
    file: &Elf<'_>,
    target: SectionIndex,
    sname: &str,
) -> Result<Vec<(u64, u32, SymbolIndex)>, LoadError> {
    use object::elf::{Rel64, Rela64, SHT_REL, SHT_RELA};
    use object::read::elf::SectionHeader as _;
    let e = LittleEndian;
    let table = file.elf_section_table();
    let symtab = file.elf_symbol_table().section();
    let mut out = Vec::new();
    for (idx, h) in table.enumerate() {
        let kind = h.sh_type(e);
        if (kind != SHT_REL && kind != SHT_RELA) || h.sh_info(e) as usize != target.0 {
            continue;
        }
        let rname = table
            .section_name(e, h)
            .ok()
            .and_then(|n| core::str::from_utf8(n).ok())
            .unwrap_or("?");
        let bad = |why: &str| {
            err(format!(
                "section {sname}: relocation section {rname} (section {}) {why}",
                idx.0
            ))
        };
        if h.sh_link(e) as usize != symtab.0 {
            return Err(bad("refers to another symbol table"));
        }
        let read = |what: &str| bad(&format!("cannot be read ({what}): its offset or size is damaged"));
        if kind == SHT_REL {
            let rels: &[Rel64<LittleEndian>] = h
                .data_as_array(e, file.data())
                .map_err(|x| read(&x.to_string()))?;
            out.extend(
                rels.iter()
                    .map(|r| (r.r_offset.get(e), r.r_type(e), SymbolIndex(r.r_sym(e) as usize))),
            );
        } else {
            let rels: &[Rela64<LittleEndian>] = h
                .data_as_array(e, file.data())
                .map_err(|x| read(&x.to_string()))?;
            // An addend on a BPF relocation is not part of what clang emits; refuse it.
            if rels.iter().any(|r| r.r_addend.get(e) != 0) {
                return Err(bad("has addends, which BPF relocations do not use"));
            }
            out.extend(rels.iter().map(|r| {
                (
                    r.r_offset.get(e),
                    r.r_type(e, false),
                    SymbolIndex(r.r_sym(e, false) as usize),
                )
            }));
        }
    }
    Ok(out)
}

/// A symbol's name for messages; a symbol without one (a section symbol, as clang emits for a
/// reference to a function such as a `bpf_loop` callback) is named by its section and offset.
fn symbol_label(file: &Elf<'_>, sym: &object::read::elf::ElfSymbol64<'_, '_, LittleEndian>) -> String {
    match sym.name() {
        Ok(n) if !n.is_empty() => n.to_owned(),
        _ => {
            let sec = match sym.section() {
                SymbolSection::Section(i) => file
                    .section_by_index(i)
                    .ok()
                    .and_then(|s| s.name().ok().map(str::to_owned))
                    .unwrap_or_else(|| format!("{}", i.0)),
                _ => "?".to_owned(),
            };
            format!("(unnamed symbol: byte {} of section {sec})", sym.address())
        }
    }
}

/// One relocation, resolved to the image.
struct Reloc<'s> {
    r_type: u32,
    at: usize,
    sym_name: &'s str,
    sym_sec: SymbolSection,
    sym_off: u64,
    where_: &'s str,
}

fn apply(
    code: &mut [Insn],
    r: &Reloc<'_>,
    table: &MapTable,
    spans: &[(SectionIndex, usize, usize)],
) -> Result<(), LoadError> {
    let ins = code[r.at];
    let here = format!("section {}, instruction {}", r.where_, r.at);
    match (r.r_type, ins.op) {
        (R_BPF_64_64, insn::LDDW) if code_span(r, spans).is_some() => {
            // The address of a function (a bpf_loop callback): its slot, pc-relative.
            let (base, len) = code_span(r, spans).unwrap_or((0, 0));
            let byte = r.sym_off.wrapping_add(i64::from(ins.imm) as u64);
            let target = byte / INSN_SIZE as u64;
            if !byte.is_multiple_of(INSN_SIZE as u64) || target >= len as u64 {
                return Err(err(format!("{here}: function reference outside its section")));
            }
            let rel = (base as i64 + target as i64) - (r.at as i64 + 1);
            code[r.at].imm = i32::try_from(rel).map_err(|_| err(format!("{here}: function too far")))?;
            code[r.at].src = insn::pseudo::FUNC;
            Ok(())
        }
        (R_BPF_64_64, insn::LDDW) => {
            let value = map_reference(r, ins, table).map_err(|e| err(format!("{here}: {e}")))?;
            let next = code
                .get_mut(r.at + 1)
                .ok_or_else(|| err(format!("{here}: lddw without its second half")))?;
            next.imm = (value >> 32) as i32;
            let first = &mut code[r.at];
            first.imm = value as u32 as i32;
            first.src = 0;
            Ok(())
        }
        (R_BPF_64_32, insn::CALL) => {
            if r.sym_sec == SymbolSection::Undefined {
                let id = insn::kfunc::by_name(r.sym_name).ok_or_else(|| {
                    err(format!(
                        "{here}: call to kernel function {} is not supported (supported kfuncs: bpf_xdp_metadata_rx_hash)",
                        r.sym_name
                    ))
                })?;
                code[r.at].src = insn::pseudo::KFUNC_CALL;
                code[r.at].imm = id;
                return Ok(());
            }
            let SymbolSection::Section(si) = r.sym_sec else {
                return Err(err(format!(
                    "{here}: call to symbol {} outside any section",
                    r.sym_name
                )));
            };
            let &(_, base, len) = spans.iter().find(|s| s.0 == si).ok_or_else(|| {
                err(format!(
                    "{here}: call to {} in a section that is not this program's or .text",
                    r.sym_name
                ))
            })?;
            let target = (r.sym_off / INSN_SIZE as u64) as i64 + i64::from(ins.imm) + 1;
            if target < 0 || target as usize >= len {
                return Err(err(format!("{here}: call target outside its section")));
            }
            let rel = (base as i64 + target) - (r.at as i64 + 1);
            code[r.at].imm = i32::try_from(rel).map_err(|_| err(format!("{here}: call too far")))?;
            code[r.at].src = insn::pseudo::CALL;
            Ok(())
        }
        _ => Err(err(format!(
            "{here}: relocation type {} on opcode {:#04x} (symbol {}) is not supported",
            r.r_type, ins.op, r.sym_name
        ))),
    }
}

/// The (base, length) in the image of the code section symbol `r` lies in, if it is one.
fn code_span(r: &Reloc<'_>, spans: &[(SectionIndex, usize, usize)]) -> Option<(usize, usize)> {
    let SymbolSection::Section(si) = r.sym_sec else {
        return None;
    };
    spans.iter().find(|s| s.0 == si).map(|s| (s.1, s.2))
}

/// The 64-bit value an `lddw` of symbol `r` loads: a map handle or a global-data address.
fn map_reference(r: &Reloc<'_>, ins: Insn, table: &MapTable) -> Result<u64, String> {
    let SymbolSection::Section(si) = r.sym_sec else {
        return Err(format!(
            "{} is an extern variable (__kconfig, __ksym); the engine has no kernel to resolve it",
            r.sym_name
        ));
    };
    if let Some(&m) = table.data.get(&si.0) {
        let off = r.sym_off.wrapping_add(i64::from(ins.imm) as u64);
        let size = u64::from(table.maps[m].def().value_size);
        if off > size {
            return Err(format!(
                "{} + {} lies outside its data section",
                r.sym_name, ins.imm
            ));
        }
        return Ok(mem::map_value_addr(m, off as u32));
    }
    if let Some(why) = table.refused.get(&(si.0, r.sym_off)) {
        return Err(why.clone());
    }
    let m = table
        .defs
        .get(&(si.0, r.sym_off))
        .copied()
        .ok_or_else(|| {
            format!(
                "{} is neither a map nor global data (function pointers such as bpf_loop callbacks are not supported)",
                r.sym_name
            )
        })?;
    Ok(mem::map_handle(m))
}
