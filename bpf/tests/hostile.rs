//! Hostile input never panics and never reaches memory it was not given: arbitrary instruction
//! streams (biased toward valid opcodes so that many pass validation and run) over arbitrary
//! frames, and arbitrary damage to real objects.

mod common;

use onic_bpf::insn::Insn;
use onic_bpf::{mem, LoadOptions, Map, MapDef, MapType, Program, SimHost, XdpEngine};
use onic_core::xdp::{XdpBuff, XdpRxq};
use proptest::prelude::*;

/// Opcodes clang emits, plus a few it does not.
const OPS: &[u8] = &[
    0x07, 0x0f, 0x17, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x47, 0x4f, 0x57, 0x5f, 0x67, 0x6f, 0x77, 0x7f, 0x87,
    0x97, 0x9f, 0xa7, 0xaf, 0xb7, 0xbf, 0xc7, 0xcf, 0xd7, 0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3c,
    0x44, 0x4c, 0x54, 0x5c, 0x64, 0x6c, 0x74, 0x7c, 0x84, 0x94, 0x9c, 0xa4, 0xac, 0xb4, 0xbc, 0xc4, 0xcc,
    0xd4, 0xdc, 0x05, 0x15, 0x1d, 0x25, 0x2d, 0x35, 0x3d, 0x45, 0x4d, 0x55, 0x5d, 0x65, 0x6d, 0x75, 0x7d,
    0xa5, 0xad, 0xb5, 0xbd, 0xc5, 0xcd, 0xd5, 0xdd, 0x16, 0x1e, 0x56, 0x5e, 0xa6, 0xae, 0x85, 0x95, 0x18,
    0x61, 0x69, 0x71, 0x79, 0x81, 0x89, 0x91, 0x62, 0x6a, 0x72, 0x7a, 0x63, 0x6b, 0x73, 0x7b, 0xc3, 0xdb,
    0x00, 0x20, 0x30, 0xff, 0xe5,
];

fn insn() -> impl Strategy<Value = Insn> {
    (
        prop::sample::select(OPS),
        prop_oneof![8 => 0u8..10, 1 => 0u8..16],
        prop_oneof![8 => 0u8..11, 1 => 0u8..16],
        prop_oneof![6 => Just(0i16), 3 => -8i16..8, 1 => any::<i16>()],
        prop_oneof![
            -16i32..16,
            prop::sample::select(vec![
                1, 2, 3, 5, 6, 7, 8, 23, 28, 44, 51, 54, 65, 0xe1, 0xf1, 0x41
            ]),
            any::<i32>()
        ],
    )
        .prop_map(|(op, dst, src, off, imm)| Insn {
            op,
            dst,
            src,
            off,
            imm,
        })
}

/// Map handles and pointers the stream can load with lddw.
fn special() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(mem::map_handle(0)),
        Just(mem::map_handle(1)),
        Just(mem::map_handle(7)),
        (0u32..64).prop_map(|o| mem::map_value_addr(0, o)),
        (0u32..4096).prop_map(|o| mem::addr(mem::PACKET, o)),
        (0u32..4200).prop_map(|o| mem::addr(mem::STACK, o)),
        any::<u64>(),
    ]
}

fn maps() -> Vec<Map> {
    let def = |name: &str, t, k, v, n| MapDef {
        name: name.into(),
        map_type: t,
        key_size: k,
        value_size: v,
        max_entries: n,
        flags: 0,
        read_only: false,
    };
    vec![
        Map::new(def("a", MapType::Array, 4, 16, 4), 2).unwrap(),
        Map::new(def("h", MapType::LruHash, 8, 8, 4), 2).unwrap(),
    ]
}

fn program(mut code: Vec<Insn>, specials: &[u64]) -> Program {
    // Give every lddw a second half holding one of the special values.
    let mut k = 0;
    let mut i = 0;
    while i < code.len() {
        if code[i].op == 0x18 && i + 1 < code.len() {
            let v = specials[k % specials.len()];
            k += 1;
            code[i].src = 0;
            code[i].imm = v as u32 as i32;
            code[i + 1] = Insn {
                imm: (v >> 32) as i32,
                ..Insn::default()
            };
            i += 1;
        }
        i += 1;
    }
    code.push(Insn {
        op: 0x95,
        ..Insn::default()
    });
    Program::from_insns("fuzz", code)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6000, ..ProptestConfig::default() })]

    #[test]
    fn instruction_streams_never_escape(
        code in prop::collection::vec(insn(), 1..24),
        specials in prop::collection::vec(special(), 1..4),
        frame in prop::collection::vec(any::<u8>(), 0..200),
        q in 0u16..8,
    ) {
        let p = program(code, &specials);
        if onic_bpf::validate::validate(&p).is_err() {
            return Ok(());
        }
        // The static check of what the kernel refuses takes any validated stream without
        // panicking, whichever way it decides (the run below does not depend on it).
        let _ = onic_bpf::verify::check(&p, &maps(), q % 2 == 0);
        let mut e = XdpEngine::with_program(p, maps(), SimHost::new(2, 3), 2000);
        let mut page = vec![0x5au8; 4096];
        page[256..256 + frame.len()].copy_from_slice(&frame);
        let rxq = XdpRxq { queue_index: q, port: 0 };
        for _ in 0..2 {
            let mut b = XdpBuff::new(&mut page, 256, frame.len(), rxq).unwrap();
            e.run(&mut b);
        }
        // Nothing outside the buffer's layout was written: the reserved start and the tailroom
        // the OS keeps are as they were.
        prop_assert!(page[..40].iter().all(|&b| b == 0x5a));
        prop_assert!(page[4096 - 320..].iter().all(|&b| b == 0x5a));
        let s = e.stats();
        prop_assert_eq!(s.runs, 2);
        prop_assert!(s.insns <= 2 * 2000);
    }

    #[test]
    fn damaged_objects_are_refused_or_run(
        which in 0usize..5,
        hits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let name = ["xdp_features.o", "xdp_count.o", "xdp_hash.o", "xdp_redirect_map.o", "legacy.o"][which];
        let mut obj = common::object(name);
        for (i, v) in &hits {
            let at = i.index(obj.len());
            obj[at] = *v;
        }
        if truncate {
            obj.truncate(cut.index(obj.len()));
        }
        let opts = LoadOptions { budget: 5000, ..LoadOptions::default() };
        let _ = onic_bpf::list_programs(&obj);
        if let Ok(l) = onic_bpf::load(&obj, None, &opts) {
            let mut e = XdpEngine::new(l, SimHost::new(opts.cpus, 1), opts.budget);
            let f = common::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 53, 120);
            common::run(&mut e, &f);
        }
    }
}
