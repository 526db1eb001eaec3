//! Objects built here, larger or stranger than clang makes them: thousands of maps of every kind,
//! tens of thousands of programs. The loader must refuse what is over its limits before it does
//! any work per map, find each map of a large object by its symbol, and keep its messages short
//! however long the lists they come from (issue 33).

mod common;

use common::elf_build::{
    insn, BtfBuilder, ElfBuilder, CODE, DATA, EXIT, FUNC, OBJECT, PROGBITS, R_BPF_64_64,
};
use onic_bpf::{mem, LoadOptions};

/// `r0 = 2 (XDP_PASS); exit`.
fn pass_code() -> Vec<u8> {
    [insn(0xb7, 0, 0, 0, 2), EXIT].concat()
}

/// BTF for `count` array maps named `m0`, `m1`, ... in `.maps` (one 1-entry array of 4-byte
/// keys and values each, 32 bytes apart), with `members` as the definition struct's members
/// when given.
fn btf_maps(count: usize, members: Option<&[(&str, u32)]>) -> Vec<u8> {
    let mut b = BtfBuilder::default();
    let int = b.int();
    let map_type = b.uint(int, 2); // BPF_MAP_TYPE_ARRAY
    let one = b.uint(int, 1);
    let value = b.pointer(int);
    let def = match members {
        Some(m) => b.structure(m),
        None => b.structure(&[
            ("type", map_type),
            ("max_entries", one),
            ("key", value),
            ("value", value),
        ]),
    };
    let vars: Vec<(u32, u32, u32)> = (0..count)
        .map(|i| (b.var(&format!("m{i}"), def), 32 * i as u32, 32))
        .collect();
    b.datasec(".maps", &vars);
    b.build()
}

/// Adds a `.maps` section of `count` BTF-defined maps; with `symbols`, each map's symbol, added
/// in reverse order (so that no map's symbol is where its position would put it).
fn add_btf_maps(elf: &mut ElfBuilder, count: usize, symbols: bool) -> Vec<u32> {
    let sec = elf.section(".maps", PROGBITS, DATA, vec![0; 32 * count]);
    elf.section(".BTF", PROGBITS, 0, btf_maps(count, None));
    let mut syms = vec![0; count];
    if symbols {
        for i in (0..count).rev() {
            syms[i] = elf.symbol(&format!("m{i}"), OBJECT, sec, 32 * i as u64);
        }
    }
    syms
}

/// Adds a legacy `maps` section of `count` all-zero definitions (map type 0, which the engine
/// does not support) with a symbol each.
fn add_legacy_maps(elf: &mut ElfBuilder, count: usize) {
    let sec = elf.section("maps", PROGBITS, DATA, vec![0; 20 * count]);
    for i in 0..count {
        elf.symbol(&format!("legacy{i}"), OBJECT, sec, 20 * i as u64);
    }
}

fn load(obj: &[u8]) -> Result<onic_bpf::Loaded, String> {
    onic_bpf::load(obj, None, &LoadOptions::default()).map_err(|e| e.to_string())
}

fn object_with(maps: impl FnOnce(&mut ElfBuilder)) -> Vec<u8> {
    let mut elf = ElfBuilder::default();
    let code = elf.section("xdp", PROGBITS, CODE, pass_code());
    elf.symbol("prog", FUNC, code, 0);
    maps(&mut elf);
    elf.build()
}

/// Every kind of map is counted before any is read: each of these objects would fail later on
/// something else (a definition without its symbol, a map type the engine does not support,
/// more map memory than allowed), and each of those checks is work per map (a symbol search, a
/// definition read, an allocation) that a hostile object multiplies.
#[test]
fn map_limits_are_checked_before_any_map_is_read() {
    let limit = |n: usize| format!("the object has {n} maps; at most {} are supported", mem::MAX_MAPS);
    // 5000 BTF-defined maps without symbols (was: "map m0: no symbol in .maps").
    let e = load(&object_with(|elf| {
        add_btf_maps(elf, 5000, false);
    }))
    .unwrap_err();
    assert_eq!(e, limit(5000));
    // 5000 legacy definitions of map type 0 (was: "map legacy0: map type 0 is not supported").
    let e = load(&object_with(|elf| add_legacy_maps(elf, 5000))).unwrap_err();
    assert_eq!(e, limit(5000));
    // Below the limit in each kind, over it together; the global data alone takes more than
    // the maps may (was: "... more than 67108864 bytes").
    let e = load(&object_with(|elf| {
        for i in 0..2000 {
            elf.nobits(&format!(".bss.{i}"), 64 << 10);
        }
        add_legacy_maps(elf, 2000);
        add_btf_maps(elf, 1000, false);
    }))
    .unwrap_err();
    assert_eq!(e, limit(5000));
}

/// At the limit, every map of a large object is found by its symbol (not by its position), and
/// an lddw of it loads its handle.
#[test]
fn the_most_maps_an_object_may_have_are_each_found_by_their_symbol() {
    let count = mem::MAX_MAPS;
    let picked = [0, 1, 2047, count - 1];
    let mut elf = ElfBuilder::default();
    let mut code = Vec::new();
    for _ in picked {
        code.extend(insn(0x18, 1, 1, 0, 0));
        code.extend([0; 8]);
    }
    code.extend(pass_code());
    let xdp = elf.section("xdp", PROGBITS, CODE, code);
    elf.symbol("prog", FUNC, xdp, 0);
    let syms = add_btf_maps(&mut elf, count, true);
    let relocs: Vec<(u64, u32, u32)> = picked
        .iter()
        .enumerate()
        .map(|(k, &m)| (16 * k as u64, R_BPF_64_64, syms[m]))
        .collect();
    elf.relocations(xdp, &relocs);
    let l = load(&elf.build()).unwrap();
    assert_eq!(l.maps.len(), count);
    for (i, m) in l.maps.iter().enumerate() {
        assert_eq!(m.def().name, format!("m{i}"));
    }
    let code = l.program.code();
    for (k, &m) in picked.iter().enumerate() {
        let loaded = (code[2 * k].imm as u32 as u64) | ((code[2 * k + 1].imm as u32 as u64) << 32);
        assert_eq!(loaded, mem::map_handle(m), "lddw {k} of map m{m}");
    }
}

/// A definition whose struct repeats a member is refused (reading stops at the repeat: each map
/// would otherwise read every member of a struct that many maps may share, 60 000 members
/// here); the map is not made, and only a program that used it would be refused.
#[test]
fn a_map_definition_member_given_twice_is_refused() {
    let mut b = BtfBuilder::default();
    let int = b.int();
    let map_type = b.uint(int, 2);
    let one = b.uint(int, 1);
    let value = b.pointer(int);
    let mut members = vec![("type", map_type), ("key", value), ("value", value)];
    members.extend(std::iter::repeat_n(("max_entries", one), 60_000));
    let def = b.structure(&members);
    let var = b.var("m", def);
    b.datasec(".maps", &[(var, 0, 32)]);
    let mut elf = ElfBuilder::default();
    let code = elf.section("xdp", PROGBITS, CODE, pass_code());
    elf.symbol("prog", FUNC, code, 0);
    let maps = elf.section(".maps", PROGBITS, DATA, vec![0; 32]);
    elf.symbol("m", OBJECT, maps, 0);
    elf.section(".BTF", PROGBITS, 0, b.build());
    let bytes = elf.build();
    let l = onic_bpf::load(&bytes, None, &onic_bpf::LoadOptions::default()).unwrap();
    assert!(l.maps.is_empty());
}

/// A second section of definitions is refused: clang emits one `.maps` and one `maps` at most,
/// and the BTF of `.maps` describes one section.
#[test]
fn a_second_section_of_map_definitions_is_refused() {
    let e = load(&object_with(|elf| {
        add_legacy_maps(elf, 1);
        add_legacy_maps(elf, 1);
    }))
    .unwrap_err();
    assert_eq!(e, "the object has more than one section named maps");
    let e = load(&object_with(|elf| {
        add_btf_maps(elf, 1, true);
        add_btf_maps(elf, 1, true);
    }))
    .unwrap_err();
    assert_eq!(e, "the object has more than one section named .maps");
}

/// An object of `count` one-instruction programs named `prog_N` in section `section`, and one
/// more program there whose name is 100 000 characters long.
fn many_programs(section: &str, count: usize) -> Vec<u8> {
    let mut elf = ElfBuilder::default();
    let code: Vec<u8> = (0..=count).flat_map(|_| EXIT).collect();
    let sec = elf.section(section, PROGBITS, CODE, code);
    elf.symbol(&"long".repeat(25_000), FUNC, sec, 0);
    for i in 0..count {
        elf.symbol(&format!("prog_{i}"), FUNC, sec, 8 * (i as u64 + 1));
    }
    elf.build()
}

/// Every message built from the programs an object holds stays short: 20 000 programs once made
/// a 557 KB error line. The first few are named (names cut), the rest counted.
#[test]
fn messages_about_many_programs_stay_short() {
    let opts = LoadOptions::default();
    let msg = |obj: &[u8], sel: Option<&str>| onic_bpf::load(obj, sel, &opts).unwrap_err().to_string();
    let tc = many_programs("tc", 20_000);
    assert_eq!(onic_bpf::list_programs(&tc).unwrap().len(), 20_001);
    let xdp = many_programs("xdp", 20_000);
    let cut = format!("{}...", &"long".repeat(25_000)[..onic_bpf::msg::NAME_CHARS]);
    let listed = |sec: &str| {
        format!("{cut} (section {sec}), prog_0 (section {sec}), prog_1 (section {sec}) and 19998 more")
    };
    for (m, want) in [
        (
            msg(&tc, None),
            format!("the object holds no XDP program (programs: {})", listed("tc")),
        ),
        (
            msg(&tc, Some("nothing")),
            format!("no program or section 'nothing' (programs: {})", listed("tc")),
        ),
        (
            msg(&xdp, None),
            format!(
                "20001 programs match; choose one by function name with --sec: {}",
                listed("xdp")
            ),
        ),
    ] {
        assert!(m.len() < 300, "{} bytes: {m}", m.len());
        assert_eq!(m, want);
    }
}
