//! The engine on the repository's XDP objects (`bpf/objects/`, built from `os-linux/xdp/` and
//! `bpf/tests/c/`): verdicts, rewritten frames, redirect targets, maps, helpers, faults and the
//! load-time refusals.

mod common;

use common::{arp, engine, ipv4, object, run, run_on};
use onic_bpf::{LoadOptions, MapType, SimHost, XdpEngine};
use onic_core::rss::ShellHasher;
use onic_core::xdp::XdpRxHash;

const ABORTED: u32 = 0;
const DROP: u32 = 1;
const PASS: u32 = 2;
const TX: u32 = 3;
const REDIRECT: u32 = 4;

#[test]
fn drop_and_pass() {
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    assert_eq!(run(&mut engine("xdp_drop.o", None), &f).verdict, DROP);
    let mut p = engine("xdp_pass.o", None);
    let out = run(&mut p, &f);
    assert_eq!((out.verdict, out.frame), (PASS, f));
    assert_eq!(p.stats().runs, 1);
    assert_eq!(p.stats().verdicts[2], 1);
}

#[test]
fn swap_sends_back_with_macs_exchanged() {
    let mut e = engine("xdp_swap.o", None);
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1, 2, 64);
    let out = run(&mut e, &f);
    assert_eq!(out.verdict, TX);
    assert_eq!(out.frame[..6], f[6..12]);
    assert_eq!(out.frame[6..12], f[..6]);
    assert_eq!(out.frame[12..], f[12..]);
    assert_eq!(run(&mut e, &f[..13]).verdict, DROP);
}

/// An ICMP echo request with a correct checksum.
fn echo_request() -> Vec<u8> {
    let mut f = ipv4([192, 0, 2, 1], [192, 0, 2, 2], 1, 0, 0, 98);
    f[34..42].copy_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 1]);
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let sum = checksum(&f[34..]);
    f[36..38].copy_from_slice(&sum.to_be_bytes());
    f
}

fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn echo_responder_answers_pings_only() {
    let mut e = engine("xdp_tx.o", None);
    let req = echo_request();
    let out = run(&mut e, &req);
    assert_eq!(out.verdict, TX);
    assert_eq!(out.frame[..6], req[6..12]);
    assert_eq!(out.frame[26..30], req[30..34]);
    assert_eq!(out.frame[30..34], req[26..30]);
    assert_eq!(out.frame[34], 0);
    assert_eq!(
        checksum(&out.frame[34..]),
        0,
        "the reply's ICMP checksum verifies"
    );
    assert_eq!(run(&mut e, &arp()).verdict, PASS);
}

#[test]
fn arp_bounce_redirects_once_then_drops() {
    let mut e = engine("xdp_redirect.o", None);
    let out = run(&mut e, &arp());
    assert_eq!(out.verdict, REDIRECT);
    // Port 0 is interface 1; the program redirects to interface 2, target 0 of the host.
    assert_eq!(out.target, Some(0));
    assert_eq!(out.frame[14], 0xee);
    assert_eq!(run(&mut e, &out.frame).verdict, DROP);
    // From port 1 (interface 2) to interface 3, which the host does not know.
    let out = run_on(&mut e, &arp(), 0, 1);
    assert_eq!((out.verdict, out.target), (REDIRECT, Some(u32::MAX)));
    let udp = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, 1, 2, 60);
    assert_eq!(run(&mut e, &udp).verdict, PASS);
}

#[test]
fn rx_hash_kfunc_answers_from_the_shell_hash() {
    let mut e = engine("xdp_hash.o", None);
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1234, 5678, 60);
    assert_eq!(run(&mut e, &f).verdict, PASS);
    assert_eq!(run(&mut e, &f).verdict, PASS);
    let h = XdpRxHash::compute(&ShellHasher::default(), &f);
    let m = e.map_mut("onic_hash").unwrap();
    let get = |k: u32| u64::from_le_bytes(m.host_get(&k.to_le_bytes()).unwrap()[0].try_into().unwrap());
    assert_eq!(
        (get(0), get(1), get(2), get(3)),
        (2, 0, u64::from(h.value), u64::from(h.xdp_type))
    );
    assert_ne!(h.value, 0);
}

#[test]
fn devmap_and_xskmap_redirects() {
    let mut e = engine("xdp_redirect_map.o", Some("xdp"));
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    // No entry: the flags' fallback verdict.
    assert_eq!(run(&mut e, &f).verdict, DROP);
    e.map_mut("tx_port")
        .unwrap()
        .host_set(&0u32.to_le_bytes(), &2u32.to_le_bytes())
        .unwrap();
    let out = run(&mut e, &f);
    assert_eq!((out.verdict, out.target), (REDIRECT, Some(0)));
    assert_eq!(e.maps().len(), 2);
    assert_eq!(e.maps()[0].def().map_type, MapType::DevMap);

    let mut x = engine("xdp_redirect_map.o", Some("xdp/xsk"));
    assert_eq!(x.program().name(), "xdp_to_xsk");
    assert_eq!(run_on(&mut x, &f, 3, 0).verdict, PASS);
    x.map_mut("xsks")
        .unwrap()
        .host_set(&3u32.to_le_bytes(), &1u32.to_le_bytes())
        .unwrap();
    let out = run_on(&mut x, &f, 3, 0);
    assert_eq!((out.verdict, out.target), (REDIRECT, Some(1)));
    assert_eq!(run_on(&mut x, &f, 2, 0).verdict, PASS);
    let tcp = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1, 2, 60);
    assert_eq!(run_on(&mut x, &tcp, 3, 0).verdict, PASS);
}

#[test]
fn drop_udp_drops_dns_only() {
    let mut e = engine("xdp_drop_udp.o", None);
    assert_eq!(run(&mut e, &ipv4([1; 4], [2; 4], 17, 4000, 53, 60)).verdict, DROP);
    assert_eq!(run(&mut e, &ipv4([1; 4], [2; 4], 17, 53, 54, 60)).verdict, PASS);
    assert_eq!(run(&mut e, &ipv4([1; 4], [2; 4], 6, 4000, 53, 60)).verdict, PASS);
    assert_eq!(run(&mut e, &arp()).verdict, PASS);
    // A 24-byte IPv4 header moves the ports.
    let mut f = ipv4([1; 4], [2; 4], 17, 0, 0, 64);
    f[14] = 0x46;
    f[40..42].copy_from_slice(&53u16.to_be_bytes());
    assert_eq!(run(&mut e, &f).verdict, DROP);
}

#[test]
fn flow_counter_keys_and_counts() {
    let mut e = engine("xdp_count.o", None);
    let a = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1000, 53, 60);
    let b = ipv4([10, 0, 0, 3], [10, 0, 0, 2], 6, 2000, 443, 100);
    for f in [&a, &a, &b] {
        assert_eq!(run(&mut e, f).verdict, PASS);
    }
    assert_eq!(run(&mut e, &arp()).verdict, PASS);
    let key = |s: [u8; 4], d: [u8; 4], p: u8, sp: u16, dp: u16| {
        let mut k = Vec::new();
        k.extend_from_slice(&s);
        k.extend_from_slice(&d);
        k.extend_from_slice(&[p, 0]);
        k.extend_from_slice(&sp.to_le_bytes());
        k.extend_from_slice(&dp.to_le_bytes());
        k.extend_from_slice(&[0, 0]);
        k
    };
    let m = e.map_mut("flows").unwrap();
    let counts = |k: &[u8]| {
        let v = m.host_get(k).unwrap()[0];
        (
            u64::from_le_bytes(v[..8].try_into().unwrap()),
            u64::from_le_bytes(v[8..].try_into().unwrap()),
        )
    };
    assert_eq!(counts(&key([10, 0, 0, 1], [10, 0, 0, 2], 17, 1000, 53)), (2, 120));
    assert_eq!(counts(&key([10, 0, 0, 3], [10, 0, 0, 2], 6, 2000, 443)), (1, 100));
    assert_eq!(counts(&[0; 16]), (1, 60));
    assert_eq!(m.len(), 3);
}

#[test]
fn features_calls_atomics_globals_and_helpers() {
    let mut e = engine("xdp_features.o", None);
    let short = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 100);
    let long = ipv4([10, 0, 0, 9], [10, 0, 0, 2], 17, 1, 2, 200);
    let o1 = run_on(&mut e, &short, 1, 0);
    assert_eq!((o1.verdict, o1.frame.len()), (PASS, 100));
    assert_eq!(o1.meta, 0x0ca7_cafeu32.to_le_bytes());
    let o2 = run_on(&mut e, &long, 2, 0);
    assert_eq!((o2.verdict, o2.frame.len()), (PASS, 196));
    assert_eq!(o2.frame[..], long[..196]);
    assert_eq!(run(&mut e, &arp()).verdict, DROP);
    assert_eq!(e.stats().faults, 0);
    let get = |e: &mut onic_bpf::XdpEngine<onic_bpf::SimHost>, m: &str, k: &[u8]| -> Vec<Vec<u8>> {
        e.map_mut(m)
            .unwrap()
            .host_get(k)
            .unwrap()
            .iter()
            .map(|v| v.to_vec())
            .collect()
    };
    let t = get(&mut e, "totals", &0u32.to_le_bytes()).remove(0);
    let word = |i: usize| u64::from_le_bytes(t[8 * i..8 * i + 8].try_into().unwrap());
    assert_eq!((word(0), word(1)), (3, 360), "frames, bytes");
    // or 1 | or 2 | ... then & 0xff, ^ 0x100 three times: 0x103.
    assert_eq!(word(2), 0x103);
    assert_eq!(word(3), 60, "xchg kept the last length");
    assert_eq!(word(5), 1, "cmpxchg succeeded once (bytes / 1e6 stayed 0)");
    // The last frame (ARP) had no IPv4 header to sum.
    assert_eq!(word(4), 0);
    let per_cpu = get(&mut e, "per_cpu", &0u32.to_le_bytes());
    let c: Vec<u64> = per_cpu
        .iter()
        .map(|v| u64::from_le_bytes(v[..].try_into().unwrap()))
        .collect();
    assert_eq!(c, [1, 1, 1, 0], "one frame on each of CPUs 0, 1, 2");
    assert_eq!(
        e.maps().iter().find(|m| m.def().name == "recent").unwrap().len(),
        2
    );
    let bss = get(&mut e, ".bss", &0u32.to_le_bytes()).remove(0);
    assert_eq!(bss[..8], 3u64.to_le_bytes());
    let data = get(&mut e, ".data", &0u32.to_le_bytes()).remove(0);
    assert_eq!(data[..4], 0x101u32.to_le_bytes());
    assert_eq!(e.host().lines, ["first frame: 100 bytes on cpu 1"]);
}

#[test]
fn csum_diff_matches_a_folded_checksum() {
    let mut e = engine("xdp_features.o", None);
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    run(&mut e, &f);
    let t = e
        .map_mut("totals")
        .unwrap()
        .host_get(&0u32.to_le_bytes())
        .unwrap()[0]
        .to_vec();
    let mut csum = u64::from_le_bytes(t[32..40].try_into().unwrap());
    while csum > 0xffff {
        csum = (csum & 0xffff) + (csum >> 16);
    }
    // The one's-complement sum of the header in machine order, folded, is the header checksum's
    // complement in the same order (the header's checksum field is 0 here).
    let mut sum: u32 = f[14..34]
        .chunks(2)
        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    assert_eq!(csum as u32, sum);
}

#[test]
fn faults_abort_count_and_log() {
    let cases = [
        ("xdp/null", "no pointer"),
        ("xdp/oob", "outside the packet"),
        ("xdp/under", "outside the packet"),
        ("xdp/loop", "instruction budget"),
        ("xdp/rodata", "read-only"),
        ("xdp/deep", "nested calls"),
    ];
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    for (sec, what) in cases {
        let mut e = common::engine_checked("faults.o", Some(sec), false);
        assert_eq!(run(&mut e, &f).verdict, ABORTED, "{sec}");
        assert_eq!(run(&mut e, &f).verdict, ABORTED, "{sec}");
        assert_eq!(e.stats().faults, 2, "{sec}");
        assert_eq!(e.stats().verdicts[0], 2, "{sec}");
        let line = &e.host().lines[0];
        assert!(
            line.contains(what) && line.contains("XDP_ABORTED"),
            "{sec}: {line}"
        );
    }
    let mut ok = engine("faults.o", Some("xdp"));
    assert_eq!(run(&mut ok, &f).verdict, PASS);
    // The packet reads without a bounds check are refused at load with the static check on.
    for (sec, words) in [
        ("xdp/oob", "R1 invalid mem access 'pkt_end'"),
        ("xdp/under", "R1 offset is outside of the packet"),
    ] {
        let e = onic_bpf::load(&object("faults.o"), Some(sec), &LoadOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{sec} loaded"))
            .to_string();
        assert!(e.contains(words), "{sec}: {e}");
    }
}

#[test]
fn refusals_say_what_and_where() {
    let opts = LoadOptions::default();
    let refused = object("refused.o");
    let msg = |o: &[u8], s: Option<&str>| onic_bpf::load(o, s, &opts).unwrap_err().to_string();
    let m = msg(&refused, Some("xdp/helper"));
    assert!(
        m.contains("helper 42 (bpf_get_numa_node_id) is not provided"),
        "{m}"
    );
    let m = msg(&refused, Some("xdp/kconfig"));
    assert!(m.contains("LINUX_KERNEL_VERSION is an extern variable"), "{m}");
    let m = msg(&refused, Some("xdp/core"));
    assert!(m.contains("CO-RE"), "{m}");
    let m = msg(&object("refused_map.o"), Some("with_queue"));
    assert!(m.contains("map events: map type 22 is not supported"), "{m}");
    let m = msg(&object("faults.o"), None);
    assert!(
        m.contains("7 programs match") && m.contains("null_deref (section xdp/null)"),
        "{m}"
    );
    let m = msg(&object("faults.o"), Some("nothing"));
    assert!(m.contains("no program or section 'nothing'"), "{m}");
    let m = msg(b"\x7fELF not really", None);
    assert!(m.contains("not a 64-bit little-endian ELF"), "{m}");
    let tiny = LoadOptions {
        max_map_bytes: 1000,
        ..opts
    };
    let e = onic_bpf::load(&object("xdp_count.o"), None, &tiny).unwrap_err();
    assert_eq!(e.kind(), onic_bpf::LoadErrorKind::MapMemory { limit: 1000 });
    assert!(e.message().contains("more than 1000 bytes"), "{e}");
    // A refusal of the program itself is not a memory limit.
    let e = onic_bpf::load(&object("faults.o"), Some("nothing"), &opts).unwrap_err();
    assert_eq!(e.kind(), onic_bpf::LoadErrorKind::Refused);
}

#[test]
fn legacy_maps_load_and_count() {
    let mut e = engine("legacy.o", None);
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 60);
    run_on(&mut e, &f, 5, 0);
    run_on(&mut e, &f, 5, 0);
    let m = e.map_mut("per_queue").unwrap();
    assert_eq!(m.def().max_entries, 64);
    assert_eq!(m.host_get(&5u32.to_le_bytes()).unwrap()[0], 2u64.to_le_bytes());
}

#[test]
fn programs_are_listed() {
    let p = onic_bpf::list_programs(&object("xdp_redirect_map.o")).unwrap();
    let names: Vec<(&str, &str)> = p.iter().map(|p| (p.name.as_str(), p.section.as_str())).collect();
    assert_eq!(names, [("xdp_redirect_map", "xdp"), ("xdp_to_xsk", "xdp/xsk")]);
}

#[test]
fn maps_dump_as_json() {
    let mut e = engine("xdp_count.o", None);
    run(&mut e, &arp());
    let j = onic_bpf::maps::to_json(e.maps());
    assert!(
        j.contains("\"name\": \"flows\", \"type\": \"hash\", \"key_size\": 16, \"value_size\": 16"),
        "{j}"
    );
    assert!(j.contains("{\"key\": \"00000000000000000000000000000000\", \"value\": \"01000000000000003c00000000000000\"}"), "{j}");
}

#[test]
fn objects_load_from_unaligned_buffers() {
    // An object embedded with include_bytes! or cut out of a larger file has no alignment.
    let obj = object("xdp_count.o");
    let mut shifted = vec![0u8; obj.len() + 1];
    shifted[1..].copy_from_slice(&obj);
    let l = onic_bpf::load(&shifted[1..], None, &LoadOptions::default()).unwrap();
    assert_eq!(l.program.name(), "xdp_count");
}

#[test]
fn huge_map_definitions_are_refused_before_allocating() {
    let def = |t, v, n| onic_bpf::MapDef {
        name: "big".into(),
        map_type: t,
        key_size: 4,
        value_size: v,
        max_entries: n,
        flags: 0,
        read_only: false,
    };
    for (t, v, n) in [
        (MapType::Array, u32::MAX, 2),
        (MapType::Hash, 1, u32::MAX),
        (MapType::PercpuArray, 1 << 20, 1 << 12),
    ] {
        assert!(onic_bpf::Map::new(def(t, v, n), 64).is_err(), "{t:?}");
    }
}

#[test]
fn map_dumps_stream_within_their_bound() {
    let mut e = engine("xdp_count.o", None);
    run(&mut e, &arp());
    // Written piece by piece: the same document, never longer than the bound known before a run.
    let mut pieces = 0usize;
    let mut text = String::new();
    struct Counting<'a>(&'a mut String, &'a mut usize);
    impl core::fmt::Write for Counting<'_> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            *self.1 += 1;
            self.0.push_str(s);
            Ok(())
        }
    }
    onic_bpf::maps::write_json(e.maps(), &mut Counting(&mut text, &mut pieces)).unwrap();
    assert_eq!(text, onic_bpf::maps::to_json(e.maps()));
    assert!(pieces > 10, "{pieces}");
    let bound = onic_bpf::maps::json_size_bound(e.maps());
    assert!(text.len() as u64 <= bound, "{} > {bound}", text.len());
    // Full maps: every entry at its widest still fits the bound.
    let mut full = engine("xdp_features.o", None);
    for m in full.maps_mut() {
        let d = m.def().clone();
        for k in 0..d.max_entries.min(64) {
            let mut key = vec![0xffu8; d.key_size as usize];
            if d.key_size == 4 && d.map_type == MapType::Array || d.map_type == MapType::PercpuArray {
                key = k.to_le_bytes().to_vec();
            } else if let Some(b) = key.first_mut() {
                *b = k as u8;
            }
            let _ = m.host_set(&key, &vec![0xff; d.value_size as usize]);
        }
    }
    let j = onic_bpf::maps::to_json(full.maps());
    assert!(j.len() as u64 <= onic_bpf::maps::json_size_bound(full.maps()));
}

/// The byte offset of the section header of `name` in a 64-bit little-endian ELF object.
fn section_header(obj: &[u8], name: &str) -> usize {
    let u16_at = |o: usize| u16::from_le_bytes([obj[o], obj[o + 1]]) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(obj[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let strtab = u64_at(shoff + shstrndx * shentsize + 0x18);
    (0..shnum)
        .map(|i| shoff + i * shentsize)
        .find(|&h| {
            let n = strtab + u32::from_le_bytes(obj[h..h + 4].try_into().unwrap()) as usize;
            obj[n..].starts_with(name.as_bytes()) && obj[n + name.len()] == 0
        })
        .unwrap_or_else(|| panic!("no section {name}"))
}

#[test]
fn damaged_relocations_are_refused_at_load() {
    let obj = object("xdp_count.o");
    let opts = LoadOptions::default();
    let rel = section_header(&obj, ".relxdp");
    let at = |o: usize| u64::from_le_bytes(obj[rel + o..rel + o + 8].try_into().unwrap()) as usize;
    let (offset, size) = (at(0x18), at(0x20));
    assert_eq!(size, 3 * 16, "xdp_count.o has three lddw relocations");
    let load = |o: &[u8]| {
        onic_bpf::load(o, None, &opts)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert_eq!(load(&obj), Ok(()));
    // The second relocation's offset made equal to the first: the second lddw would stay 0.
    let mut dup = obj.clone();
    let first = dup[offset..offset + 8].to_vec();
    dup[offset + 16..offset + 24].copy_from_slice(&first);
    let e = load(&dup).unwrap_err();
    assert!(e.contains("two relocations at byte 376"), "{e}");
    // The relocation section's size not a whole number of entries, or its data past the end of
    // the file: the section cannot be read, which must not read as "no relocations".
    for (field, value) in [(0x20, size as u64 - 1), (0x18, obj.len() as u64)] {
        let mut bad = obj.clone();
        bad[rel + field..rel + field + 8].copy_from_slice(&value.to_le_bytes());
        let e = load(&bad).unwrap_err();
        assert!(
            e.contains("relocation section .relxdp") && e.contains("cannot be read"),
            "{e}"
        );
    }
    // Its symbols in another table.
    let mut bad = obj.clone();
    bad[rel + 0x28..rel + 0x2c].copy_from_slice(&0u32.to_le_bytes());
    let e = load(&bad).unwrap_err();
    assert!(e.contains("refers to another symbol table"), "{e}");
}

#[test]
fn a_reference_to_code_is_a_function_address() {
    // The first lddw relocation of xdp_count.o made to point at the section symbol of `xdp`
    // (symbol 2, no name), as clang emits for a bpf_loop callback: the lddw loads the address of
    // the function there; handed to bpf_map_lookup_elem as a map, it faults, and says so.
    let mut obj = object("xdp_count.o");
    let rel = section_header(&obj, ".relxdp");
    let offset = u64::from_le_bytes(obj[rel + 0x18..rel + 0x20].try_into().unwrap()) as usize;
    obj[offset + 8..offset + 16].copy_from_slice(&((2u64 << 32) | 1).to_le_bytes());
    let loaded = onic_bpf::load(&obj, None, &LoadOptions::default()).unwrap();
    let mut e = XdpEngine::new(loaded, SimHost::new(1, 1), 10_000);
    let f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2, 64);
    assert_eq!(run(&mut e, &f).verdict, 0);
    let line = e.host().lines.last().cloned().unwrap_or_default();
    assert!(line.contains("the first argument is not a map"), "{line}");
}
