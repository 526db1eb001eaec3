//! Instruction-level behaviour on hand-assembled programs: what clang 14 cannot emit (the v4
//! additions), and the machine's rules that objects only touch in passing (stack zeroed between
//! runs, the read-only context, 32-bit atomics, call depth, map handles that are no map).

use onic_bpf::insn::{self, Insn};
use onic_bpf::{mem, Map, MapDef, MapType, Program, SimHost, XdpEngine};
use onic_core::xdp::{XdpBuff, XdpRxq};

fn i(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn::new(op, dst, src, off, imm)
}

const EXIT: Insn = Insn::EXIT;

/// `r{d} = v` for any 64-bit `v` (lddw).
fn lddw(d: u8, v: u64) -> [Insn; 2] {
    [
        i(insn::LDDW, d, 0, 0, v as u32 as i32),
        i(0, 0, 0, 0, (v >> 32) as i32),
    ]
}

fn engine(code: Vec<Insn>, maps: Vec<Map>) -> XdpEngine<SimHost> {
    let p = Program::from_insns("raw", code);
    onic_bpf::validate::validate(&p).unwrap();
    XdpEngine::with_program(p, maps, SimHost::new(2, 1), 10_000)
}

/// Runs on a 64-byte frame of bytes 0..64; returns r0 (the verdict) and the engine.
fn run(e: &mut XdpEngine<SimHost>) -> u32 {
    let mut page = vec![0u8; 4096];
    for (k, b) in page[256..320].iter_mut().enumerate() {
        *b = k as u8 | 0x80;
    }
    let mut b = XdpBuff::new(&mut page, 256, 64, XdpRxq::default()).unwrap();
    e.run(&mut b)
}

#[test]
fn v4_sign_extension_division_swaps_and_long_jumps() {
    let code = vec![
        // r2 = data; r3 = *(s8 *)(r2 + 1) = (i8)0x81 = -127
        i(0x61, 2, 1, 0, 0),
        i(0x91, 3, 2, 1, 0),
        // r4 = (s16) r3 (movsx) = -127; r4 s/= 2 (sdiv) = -63
        i(0xbf, 4, 3, 16, 0),
        i(0x37, 4, 0, 1, 2),
        // r5 = bswap16(0x1234) = 0x3412
        i(0xb7, 5, 0, 0, 0x1234),
        i(0xd7, 5, 0, 0, 16),
        // gotol +1 (skip the next instruction)
        i(0x06, 0, 0, 0, 1),
        i(0xb7, 4, 0, 0, 0),
        // r0 = (r4 == -63 && r5 == 0x3412) ? 2 : 1  (32-bit compare for r5)
        i(0xb7, 0, 0, 0, 1),
        i(0x55, 4, 0, 2, -63),
        i(0x56, 5, 0, 1, 0x3412),
        i(0xb7, 0, 0, 0, 2),
        EXIT,
    ];
    let mut e = engine(code, vec![]);
    assert_eq!(run(&mut e), 2);
    assert_eq!(e.stats().faults, 0);
}

#[test]
fn the_stack_starts_at_zero_in_every_run() {
    // r0 = *(u64 *)(r10 - 8); *(u64 *)(r10 - 8) = 7; exit  -> 0 every time.
    let code = vec![i(0x79, 0, 10, -8, 0), i(0x7a, 10, 0, -8, 7), EXIT];
    let mut e = engine(code, vec![]);
    assert_eq!(run(&mut e), 0);
    assert_eq!(run(&mut e), 0);
}

#[test]
fn the_context_is_read_only_and_field_sized() {
    let write = vec![i(0x62, 1, 0, 16, 5), i(0xb7, 0, 0, 0, 2), EXIT];
    let mut e = engine(write, vec![]);
    assert_eq!(run(&mut e), 0);
    assert!(e.host().lines[0].contains("read-only"), "{:?}", e.host().lines);
    let wide = vec![i(0x79, 0, 1, 0, 0), EXIT];
    let mut e = engine(wide, vec![]);
    assert_eq!(run(&mut e), 0);
    assert!(
        e.host().lines[0].contains("outside the context"),
        "{:?}",
        e.host().lines
    );
}

#[test]
fn atomics_on_32_bit_words() {
    let code = vec![
        // *(u32 *)(r10 - 4) = 0xffffffff; r1 = 1; lock fetch-add -> r1 = old, mem = 0
        i(0x62, 10, 0, -4, -1),
        i(0xb7, 1, 0, 0, 1),
        i(0xc3, 10, 1, -4, insn::atomic::ADD | insn::atomic::FETCH),
        // r0 = 0 (expected); r2 = 9; cmpxchg32: mem == 0 -> mem = 9, r0 = old (0)
        i(0xb7, 0, 0, 0, 0),
        i(0xb7, 2, 0, 0, 9),
        i(0xc3, 10, 2, -4, insn::atomic::CMPXCHG),
        // r3 = mem (9); verdict = r1 (0xffffffff zero-extended) + r3 - 0xffffffff = 9 -> check
        i(0x61, 3, 10, -4, 0),
        i(0x0f, 1, 3, 0, 0),
        lddw(4, 0xffff_ffff)[0],
        lddw(4, 0xffff_ffff)[1],
        i(0x1f, 1, 4, 0, 0),
        i(0xbf, 0, 1, 0, 0),
        EXIT,
    ];
    let mut e = engine(code, vec![]);
    assert_eq!(run(&mut e), 9);
}

#[test]
fn calls_deeper_than_eight_frames_fault() {
    // f: call f (pc-relative -1 + 1 = itself) forever.
    let code = vec![
        i(insn::CALL, 0, insn::pseudo::CALL, 0, 1),
        EXIT,
        i(insn::CALL, 0, insn::pseudo::CALL, 0, -1),
        EXIT,
    ];
    let mut e = engine(code, vec![]);
    assert_eq!(run(&mut e), 0);
    assert!(e.host().lines[0].contains("nested calls"), "{:?}", e.host().lines);
}

#[test]
fn helpers_refuse_what_is_no_map_and_use_what_is() {
    let def = MapDef {
        name: "d".into(),
        map_type: MapType::DevMapHash,
        key_size: 4,
        value_size: 4,
        max_entries: 4,
        flags: 0,
        read_only: false,
    };
    let mut devs = Map::new(def, 1).unwrap();
    devs.host_set(&7u32.to_le_bytes(), &2u32.to_le_bytes()).unwrap();
    let redirect = |handle: u64| {
        let [a, b] = lddw(1, handle);
        vec![
            a,
            b,
            i(0xb7, 2, 0, 0, 7),
            i(0xb7, 3, 0, 0, 1),
            i(insn::CALL, 0, 0, 0, 51),
            EXIT,
        ]
    };
    let mut page = vec![0u8; 4096];
    let mut e = engine(redirect(mem::map_handle(0)), vec![devs]);
    e.host_mut().redirects.push((None, 2, 5));
    let mut b = XdpBuff::new(&mut page, 256, 64, XdpRxq::default()).unwrap();
    assert_eq!(e.run(&mut b), 4);
    assert_eq!(b.redirect_target(), Some(5));
    // A handle of a map that does not exist, or a plain number, faults in the helper.
    for bad in [mem::map_handle(3), 12345] {
        let mut e = engine(redirect(bad), vec![]);
        assert_eq!(run(&mut e), 0);
        assert!(e.host().lines[0].contains("is not a map"), "{:?}", e.host().lines);
    }
}

#[test]
fn lru_maps_evict_through_program_updates() {
    let def = MapDef {
        name: "l".into(),
        map_type: MapType::LruHash,
        key_size: 4,
        value_size: 8,
        max_entries: 2,
        flags: 0,
        read_only: false,
    };
    let mut m = Map::new(def, 1).unwrap();
    for k in 0u32..3 {
        assert_eq!(m.update(&k.to_le_bytes(), &[1; 8], 0, 0), 0);
    }
    assert_eq!(m.len(), 2);
    assert!(m.host_get(&0u32.to_le_bytes()).is_none());
}

/// The ring buffer and tail call helpers given what they cannot use: a fault or the kernel's
/// refusal, never a panic; a record left reserved at the end of a run is discarded.
#[test]
fn ring_and_tail_call_helpers_refuse_bad_arguments() {
    let def = |map_type, k, v, n| MapDef {
        name: "m".into(),
        map_type,
        key_size: k,
        value_size: v,
        max_entries: n,
        flags: 0,
        read_only: false,
    };
    let ring = || Map::new(def(MapType::RingBuf, 0, 0, 4096), 1).unwrap();
    let hash = || Map::new(def(MapType::Hash, 4, 4, 4), 1).unwrap();
    let call = |id: i32, r2: u64, r3: u64| {
        let [a, b] = lddw(1, mem::map_handle(0));
        let [c, d] = lddw(2, r2);
        vec![
            a,
            b,
            c,
            d,
            i(0xb7, 3, 0, 0, r3 as i32),
            i(insn::CALL, 0, 0, 0, id),
            EXIT,
        ]
    };
    // bpf_ringbuf_reserve of more than the ring, or with flags: NULL.
    for (size, flags) in [(1u64 << 40, 0u64), (8, 1)] {
        let [a, b] = lddw(1, mem::map_handle(0));
        let [c, d] = lddw(2, size);
        let code = vec![
            a,
            b,
            c,
            d,
            i(0xb7, 3, 0, 0, flags as i32),
            i(insn::CALL, 0, 0, 0, 131),
            EXIT,
        ];
        let mut e = engine(code, vec![ring()]);
        assert_eq!(run(&mut e), 0);
        assert_eq!(e.stats().faults, 0);
    }
    // bpf_ringbuf_submit of what no reservation gave: a fault.
    let code = vec![
        i(0xbf, 1, 10, 0, 0),
        i(0x07, 1, 0, 0, -8),
        i(insn::CALL, 0, 0, 0, 132),
        EXIT,
    ];
    let mut e = engine(code, vec![ring()]);
    run(&mut e);
    assert!(
        e.host().lines[0].contains("no record a ring buffer reserved"),
        "{:?}",
        e.host().lines
    );
    // A reservation the run leaves: discarded, the ring empty again for the next run.
    let mut e = engine(call(131, 100, 0), vec![ring()]);
    for _ in 0..100 {
        run(&mut e);
    }
    assert_eq!(e.stats().faults, 0);
    assert!(e.host().records.is_empty());
    // bpf_ringbuf_output into a map that is no ring buffer, bpf_tail_call through one that is
    // no program array: faults.
    for (id, words) in [(130, "no ring buffer"), (12, "no program array")] {
        let code = if id == 12 {
            let [a, b] = lddw(2, mem::map_handle(0));
            vec![
                a,
                b,
                i(0xb7, 3, 0, 0, 0),
                i(insn::CALL, 0, 0, 0, 12),
                i(0xb7, 0, 0, 0, 2),
                EXIT,
            ]
        } else {
            call(id, mem::addr(mem::STACK, 4088), 8)
        };
        let mut e = engine(code, vec![hash()]);
        assert_eq!(run(&mut e), 0);
        assert!(e.host().lines[0].contains(words), "{:?}", e.host().lines);
    }
}
