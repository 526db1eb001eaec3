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
