//! Map types beyond the hash and array kinds, on a clang-built object (`bpf/tests/c/more_maps.c`):
//! ring buffers and LPM tries as the programs use them.

mod common;

use common::{engine, ipv4, run};

#[test]
fn ring_buffer_records_reach_the_host_in_order_and_discards_do_not() {
    let mut e = engine("more_maps.o", Some("xdp/ringbuf"));
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    for _ in 0..3 {
        assert_eq!(run(&mut e, &f).verdict, 2, "{:?}", e.host().lines);
    }
    let recs = &e.host().records;
    assert_eq!(recs.len(), 6);
    let mut head = 60u32.to_le_bytes().to_vec();
    head.extend_from_slice(&f[..12]);
    for pair in recs.chunks(2) {
        assert_eq!(pair[0], ("events".to_string(), 0, head.clone()));
        assert_eq!(pair[1], ("events".to_string(), 0, 60u32.to_le_bytes().to_vec()));
    }
    assert_eq!(e.stats().faults, 0);
    assert!(e
        .maps()
        .iter()
        .all(|m| m.def().name != "events" || m.entries().is_empty()));
}

#[test]
fn ring_buffer_definitions_are_checked_as_the_kernel_checks_them() {
    use onic_bpf::{Map, MapDef, MapType};
    let def = |k, v, n| MapDef {
        name: "rb".into(),
        map_type: MapType::RingBuf,
        key_size: k,
        value_size: v,
        max_entries: n,
        flags: 0,
        read_only: false,
    };
    assert!(Map::new(def(0, 0, 4096), 1).is_ok());
    assert!(Map::new(def(0, 0, 6000), 1).unwrap_err().contains("power of two"));
    assert!(Map::new(def(0, 0, 2048), 1).is_err());
    assert!(Map::new(def(4, 4, 4096), 1)
        .unwrap_err()
        .contains("key and value size 0"));
}

#[test]
fn lpm_trie_updated_by_the_program_matches_the_longest_prefix() {
    let mut e = engine("more_maps.o", Some("xdp/lpm"));
    let to = |d| ipv4([192, 168, 0, 1], d, 17, 1, 2, 60);
    assert_eq!(run(&mut e, &to([10, 1, 7, 7])).verdict, 2);
    assert_eq!(run(&mut e, &to([10, 2, 7, 7])).verdict, 1);
    assert_eq!(run(&mut e, &to([11, 1, 7, 7])).verdict, 3);
    let routes = e.maps().iter().find(|m| m.def().name == "routes").unwrap();
    assert_eq!(routes.len(), 2);
    assert_eq!(e.stats().faults, 0);
}

#[test]
fn maps_of_maps_give_their_inner_maps_to_the_helpers() {
    let mut e = engine("more_maps.o", Some("xdp/mim"));
    let idx = |e: &onic_bpf::XdpEngine<onic_bpf::SimHost>, n: &str| {
        e.maps().iter().position(|m| m.def().name == n).unwrap()
    };
    let value = |e: &onic_bpf::XdpEngine<onic_bpf::SimHost>, n: &str| {
        let m = &e.maps()[idx(e, n)];
        u32::from_le_bytes(m.host_get(&0u32.to_le_bytes()).unwrap()[0].try_into().unwrap())
    };
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    // `outer` was filled from its declaration; `outer_hash` is empty.
    assert_eq!(run(&mut e, &f).verdict, 1, "{:?}", e.host().lines);
    assert_eq!(run(&mut e, &f).verdict, 1);
    assert_eq!((value(&e, "inner_a"), value(&e, "inner_b")), (2, 60));
    let (outer_hash, inner_a, events) = (idx(&e, "outer_hash"), idx(&e, "inner_a"), idx(&e, "events"));
    let k7 = 7u32.to_le_bytes();
    // An inner map must be what the outer map declares.
    let no = onic_bpf::maps::set_inner(e.maps_mut(), outer_hash, &k7, events).unwrap_err();
    assert!(no.contains("EINVAL"), "{no}");
    onic_bpf::maps::set_inner(e.maps_mut(), outer_hash, &k7, inner_a).unwrap();
    // inner_a holds 2 before this run's increment, 3 after: 3 + 2.
    assert_eq!(run(&mut e, &f).verdict, 5);
    // Programs cannot change what a map of maps holds.
    assert_eq!(e.maps_mut()[outer_hash].update(&k7, &[0; 4], 0, 0), -95);
    assert_eq!(e.stats().faults, 0);
}

/// `hops` of the object's `.bss`.
fn hops(e: &onic_bpf::XdpEngine<onic_bpf::SimHost>) -> u32 {
    let bss = e.maps().iter().find(|m| m.def().name == ".bss").unwrap();
    let v = bss.host_get(&0u32.to_le_bytes()).unwrap()[0];
    u32::from_le_bytes(v[..4].try_into().unwrap())
}

#[test]
fn tail_calls_stop_after_the_kernels_limit_and_go_on_after_a_miss() {
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    let mut e = engine("more_maps.o", Some("xdp/tail_count"));
    assert_eq!(run(&mut e, &f).verdict, 1, "{:?}", e.host().lines);
    assert_eq!(hops(&e), 1 + onic_bpf::vm::MAX_TAIL_CALLS);
    // The count is per run.
    assert_eq!(run(&mut e, &f).verdict, 1);
    assert_eq!(hops(&e), 2 * (1 + onic_bpf::vm::MAX_TAIL_CALLS));
    let mut e = engine("more_maps.o", Some("xdp/tail"));
    assert_eq!(run(&mut e, &f).verdict, 2);
    assert_eq!(hops(&e), 100);
    assert_eq!(e.stats().faults, 0);
}

#[test]
fn a_host_fills_a_program_array_with_programs_it_adds() {
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    let mut e = engine("more_maps.o", Some("xdp/tail"));
    let jumps = e.maps().iter().position(|m| m.def().name == "jumps").unwrap();
    // Entry 2 emptied by pointing it at no program: the entry goes on to XDP_ABORTED.
    e.maps_mut()[jumps]
        .host_set(&2u32.to_le_bytes(), &99u32.to_le_bytes())
        .unwrap();
    assert_eq!(run(&mut e, &f).verdict, 0);
    let opts = onic_bpf::LoadOptions::default();
    let other = onic_bpf::load(&common::object("more_maps.o"), Some("tail_pass"), &opts).unwrap();
    let n = e.add_program(other.program);
    e.maps_mut()[jumps]
        .host_set(&1u32.to_le_bytes(), &n.to_le_bytes())
        .unwrap();
    e.map_mut(".bss")
        .unwrap()
        .host_set(&0u32.to_le_bytes(), &[0; 4])
        .unwrap();
    assert_eq!(run(&mut e, &f).verdict, 2);
    assert_eq!(hops(&e), 0, "tail_entry stopped at its first tail call");
}

#[test]
fn a_bundles_setup_fills_tail_call_tables_and_inner_maps_or_says_what_it_refuses() {
    use onic_bpf::bundle::{set_up, Setup};
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    let obj = common::object("more_maps.o");
    let loader = onic_bpf::Loader::new(onic_bpf::LoadOptions::default());
    let engine_of = |setup: &[Setup], func: &str| {
        let mut l = loader.load(&obj, Some(func)).unwrap();
        set_up(&loader, &obj, &mut l, setup)
            .map(|()| onic_bpf::XdpEngine::new(l, onic_bpf::SimHost::new(4, 1), 1_000_000))
    };
    let tail = |map: &str, key: u32| Setup::TailCall {
        map: map.into(),
        key,
        func: "tail_pass".into(),
    };
    // Entry 1 of `jumps` (empty in the declaration) now holds tail_pass: the first call leaves.
    let mut e = engine_of(&[tail("jumps", 1), tail("jumps", 3)], "tail_entry").unwrap();
    assert_eq!(run(&mut e, &f).verdict, 2, "{:?}", e.host().lines);
    assert_eq!(hops(&e), 0);
    // Without it the entry runs on to `hops = 100`.
    let mut e = engine_of(&[], "tail_entry").unwrap();
    assert_eq!(run(&mut e, &f).verdict, 2);
    assert_eq!(hops(&e), 100);
    // An inner array under key 7 of `outer_hash`: mim_prog passes instead of dropping.
    let inner = |max_entries| Setup::InnerArray {
        map: "outer_hash".into(),
        key: 7,
        value_size: 4,
        max_entries,
    };
    let mut e = engine_of(&[], "mim_prog").unwrap();
    assert_eq!(run(&mut e, &f).verdict, 1);
    let mut e = engine_of(&[inner(1)], "mim_prog").unwrap();
    assert_eq!(run(&mut e, &f).verdict, 2, "{:?}", e.host().lines);
    assert!(e.maps().iter().any(|m| m.def().name == "outer_hash.inner"));
    // What the maps refuse is an error, not a silent miss.
    let refused = |s: Setup, func: &str| engine_of(&[s], func).err().unwrap();
    assert!(refused(inner(2), "mim_prog").contains("EINVAL"));
    assert!(refused(tail("jumps", 9), "tail_entry").contains("entry 9"));
    assert!(refused(tail("nope", 0), "tail_entry").contains("no map nope"));
    assert!(refused(tail("outer", 0), "tail_entry").contains("array_of_maps"));
    let missing = Setup::TailCall {
        map: "jumps".into(),
        key: 1,
        func: "no_such_function".into(),
    };
    assert!(refused(missing, "tail_entry").contains("no_such_function"));
}
