//! `onic run --xdp-obj`: the clang-built objects of `os-linux/xdp` (prebuilt in `bpf/objects/`)
//! against their built-in Rust twins on the shared capture `tests/data/xdp-shared.pcap`, frame
//! for frame: the same output captures byte for byte, the same XDP counters, and for the flow
//! counter the same per-flow counts in the object's map as in the built-in program's table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn shared() -> PathBuf {
    root().join("tests/data/xdp-shared.pcap")
}

fn out_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("run-obj")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs `onic run` with `args`; returns its standard output (fails the test on an error).
fn onic(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "onic {args:?} failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The XDP counter lines of a run's statistics (rx_xdp_*, per queue and summed).
fn xdp_counters(report: &str) -> Vec<String> {
    report
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("_xdp_") && !l.starts_with("rx_xdp_fault"))
        .map(str::to_string)
        .collect()
}

const CAPTURES: [&str; 4] = ["pass.pcap", "tx-port0.pcap", "tx-port1.pcap", "drop.pcap"];

/// Replays the shared capture through built-in `builtin` and object `obj` (with `extra` options)
/// and compares everything that came out.
fn same_as_builtin(builtin: &str, obj: &str, extra: &[&str]) -> (String, String) {
    let pcap = shared();
    let (b, o) = (
        out_dir(&format!("{builtin}-builtin")),
        out_dir(&format!("{builtin}-obj")),
    );
    let rb = onic(&[
        "run",
        "--pcap",
        pcap.to_str().unwrap(),
        "--xdp",
        builtin,
        "--out-dir",
        b.to_str().unwrap(),
    ]);
    let objp = root().join("bpf/objects").join(obj);
    let mut args = vec![
        "run",
        "--pcap",
        pcap.to_str().unwrap(),
        "--xdp-obj",
        objp.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out-dir", o.to_str().unwrap()]);
    let ro = onic(&args);
    for f in CAPTURES {
        let (x, y) = (
            std::fs::read(b.join(f)).unwrap(),
            std::fs::read(o.join(f)).unwrap(),
        );
        assert!(
            x == y,
            "{builtin} vs {obj}: {f} differs ({} vs {} bytes)",
            x.len(),
            y.len()
        );
    }
    assert_eq!(
        xdp_counters(&rb),
        xdp_counters(&ro),
        "{builtin} vs {obj}: XDP counters"
    );
    assert!(!xdp_counters(&rb).is_empty());
    assert!(ro.contains("rx_xdp_fault: 0 "), "{obj} faulted:\n{ro}");
    (rb, ro)
}

/// Frames in a capture.
fn frames(path: &Path) -> usize {
    let f = std::fs::File::open(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        p.unwrap();
        n += 1;
    }
    n
}

#[test]
fn the_shared_capture_is_the_generated_xdp_mix() {
    let tmp = out_dir("mix");
    std::fs::create_dir_all(&tmp).unwrap();
    let fresh = tmp.join("mix.pcap");
    onic(&[
        "pcap-sample",
        "--mix",
        "xdp",
        "--frames",
        "300",
        fresh.to_str().unwrap(),
    ]);
    assert!(std::fs::read(fresh).unwrap() == std::fs::read(shared()).unwrap());
}

#[test]
fn pass_drop_swap_redirect_match_their_builtins() {
    same_as_builtin("pass", "xdp_pass.o", &[]);
    same_as_builtin("drop", "xdp_drop.o", &[]);
    same_as_builtin("tx", "xdp_swap.o", &[]);
    let (_, ro) = same_as_builtin(
        "redirect",
        "xdp_redirect_map.o",
        &["--sec", "xdp_redirect_map", "--map", "tx_port:0=2"],
    );
    assert!(ro.contains("map tx_port: devmap (1 entries of 4"), "{ro}");
    assert_eq!(
        frames(&out_dir_existing("redirect-obj").join("tx-port1.pcap")),
        300
    );
}

fn out_dir_existing(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("run-obj")
        .join(name)
}

#[test]
fn the_vm_programs_match_their_builtins() {
    same_as_builtin("drop-udp", "xdp_drop_udp.o", &[]);
    same_as_builtin("icmp-echo", "xdp_tx.o", &[]);
    same_as_builtin("arp-bounce", "xdp_redirect.o", &[]);
    assert_eq!(frames(&out_dir_existing("drop-udp-obj").join("drop.pcap")), 100);
    assert_eq!(
        frames(&out_dir_existing("icmp-echo-obj").join("tx-port0.pcap")),
        50
    );
    assert_eq!(
        frames(&out_dir_existing("arp-bounce-obj").join("tx-port1.pcap")),
        25
    );
}

/// The built-in count's table as (key hex, packets, bytes), keys laid out as xdp_count.c's.
fn builtin_flows(report: &str) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for l in report.lines().map(str::trim) {
        let Some((flow, counts)) = l.split_once(": ") else {
            continue;
        };
        let Some((n, rest)) = counts.split_once(" frames, ") else {
            continue;
        };
        let bytes: u64 = rest.trim_end_matches(" bytes").parse().unwrap();
        let key = if flow == "not IPv4" {
            "0".repeat(32)
        } else {
            // "a.b.c.d:sp -> e.f.g.h:dp proto p"
            let (s, rest) = flow.split_once(" -> ").unwrap();
            let (d, proto) = rest.split_once(" proto ").unwrap();
            let addr = |t: &str| -> (Vec<u8>, u16) {
                let (ip, port) = t.rsplit_once(':').unwrap();
                (
                    ip.split('.').map(|x| x.parse().unwrap()).collect(),
                    port.parse().unwrap(),
                )
            };
            let ((sa, sp), (da, dp)) = (addr(s), addr(d));
            let mut k = Vec::new();
            k.extend(sa);
            k.extend(da);
            k.extend([proto.parse::<u8>().unwrap(), 0]);
            k.extend(sp.to_le_bytes());
            k.extend(dp.to_le_bytes());
            k.extend([0, 0]);
            k.iter().map(|b| format!("{b:02x}")).collect()
        };
        *m.entry(key).or_insert((0, 0)) = (n.parse().unwrap(), bytes);
    }
    m
}

/// The object's map from the JSON dump: key hex -> (packets, bytes).
fn object_flows(json: &str) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for l in json.lines().filter(|l| l.contains("\"key\": \"")) {
        let field = |name: &str| {
            l.split(&format!("\"{name}\": \""))
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string()
        };
        let v = field("value");
        let le = |h: &str| {
            u64::from_str_radix(
                &h.as_bytes()
                    .chunks(2)
                    .rev()
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect::<String>(),
                16,
            )
            .unwrap()
        };
        m.insert(field("key"), (le(&v[..16]), le(&v[16..])));
    }
    m
}

#[test]
fn the_flow_counter_map_matches_the_builtin_table() {
    let dir = out_dir("count-json");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("maps.json");
    let (rb, _) = same_as_builtin("count", "xdp_count.o", &["--dump-maps", json.to_str().unwrap()]);
    let b = builtin_flows(&rb);
    let o = object_flows(&std::fs::read_to_string(&json).unwrap());
    assert!(b.len() > 20, "{rb}");
    assert_eq!(b, o);
    assert_eq!(o.values().map(|v| v.0).sum::<u64>(), 300);
}

#[test]
fn features_object_runs_with_its_maps_and_log() {
    let dir = out_dir("features");
    let obj = root().join("bpf/objects/xdp_features.o");
    let r = onic(&[
        "run",
        "--pcap",
        shared().to_str().unwrap(),
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--queues",
        "2",
        "--dump-maps",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(r.contains("program log (1 lines):"), "{r}");
    assert!(r.contains("first frame: "), "{r}");
    assert!(
        r.contains("\"name\": \"per_cpu\", \"type\": \"percpu_array\""),
        "{r}"
    );
    assert!(r.contains("\"name\": \".rodata\""), "{r}");
    // 25 ARP frames dropped; every frame longer than 128 bytes lost 4.
    assert_eq!(frames(&dir.join("drop.pcap")), 25);
    assert_eq!(frames(&dir.join("pass.pcap")), 275);
    assert!(r.contains("rx_xdp_fault: 0 "), "{r}");
    // Every frame passed carries the program's 4 bytes of metadata (0x0ca7cafe, little-endian),
    // listed beside pass.pcap by the frame's number in it.
    assert!(
        r.contains("pass-meta.txt       275 frames passed with metadata"),
        "{r}"
    );
    let meta = std::fs::read_to_string(dir.join("pass-meta.txt")).unwrap();
    let lines: Vec<&str> = meta.lines().collect();
    assert_eq!(lines.len(), 275);
    for (n, line) in (1..).zip(&lines) {
        assert_eq!(*line, format!("{n} fecaa70c"));
    }
}

#[test]
fn faults_are_aborted_counted_and_logged() {
    let dir = out_dir("faults");
    let obj = root().join("bpf/objects/faults.o");
    let r = onic(&[
        "run",
        "--pcap",
        shared().to_str().unwrap(),
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--sec",
        "xdp/null",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(r.contains("rx_xdp_fault: 300 "), "{r}");
    let aborted: u64 = r
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("rx") && l.contains("_xdp_aborted: "))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(aborted, 300, "{r}");
    assert!(r.contains("null_deref faulted at instruction"), "{r}");
    assert_eq!(frames(&dir.join("drop.pcap")), 300);
}

#[test]
fn bad_objects_and_settings_are_refused_with_a_message() {
    let run_err = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_onic"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let o = |n: &str| root().join("bpf/objects").join(n).to_str().unwrap().to_string();
    let e = run_err(&["run", "--xdp-obj", &o("refused.o"), "--sec", "xdp/helper"]);
    assert!(
        e.contains("bpf_xdp_get_buff_len") && e.contains("is not provided"),
        "{e}"
    );
    let e = run_err(&[
        "run",
        "--xdp-obj",
        &o("xdp_redirect_map.o"),
        "--sec",
        "xdp",
        "--map",
        "nope:0=1",
    ]);
    assert!(e.contains("no map 'nope' (maps: tx_port, xsks)"), "{e}");
    let e = run_err(&[
        "run",
        "--xdp-obj",
        &o("xdp_redirect_map.o"),
        "--sec",
        "xdp",
        "--map",
        "tx_port:9=1",
    ]);
    assert!(e.contains("--map tx_port:9=1"), "{e}");
    let e = run_err(&["run", "--xdp-obj", &o("xdp_drop.o"), "--xdp", "pass"]);
    assert!(e.contains("cannot be used with"), "{e}");
}

/// The number after `label` in `text`.
fn number_after(text: &str, label: &str) -> u64 {
    let rest = text
        .split(label)
        .nth(1)
        .unwrap_or_else(|| panic!("no '{label}' in:\n{text}"));
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn traffic_mode_runs_objects_on_the_receiving_queues() {
    let o = |n: &str| root().join("bpf/objects").join(n).to_str().unwrap().to_string();
    let common = [
        "--traffic",
        "--packets",
        "3000",
        "--progress-ms",
        "0",
        "--proto",
        "udp",
    ];
    let mut args = vec!["run", "--xdp-obj"];
    let drop_udp = o("xdp_drop_udp.o");
    args.push(&drop_udp);
    args.extend(common);
    let r = onic(&args);
    assert!(r.contains("result: OK"), "{r}");
    let dropped = number_after(&r, "), drop ");
    assert!(dropped > 0 && dropped < 3000, "{r}");
    assert_eq!(number_after(&r, "XDP: pass ") + dropped, 3000, "{r}");

    let swap = o("xdp_swap.o");
    let mut args = vec!["run", "--xdp-obj", &swap];
    args.extend(common);
    let r = onic(&args);
    assert!(r.contains("result: OK"), "{r}");
    // Every frame went back over the cable and reached the sending function.
    assert_eq!(number_after(&r, "), tx "), 3000, "{r}");
    assert!(r.contains("accounting: sent 3000 = received 3000 "), "{r}");

    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(["run", "--xdp-obj", &swap, "--traffic", "--direction", "both"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs one direction"));
}

/// The order-free form of a capture, as `os-linux/vm/onic_replay digest` prints it: one
/// "length fnv64" line per frame, sorted as strings.
fn digest(path: &Path) -> String {
    let f = std::fs::File::open(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    let mut lines = Vec::new();
    while let Some(p) = r.next_packet() {
        let d = p.unwrap().data.into_owned();
        let h = d.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
            (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
        });
        lines.push(format!("{} {h:016x}", d.len()));
    }
    lines.sort();
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The programs the kernel VM test replays (see `os-linux/vm/README.md`): object, program.
const VM_PROGRAMS: [(&str, &str); 8] = [
    ("xdp_pass.o", "xdp_pass"),
    ("xdp_drop.o", "xdp_drop"),
    ("xdp_swap.o", "xdp_swap"),
    ("xdp_drop_udp.o", "xdp_drop_udp"),
    ("xdp_tx.o", "xdp_tx"),
    ("xdp_redirect.o", "xdp_redirect"),
    ("xdp_count.o", "xdp_count"),
    ("xdp_features.o", "xdp_features"),
];

/// The expected outputs of the kernel VM comparison (`os-linux/vm/expected/`) are what
/// `onic run --xdp-obj` gives on the shared capture: the frames the stack receives (pass.pcap),
/// the frames port 0 sends (tx-port0.pcap, which the cable brings to onicsim1), and for the flow
/// counter its map. `ONIC_BLESS=1` rewrites them.
#[test]
fn vm_expected_outputs_are_what_onic_run_gives() {
    let dir = root().join("os-linux/vm/expected");
    let bless = std::env::var_os("ONIC_BLESS").is_some();
    for (obj, prog) in VM_PROGRAMS {
        let out = out_dir(&format!("vm-{prog}"));
        let objp = root().join("bpf/objects").join(obj);
        let json = out.join("maps.json");
        std::fs::create_dir_all(&out).unwrap();
        onic(&[
            "run",
            "--pcap",
            shared().to_str().unwrap(),
            "--xdp-obj",
            objp.to_str().unwrap(),
            "--sec",
            prog,
            "--dump-maps",
            json.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ]);
        let mut files = vec![
            (format!("{prog}.pass.digest"), digest(&out.join("pass.pcap"))),
            (
                format!("{prog}.port0-out.digest"),
                digest(&out.join("tx-port0.pcap")),
            ),
        ];
        if prog == "xdp_count" {
            let mut lines: Vec<String> = std::fs::read_to_string(&json)
                .unwrap()
                .lines()
                .filter(|l| l.contains("\"key\": \""))
                .map(|l| {
                    let field = |n: &str| {
                        l.split(&format!("\"{n}\": \""))
                            .nth(1)
                            .unwrap()
                            .split('"')
                            .next()
                            .unwrap()
                            .to_string()
                    };
                    format!("flows {} {}\n", field("key"), field("value"))
                })
                .collect();
            lines.sort();
            files.push(("xdp_count.flows.txt".into(), lines.concat()));
        }
        for (name, text) in files {
            let path = dir.join(&name);
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            }
            let committed =
                std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                committed == text,
                "{name}: onic run gives something else now (ONIC_BLESS=1 rewrites)"
            );
        }
    }
}

/// Records a program writes into a ring buffer land in `bpf-records.txt` of `--out-dir`, one a
/// line: map, entry, length, bytes in hex.
#[test]
fn ring_buffer_records_are_written_to_the_out_dir() {
    let d = out_dir("ringbuf");
    let obj = root().join("bpf/objects/more_maps.o");
    let text = onic(&[
        "run",
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--sec",
        "xdp/ringbuf",
        "--frames",
        "5",
        "--out-dir",
        d.to_str().unwrap(),
    ]);
    assert!(
        text.contains("records of ring buffers and perf event arrays: 10 written"),
        "{text}"
    );
    let recs = std::fs::read_to_string(d.join("bpf-records.txt")).unwrap();
    let lines: Vec<&str> = recs.lines().collect();
    assert_eq!(lines.len(), 10, "{recs}");
    for pair in lines.chunks(2) {
        let (a, b): (Vec<&str>, Vec<&str>) = (pair[0].split(' ').collect(), pair[1].split(' ').collect());
        assert_eq!(&a[..3], ["events", "0", "16"], "{recs}");
        // The second record is the first's 4-byte length field alone.
        assert_eq!(&b[..3], ["events", "0", "4"], "{recs}");
        assert_eq!(b[3], &a[3][..8], "{recs}");
    }
}

/// `--map` fills a program array with a function of the object (loaded for `bpf_tail_call`) and
/// a map of maps with another map; a name that is neither is refused.
#[test]
fn program_arrays_and_maps_of_maps_are_filled_by_name() {
    let obj = root().join("bpf/objects/more_maps.o");
    let obj = obj.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let d = out_dir(name);
        let mut args = vec![
            "run",
            "--xdp-obj",
            obj,
            "--frames",
            "4",
            "--out-dir",
            d.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        onic(&args)
    };
    // tail_count tail-calls entry 0, itself by declaration: every frame XDP_DROP.
    let t = run("tail-self", &["--sec", "tail_count"]);
    assert!(t.contains("verdicts aborted 0 drop 4 pass 0"), "{t}");
    let t = run(
        "tail-pass",
        &["--sec", "tail_count", "--map", "jumps:0=tail_pass"],
    );
    assert!(t.contains("verdicts aborted 0 drop 0 pass 4"), "{t}");
    // outer_hash under key 7 holding inner_a, the frame count: verdicts 3, 4, 5, 6.
    let t = run("mim", &["--sec", "xdp/mim", "--map", "outer_hash:7=inner_a"]);
    assert!(
        t.contains("aborted 0 drop 0 pass 0 tx 1 redirect 1 other 2"),
        "{t}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args([
            "run",
            "--xdp-obj",
            obj,
            "--sec",
            "xdp/mim",
            "--map",
            "outer_hash:7=events",
        ])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("--map outer_hash:7=events") && e.contains("EINVAL"),
        "{e}"
    );
}

/// `--kernel-verify`: the host kernel's verdict beside the engine's, on a program the kernel
/// refuses (the engine's static check refuses it too, in the same words) and one it loads.
/// Where bpf() is not permitted, the run says so and the test checks only that.
#[test]
fn kernel_verify_reports_the_kernels_verdict_beside_the_engines() {
    let obj = root().join("bpf/objects/kernel_refuses.o");
    let obj = obj.to_str().unwrap();
    let d = out_dir("kernel-verify");
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(["run", "--xdp-obj", obj, "--sec", "xdp/egress", "--kernel-verify"])
        .args(["--frames", "2", "--out-dir", d.to_str().unwrap()])
        .output()
        .unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        err.contains("the kernel's verifier refuses it: invalid bpf_context access off=20 size=4"),
        "{err}"
    );
    if text.contains("kernel verifier: not asked") {
        eprintln!("SKIPPED the kernel's side: {text}");
        return;
    }
    assert!(
        text.contains("kernel verifier (host kernel, through libbpf): REFUSED")
            && text.contains("invalid bpf_context access off=20 size=4"),
        "{text}"
    );
    let t = onic(&[
        "run",
        "--xdp-obj",
        obj,
        "--sec",
        "xdp/fine",
        "--kernel-verify",
        "--frames",
        "2",
        "--out-dir",
        d.to_str().unwrap(),
    ]);
    assert!(
        t.contains("kernel verifier (host kernel, through libbpf): accepted; processed"),
        "{t}"
    );
}

/// The frame count a run's output table gives for capture `name`.
fn captured(report: &str, name: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in:\n{report}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A redirect to the ingress port's own interface (a hairpin) leaves through that port, as in
/// the kernel; one to an interface the model lacks is a failed redirect, reported by its index.
#[test]
fn hairpins_leave_the_ingress_port_and_missing_interfaces_are_named() {
    let d = out_dir("hairpin");
    let obj = root().join("bpf/objects/xdp_redirect_map.o");
    let t = onic(&[
        "run",
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--sec",
        "xdp_redirect_map",
        "--map",
        "tx_port:0=1",
        "--frames",
        "20",
        "--out-dir",
        d.to_str().unwrap(),
    ]);
    assert_eq!(captured(&t, "tx-port0.pcap"), 20, "{t}");
    assert_eq!(frames(&d.join("tx-port0.pcap")), 20);
    assert_eq!(captured(&t, "tx-port1.pcap"), 0, "{t}");
    assert!(!t.contains("redirects to interface"), "{t}");
    // xdp_redirect sends ARP frames to ingress_ifindex + 1: from port 1 (interface 2) that is
    // interface 3, which does not exist.
    let d = out_dir("missing-ifindex");
    let obj = root().join("bpf/objects/xdp_redirect.o");
    let t = onic(&[
        "run",
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--port",
        "1",
        "--frames",
        "40",
        "--out-dir",
        d.to_str().unwrap(),
    ]);
    let redirected = number_after(&t, " tx 0 redirect ");
    assert!(redirected > 0, "{t}");
    assert_eq!(number_after(&t, "redirects to interface 3: "), redirected, "{t}");
    assert_eq!(
        captured(&t, "tx-port0.pcap") + captured(&t, "tx-port1.pcap"),
        0,
        "{t}"
    );
    let errors: u64 = t
        .lines()
        .filter(|l| {
            l.contains("_xdp_redirect_errors:") && l.trim_start().starts_with("rx") && !l.contains("rx_xdp")
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(errors, redirected, "{t}");
}

/// A devmap value set with `--map` must name one of the model's interfaces (1 and 2), in an
/// array devmap and a hash devmap alike, as the kernel's devmap update refuses an interface
/// that does not exist.
#[test]
fn devmap_values_must_name_an_existing_interface() {
    let redirect_map = root().join("bpf/objects/xdp_redirect_map.o");
    let kernel_like = root().join("bpf/objects/kernel_like.o");
    let cases = [
        (&redirect_map, "xdp_redirect_map", "tx_port:0=3", 3),
        (&redirect_map, "xdp_redirect_map", "tx_port:1=0", 0),
        (&kernel_like, "to_all", "ports:5=0x100", 256),
    ];
    for (obj, sec, spec, ifindex) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_onic"))
            .args(["run", "--xdp-obj", obj.to_str().unwrap(), "--sec", sec])
            .args(["--map", spec, "--frames", "1"])
            .args(["--out-dir", out_dir("devmap-refused").to_str().unwrap()])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && e.contains(&format!(
                    "--map {spec}: interface {ifindex} does not exist in the model"
                ))
                && e.contains("EINVAL"),
            "{spec}: {e}"
        );
    }
    for spec in ["tx_port:0=1", "tx_port:0=2"] {
        let d = out_dir("devmap-accepted");
        let t = onic(&[
            "run",
            "--xdp-obj",
            redirect_map.to_str().unwrap(),
            "--sec",
            "xdp_redirect_map",
            "--map",
            spec,
            "--frames",
            "3",
            "--out-dir",
            d.to_str().unwrap(),
        ]);
        let port = if spec.ends_with('1') {
            "tx-port0.pcap"
        } else {
            "tx-port1.pcap"
        };
        assert_eq!(captured(&t, port), 3, "{spec}: {t}");
    }
}

/// The frames of a capture.
fn packets(path: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        v.push(p.unwrap().data.into_owned());
    }
    v
}

/// Headroom a program grows into holds zeros, as the kernel's test run buffer does; with
/// `--keep-headroom` it holds what the model's page held (its fill pattern, never all zeros).
#[test]
fn new_headroom_is_zero_unless_kept() {
    let obj = root().join("bpf/objects/push_head.o");
    let run = |name: &str, extra: &[&str]| {
        let d = out_dir(name);
        let mut args = vec![
            "run",
            "--xdp-obj",
            obj.to_str().unwrap(),
            "--frames",
            "6",
            "--out-dir",
            d.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let t = onic(&args);
        assert!(t.contains("verdicts aborted 0 drop 0 pass 0 tx 6"), "{t}");
        packets(&d.join("tx-port0.pcap"))
    };
    let zeroed = run("headroom-zero", &[]);
    let kept = run("headroom-kept", &["--keep-headroom"]);
    assert_eq!((zeroed.len(), kept.len()), (6, 6));
    for (z, k) in zeroed.iter().zip(&kept) {
        assert_eq!(z[..16], [0; 16]);
        assert_ne!(k[..16], [0; 16]);
        // The frame itself follows, the same either way.
        assert_eq!(z[16..], k[16..]);
    }
}

/// A broadcast redirect sends a copy out of every devmap entry's port (with
/// `BPF_F_EXCLUDE_INGRESS`, every one but the ingress port's); a cpumap redirect reaches the OS
/// on the CPU chosen, counted per CPU; cpumap entries name CPUs the model has.
#[test]
fn broadcasts_copy_to_every_port_and_cpumap_redirects_reach_the_os() {
    let obj = root().join("bpf/objects/broadcast.o");
    let bc = |sec: &str| {
        let d = out_dir(&format!("broadcast-{sec}"));
        let t = onic(&[
            "run",
            "--xdp-obj",
            obj.to_str().unwrap(),
            "--sec",
            sec,
            "--map",
            "ports:0=1",
            "--map",
            "ports:3=2",
            "--frames",
            "10",
            "--out-dir",
            d.to_str().unwrap(),
        ]);
        assert!(t.contains("page accounting: every page returned"), "{t}");
        (
            t,
            packets(&d.join("tx-port0.pcap")),
            packets(&d.join("tx-port1.pcap")),
        )
    };
    let (t, p0, p1) = bc("to_every_port");
    assert_eq!((p0.len(), p1.len()), (10, 10), "{t}");
    assert_eq!(p0, p1);
    assert!(
        t.contains("broadcast redirects: 10 copies out of port 0, 10 out of port 1, 0 lost"),
        "{t}"
    );
    let (t, p0, p1) = bc("to_other_ports");
    assert_eq!((p0.len(), p1.len()), (0, 10), "{t}");

    let obj = root().join("bpf/objects/kernel_like.o");
    let d = out_dir("cpumap");
    // to_cpu sends a frame of queue q to CPU q + 1 (XDP_DROP without an entry).
    let t = onic(&[
        "run",
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--sec",
        "to_cpu",
        "--map",
        "cpu_map:1=192",
        "--map",
        "cpu_map:3=100",
        "--frames",
        "20",
        "--out-dir",
        d.to_str().unwrap(),
    ]);
    let redirected = number_after(&t, " tx 0 redirect ");
    let to_os = [number_after(&t, "CPU 1: "), number_after(&t, "CPU 3: ")];
    assert!(to_os[0] > 0 && to_os[1] > 0, "{t}");
    assert_eq!(to_os[0] + to_os[1], redirected, "{t}");
    assert_eq!(
        (number_after(&t, "CPU 0: "), number_after(&t, "CPU 2: ")),
        (0, 0),
        "{t}"
    );
    assert_eq!(captured(&t, "pass.pcap"), redirected, "{t}");
    assert_eq!(captured(&t, "drop.pcap"), 20 - redirected, "{t}");
    for (spec, says) in [
        ("cpu_map:4=64", "CPU 4 does not exist"),
        ("cpu_map:1=0", "queue size 0"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_onic"))
            .args(["run", "--xdp-obj", obj.to_str().unwrap(), "--sec", "to_cpu"])
            .args(["--map", spec, "--frames", "1"])
            .args(["--out-dir", out_dir("cpumap-refused").to_str().unwrap()])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && e.contains(&format!("--map {spec}: {says}")),
            "{e}"
        );
    }
}

/// `--route` fills the FIB `bpf_fib_lookup` asks: kernel_like's `fib` looks up 10.0.0.2 and
/// redirects to the interface the lookup names (XDP_DROP when there is no route); the longest
/// prefix wins; a malformed route is refused before the run.
#[test]
fn routes_answer_fib_lookups() {
    let obj = root().join("bpf/objects/kernel_like.o");
    let run = |name: &str, routes: &[&str]| {
        let d = out_dir(name);
        let mut args = vec![
            "run",
            "--xdp-obj",
            obj.to_str().unwrap(),
            "--sec",
            "fib",
            "--frames",
            "10",
            "--out-dir",
            d.to_str().unwrap(),
        ];
        for r in routes {
            args.extend_from_slice(&["--route", r]);
        }
        onic(&args)
    };
    let t = run("fib-none", &[]);
    assert!(
        t.contains("verdicts aborted 0 drop 10 pass 0 tx 0 redirect 0"),
        "{t}"
    );
    let wide = "10.0.0.0/24 dev 1 neigh 02:00:00:00:00:99";
    let t = run("fib-port1", &[wide, "10.0.1.0/24 dev 0 neigh 02:00:00:00:00:98"]);
    assert!(t.contains("redirect 10 "), "{t}");
    assert_eq!(
        (captured(&t, "tx-port0.pcap"), captured(&t, "tx-port1.pcap")),
        (0, 10),
        "{t}"
    );
    let t = run(
        "fib-longest",
        &[wide, "10.0.0.2/32 dev 0 neigh 02:00:00:00:00:98"],
    );
    assert_eq!(
        (captured(&t, "tx-port0.pcap"), captured(&t, "tx-port1.pcap")),
        (10, 0),
        "{t}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(["run", "--xdp-obj", obj.to_str().unwrap(), "--sec", "fib"])
        .args(["--route", "10.0.0.0/24 via 10.0.0.1"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("--route '10.0.0.0/24 via 10.0.0.1': unknown word 'via'"),
        "{e}"
    );
}

/// Traffic mode carries out hairpins, cpumap redirects and broadcasts as replay mode does: a
/// hairpin from the receiving port reaches the sending function, a cpumap pass reaches the OS
/// (checked, counted by CPU), a broadcast leaves through its devmap entry's port or, with only
/// the ingress port and `BPF_F_EXCLUDE_INGRESS`, nowhere; no redirect fails in the driver.
#[test]
fn traffic_mode_carries_out_hairpins_cpumaps_and_broadcasts() {
    let o = |n: &str| root().join("bpf/objects").join(n).to_str().unwrap().to_string();
    let traffic = |obj: &str, sec: &str, maps: &[&str]| {
        let mut args = vec!["run", "--xdp-obj", obj, "--sec", sec, "--traffic"];
        args.extend(["--packets", "2000", "--progress-ms", "0", "--proto", "udp"]);
        for m in maps {
            args.extend(["--map", m]);
        }
        let r = onic(&args);
        assert!(r.contains("result: OK"), "{r}");
        assert_eq!(number_after(&r, "redirect 2000 (errors "), 0, "{r}");
        r
    };
    // Port 1 receives (interface 2): tx_port:0=2 is its own interface.
    let redirect_map = o("xdp_redirect_map.o");
    let r = traffic(&redirect_map, "xdp_redirect_map", &["tx_port:0=2"]);
    assert_eq!(number_after(&r, "XDP redirects: out of a port "), 2000, "{r}");
    assert!(r.contains("accounting: sent 2000 = received 2000 "), "{r}");

    let kernel_like = o("kernel_like.o");
    let mut args = vec!["run", "--xdp-obj", &kernel_like, "--sec", "to_cpu", "--traffic"];
    args.extend(["--packets", "2000", "--progress-ms", "0", "--proto", "udp"]);
    args.extend(["--map", "cpu_map:1=192", "--map", "cpu_map:3=100"]);
    let r = onic(&args);
    assert!(r.contains("result: OK"), "{r}");
    let to_cpus = number_after(&r, "to the OS by cpumap ");
    let cpus = [number_after(&r, "CPU 1: "), number_after(&r, "CPU 3: ")];
    assert!(cpus[0] > 0 && cpus[1] > 0 && cpus[0] + cpus[1] == to_cpus, "{r}");
    assert_eq!(number_after(&r, "), redirect "), to_cpus, "{r}");
    assert_eq!(number_after(&r, "(errors "), 0, "{r}");
    assert!(
        r.contains(&format!("accounting: sent 2000 = received {to_cpus} + ")),
        "{r}"
    );

    let broadcast = o("broadcast.o");
    let r = traffic(&broadcast, "to_every_port", &["ports:0=2"]);
    assert_eq!(number_after(&r, "XDP redirects: out of a port "), 2000, "{r}");
    assert!(r.contains("accounting: sent 2000 = received 2000 "), "{r}");
    let r = traffic(&broadcast, "to_other_ports", &["ports:0=2"]);
    assert_eq!(number_after(&r, "broadcast to no port "), 2000, "{r}");
    assert!(r.contains("accounting: sent 2000 = received 0 "), "{r}");
}

/// The lines of a metadata side file (number in the capture, metadata as a little-endian word),
/// and its first line when that is a `#` comment.
fn meta_lines(path: &Path) -> (Option<String>, Vec<(usize, u32)>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().peekable();
    let comment = lines.next_if(|l| l.starts_with('#')).map(str::to_string);
    let v = lines
        .map(|l| {
            let (n, hex) = l.split_once(' ').unwrap();
            let b: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (n.parse().unwrap(), u32::from_le_bytes(b.try_into().unwrap()))
        })
        .collect();
    (comment, v)
}

/// The metadata a program leaves on frames it sends back (XDP_TX), redirects out of a port,
/// broadcasts, passes through a cpumap or gives to an AF_XDP socket is written beside the
/// capture each frame ends up in, by the frame's number there; for frames that left a port the
/// side file says the metadata is not on the wire. meta_out's metadata is the frame's length,
/// so each line names the frame it goes with.
#[test]
fn metadata_of_frames_sent_or_redirected_is_shown_beside_their_captures() {
    let obj = root().join("bpf/objects/meta_out.o");
    // (section, --map settings, (capture, side file) pairs)
    type Case<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: [Case<'_>; 5] = [
        ("meta_tx", &[], &[("tx-port0.pcap", "tx-port0-meta.txt")]),
        (
            "meta_redirect",
            &["ports:0=2"],
            &[("tx-port1.pcap", "tx-port1-meta.txt")],
        ),
        (
            "meta_broadcast",
            &["ports:0=1", "ports:1=2"],
            &[
                ("tx-port0.pcap", "tx-port0-meta.txt"),
                ("tx-port1.pcap", "tx-port1-meta.txt"),
            ],
        ),
        ("meta_cpu", &["cpus:1=64"], &[("pass.pcap", "pass-meta.txt")]),
        (
            "meta_xsk",
            &["xsks:0=0", "xsks:1=0"],
            &[("xsk.pcap", "xsk-meta.txt")],
        ),
    ];
    for (sec, maps, files) in cases {
        let d = out_dir(&format!("meta-{sec}"));
        let mut args = vec!["run", "--xdp-obj", obj.to_str().unwrap(), "--sec", sec];
        for m in maps {
            args.extend(["--map", m]);
        }
        args.extend([
            "--frames",
            "50",
            "--queues",
            "2",
            "--out-dir",
            d.to_str().unwrap(),
        ]);
        let t = onic(&args);
        assert!(t.contains("verdicts aborted 0 drop 0 "), "{sec}: {t}");
        for (capture, side) in files {
            let frames = packets(&d.join(capture));
            assert_eq!(frames.len(), 50, "{sec}: {t}");
            let (comment, lines) = meta_lines(&d.join(side));
            assert_eq!(
                comment.is_some_and(|c| c.contains("NOT on the wire")),
                capture.starts_with("tx-"),
                "{sec}: {side}"
            );
            assert_eq!(lines.len(), 50, "{sec}: {side}");
            for (i, (n, len)) in lines.iter().enumerate() {
                assert_eq!(*n, i + 1, "{sec}: {side}");
                assert_eq!(*len as usize, frames[n - 1].len(), "{sec}: {side} line {n}");
            }
        }
    }
}

/// `--test-run` hands every frame to the program as the kernel's BPF_PROG_TEST_RUN does: runts
/// and frames above 1514 bytes reach it (the model's MAC drops them in a replay), frames under
/// 14 bytes and over a page's linear part are refused with the reason, and each frame's
/// verdict, length, redirect target and metadata are listed, the frames as the program left
/// them captured in input order.
#[test]
fn test_run_mode_hands_runts_and_long_frames_to_the_program() {
    use pcap_file::pcap::{PcapPacket, PcapWriter};
    let d = out_dir("test-run");
    std::fs::create_dir_all(&d).unwrap();
    let sizes = [10usize, 14, 40, 60, 1600, 3520, 3521];
    let input: Vec<Vec<u8>> = sizes
        .iter()
        .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
        .collect();
    let pcap = d.join("odd.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&pcap).unwrap()).unwrap();
    for (i, f) in input.iter().enumerate() {
        let ts = std::time::Duration::from_millis(i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f)).unwrap();
    }
    drop(w);
    let obj = root().join("bpf/objects/meta_out.o");
    let run = |sec: &str, maps: &[&str], name: &str| {
        let out = d.join(name);
        let mut args = vec!["run", "--pcap", pcap.to_str().unwrap(), "--xdp-obj"];
        args.extend([obj.to_str().unwrap(), "--sec", sec, "--test-run"]);
        for m in maps {
            args.extend(["--map", m]);
        }
        args.extend(["--out-dir", out.to_str().unwrap()]);
        let t = onic(&args);
        let lines = std::fs::read_to_string(out.join("test-run.txt")).unwrap();
        (t, lines, packets(&out.join("test-run.pcap")))
    };
    let (t, lines, frames) = run("meta_tx", &[], "tx");
    assert!(t.contains("verdicts: aborted 0 drop 0 pass 0 tx 5 "), "{t}");
    assert!(t.contains("refused: 1 shorter than 14 bytes"), "{t}");
    assert!(t.contains("1 longer than 3520 bytes"), "{t}");
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 7);
    assert!(lines[0].starts_with("1 refused: 10 bytes"), "{lines:?}");
    assert!(lines[6].starts_with("7 refused: 3521 bytes"), "{lines:?}");
    // The frames that ran are captured unchanged, each line with its length as metadata.
    assert_eq!(frames, input[1..6].to_vec());
    for (line, n) in lines[1..6].iter().zip(&sizes[1..6]) {
        let meta: String = (*n as u32)
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(line.ends_with(&format!(" XDP_TX {n} meta {meta}")), "{line}");
    }
    let (_, lines, _) = run("meta_redirect", &["ports:0=2"], "redirect");
    assert!(
        lines
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("2 XDP_REDIRECT 14 to the other port meta "),
        "{lines}"
    );
    // Through the model only the 60-byte frame reaches the program.
    let out = d.join("model");
    let t = onic(&[
        "run",
        "--pcap",
        pcap.to_str().unwrap(),
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--sec",
        "meta_tx",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(t.contains("onic-bpf: 1 runs"), "{t}");
}

/// fib_probe's lookup of 10.0.0.2 with `args` (hex of its args entry: interface, flags, table,
/// tot_len) and `routes`: the return code and the parameters as the helper left them.
fn fib_probe(name: &str, args: &str, routes: &[&str]) -> (i64, Vec<u8>) {
    let d = out_dir(name);
    let obj = root().join("bpf/objects/fib_probe.o");
    let map = format!("args:0=hex:{args}");
    let mut a = vec!["run", "--xdp-obj", obj.to_str().unwrap(), "--map", &map];
    for r in routes {
        a.extend(["--route", r]);
    }
    a.extend(["--frames", "1", "--dump-maps", "--out-dir", d.to_str().unwrap()]);
    let t = onic(&a);
    let at = t.find("\"name\": \"result\"").unwrap();
    let hex = t[at..].split("\"value\": \"").nth(1).unwrap();
    let b: Vec<u8> = (0..144)
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    (i64::from_le_bytes(b[..8].try_into().unwrap()), b[8..].to_vec())
}

/// `bpf_fib_lookup` as Linux 6.1 answers it: the interface in the parameters must exist
/// (-ENODEV), BPF_FIB_LOOKUP_OUTPUT keeps the routes out of it, an unresolved neighbour (a
/// route without `neigh`) answers NO_NEIGH with the interface filled in and no addresses,
/// SKIP_NEIGH succeeds without them, DIRECT|TBID finds the routes in the main table (254) only
/// and clears the table, a tot_len above the MTU answers FRAG_NEEDED with the MTU, an unknown
/// flag is -EINVAL.
#[test]
fn fib_lookups_honour_the_interface_the_flags_and_the_neighbour() {
    let wide = "10.0.0.0/24 dev 1 neigh 02:00:00:00:00:99";
    let host = "10.0.0.2/32 dev 0";
    let ifindex = |p: &[u8]| u32::from_le_bytes(p[8..12].try_into().unwrap());
    let mtu = |p: &[u8]| u16::from_le_bytes([p[6], p[7]]);
    let macs = |p: &[u8]| p[52..64].to_vec();
    // From the ingress interface (1): the /32 wins, its neighbour unresolved.
    let (rc, p) = fib_probe("fib-no-neigh", "ffffffff000000000000000000000000", &[wide, host]);
    assert_eq!((rc, ifindex(&p), mtu(&p)), (7, 1, 0));
    assert_eq!(macs(&p), [0; 12]);
    for (name, args) in [
        ("fib-if3", "03000000000000000000000000000000"),
        ("fib-if0", "00000000000000000000000000000000"),
    ] {
        assert_eq!(fib_probe(name, args, &[wide]).0, -19, "{name}");
    }
    // OUTPUT through interface 2: only the /24 out of it counts.
    let (rc, p) = fib_probe("fib-output", "02000000020000000000000000000000", &[wide, host]);
    assert_eq!((rc, ifindex(&p), mtu(&p)), (0, 2, 1500));
    assert_eq!(macs(&p), [0, 0x0a, 0x35, 0, 0, 1, 2, 0, 0, 0, 0, 0x99]);
    // OUTPUT | SKIP_NEIGH through interface 1: the /32, no neighbour needed.
    let (rc, p) = fib_probe("fib-skip", "01000000060000000000000000000000", &[wide, host]);
    assert_eq!((rc, ifindex(&p), mtu(&p)), (0, 1, 1500));
    assert_eq!(macs(&p), [0; 12]);
    // DIRECT | TBID: table 254 holds the routes, table 100 does not exist.
    let (rc, p) = fib_probe("fib-main", "ffffffff09000000fe00000000000000", &[wide]);
    assert_eq!((rc, ifindex(&p), p[48..52].to_vec()), (0, 2, vec![0; 4]));
    let (rc, p) = fib_probe("fib-table", "ffffffff090000006400000000000000", &[wide]);
    assert_eq!((rc, p[48..52].to_vec()), (4, vec![0; 4]));
    // tot_len 1600 > MTU 1500.
    let (rc, p) = fib_probe("fib-frag", "ffffffff000000000000000040060000", &[wide]);
    assert_eq!((rc, mtu(&p), ifindex(&p)), (8, 1500, 1));
    assert_eq!(
        fib_probe("fib-flag", "ffffffff200000000000000000000000", &[wide]).0,
        -22
    );
}
