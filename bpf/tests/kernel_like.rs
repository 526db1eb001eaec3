//! What programs written for the kernel use beyond the basics (bpf/tests/c/kernel_like.c and
//! refused_map.c): maps sized by the loader, maps only some programs use, cpumap and broadcast
//! redirects, the byte-access helpers, bpf_check_mtu, bpf_loop, spin locks.

mod common;

use common::{engine, ipv4, object, run, run_on};
use onic_bpf::{LoadOptions, Loader};

const PASS: u32 = 2;
const DROP: u32 = 1;
const TX: u32 = 3;
const REDIRECT: u32 = 4;

fn frame() -> Vec<u8> {
    ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1000, 53, 128)
}

#[test]
fn a_map_without_max_entries_is_sized_by_the_loader() {
    let bytes = object("kernel_like.o");
    let l = onic_bpf::load(&bytes, Some("count_unsized"), &LoadOptions::default()).unwrap();
    let rx = l.maps.iter().find(|m| m.def().name == "rx_cnt").unwrap();
    // Default: the model's CPU count.
    assert_eq!(rx.def().max_entries, LoadOptions::default().cpus);
    let l = Loader::new(LoadOptions::default())
        .unsized_max_entries(256)
        .load(&bytes, Some("count_unsized"))
        .unwrap();
    let rx = l.maps.iter().find(|m| m.def().name == "rx_cnt").unwrap();
    assert_eq!(rx.def().max_entries, 256);
    // Declared sizes are kept.
    let cpu = l.maps.iter().find(|m| m.def().name == "cpu_map").unwrap();
    assert_eq!(cpu.def().max_entries, 4);
}

#[test]
fn an_unsupported_map_refuses_only_the_programs_that_use_it() {
    let bytes = object("refused_map.o");
    let opts = LoadOptions::default();
    let e = onic_bpf::load(&bytes, Some("with_queue"), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("with_queue (with_queue+") && e.contains("map events: map type 22 is not supported"),
        "{e}"
    );
    let l = onic_bpf::load(&bytes, Some("without_queue"), &opts).unwrap();
    assert!(l.maps.iter().all(|m| m.def().name != "events"));
}

#[test]
fn a_cpumap_redirect_goes_to_the_host_target_of_that_cpu() {
    let mut e = engine("kernel_like.o", Some("to_cpu"));
    // No entry: the fallback verdict in the flags.
    assert_eq!(run(&mut e, &frame()).verdict, DROP);
    let val = [64u8, 0, 0, 0, 0, 0, 0, 0];
    e.map_mut("cpu_map")
        .unwrap()
        .host_set(&2u32.to_le_bytes(), &val)
        .unwrap();
    // Queue 1 asks for CPU 2; a host without cpumap targets lets the redirect fail.
    let o = run_on(&mut e, &frame(), 1, 0);
    assert_eq!((o.verdict, o.target), (REDIRECT, Some(u32::MAX)));
    e.host_mut().cpu_target_base = Some(100);
    let o = run_on(&mut e, &frame(), 1, 0);
    assert_eq!((o.verdict, o.target), (REDIRECT, Some(102)));
    // A program cannot write a cpumap.
    assert!(e.maps_mut().iter().any(|m| m.def().name == "cpu_map"));
}

#[test]
fn a_broadcast_lists_every_entry_but_the_ingress_interface() {
    let mut e = engine("kernel_like.o", Some("to_all"));
    // Empty devmap: still XDP_REDIRECT, to no interface, as in the kernel.
    let o = run(&mut e, &frame());
    assert_eq!((o.verdict, o.target), (REDIRECT, Some(u32::MAX)));
    assert!(e.host().last_broadcast.is_empty());
    let m = e.map_mut("ports").unwrap();
    for (k, ifindex) in [(7u32, 1u32), (3, 2), (9, 3)] {
        m.host_set(&k.to_le_bytes(), &ifindex.to_le_bytes()).unwrap();
    }
    e.host_mut().broadcast_target = Some(50);
    // Port 0 is interface 1: excluded.
    let o = run(&mut e, &frame());
    assert_eq!((o.verdict, o.target), (REDIRECT, Some(50)));
    let mut got = e.host().last_broadcast.clone();
    got.sort_unstable();
    assert_eq!(got, [2, 3]);
    let o = run_on(&mut e, &frame(), 0, 1);
    assert_eq!(o.verdict, REDIRECT);
    let mut got = e.host().last_broadcast.clone();
    got.sort_unstable();
    assert_eq!(got, [1, 3]);
    assert_eq!(e.stats().faults, 0);
}

#[test]
fn load_and_store_bytes_and_the_buffer_length() {
    let mut e = engine("kernel_like.o", Some("bytes"));
    let f = frame();
    let o = run(&mut e, &f);
    assert_eq!(o.verdict, TX);
    assert_eq!(o.frame[..6], f[6..12]);
    assert_eq!(o.frame[6..12], f[..6]);
    assert_eq!(o.frame[12..], f[12..]);
    let small = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    assert_eq!(run(&mut e, &small).verdict, PASS);
}

#[test]
fn check_mtu_reports_the_interface_mtu() {
    let mut e = engine("kernel_like.o", Some("mtu"));
    assert_eq!(run(&mut e, &frame()).verdict, PASS);
    e.host_mut().mtu = 100;
    // 128 bytes do not fit 100 + 14.
    assert_eq!(run(&mut e, &frame()).verdict, DROP);
}

#[test]
fn bpf_loop_calls_its_callback_until_it_asks_to_stop() {
    let mut e = engine("kernel_like.o", Some("loop"));
    assert_eq!(run(&mut e, &frame()).verdict, PASS);
    assert_eq!(e.stats().faults, 0);
}

#[test]
fn spin_locks_are_free_in_a_single_run() {
    let mut e = engine("kernel_like.o", Some("locked_count"));
    for _ in 0..3 {
        assert_eq!(run(&mut e, &frame()).verdict, PASS);
    }
    let v = e.maps().iter().find(|m| m.def().name == "counter").unwrap();
    let val = v.host_get(&0u32.to_le_bytes()).unwrap()[0].to_vec();
    assert_eq!(u64::from_le_bytes(val[8..16].try_into().unwrap()), 3);
}

#[test]
fn core_relocations_move_a_field_to_where_the_kernel_has_it() {
    // Built-in types: ethhdr's h_proto is at byte 12, not 0 as in the program's own view.
    let mut e = engine("kernel_like.o", Some("core_proto"));
    assert_eq!(run(&mut e, &frame()).verdict, PASS);
    let mut arp = frame();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(run(&mut e, &arp).verdict, DROP);
    // Against a kernel BTF without the type: refused, naming the relocation.
    let bytes = object("kernel_like.o");
    let none = object("refused_map.o");
    let btf = section(&none, ".BTF");
    let err = Loader::new(LoadOptions::default())
        .kernel_btf(&btf)
        .load(&bytes, Some("core_proto"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("CO-RE relocation at instruction"), "{err}");
    // Other programs of the object do not care.
    Loader::new(LoadOptions::default())
        .kernel_btf(&btf)
        .load(&bytes, Some("loop"))
        .unwrap();
}

/// The bytes of section `name` of an ELF object (64-bit little-endian).
fn section(elf: &[u8], name: &str) -> Vec<u8> {
    let u = |o: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&elf[o..o + n]);
        u64::from_le_bytes(b) as usize
    };
    let (shoff, shnum, shstr) = (u(0x28, 8), u(0x3c, 2), u(0x3e, 2));
    let strtab = u(shoff + shstr * 64 + 0x18, 8);
    for i in 0..shnum {
        let h = shoff + i * 64;
        let n = strtab + u(h, 4);
        let end = elf[n..].iter().position(|&c| c == 0).unwrap();
        if &elf[n..n + end] == name.as_bytes() {
            let (off, size) = (u(h + 0x18, 8), u(h + 0x20, 8));
            return elf[off..off + size].to_vec();
        }
    }
    panic!("no section {name}");
}

#[test]
fn perf_event_records_go_to_the_host_once_it_opened_the_entry() {
    let mut e = engine("kernel_like.o", Some("sample"));
    // Nobody reads the events: -ENOENT, as in the kernel.
    assert_eq!(run(&mut e, &frame()).verdict, DROP);
    // CPU 1 (queue 1) opened.
    e.map_mut("events")
        .unwrap()
        .host_set(&1u32.to_le_bytes(), &7u32.to_le_bytes())
        .unwrap();
    assert_eq!(run_on(&mut e, &frame(), 1, 0).verdict, PASS);
    let (map, index, rec) = e.host().records.last().cloned().unwrap();
    assert_eq!((map.as_str(), index), ("events", 1));
    assert_eq!(rec[..4], 1u32.to_le_bytes());
    assert_eq!(rec[4..], frame()[..14]);
}

#[test]
fn fib_lookup_answers_from_the_routes_the_caller_gives() {
    let mut e = engine("kernel_like.o", Some("fib"));
    // No routes: NOT_FWDED, as the kernel says for no route.
    assert_eq!(run(&mut e, &frame()).verdict, DROP);
    e.host_mut()
        .routes
        .push(([10, 0, 0, 0], 8, 2, [2; 6], Some([4; 6])));
    let o = run(&mut e, &frame());
    // Interface 2 is redirect target 0 in the tests' host.
    assert_eq!((o.verdict, o.target), (REDIRECT, Some(0)));
}
