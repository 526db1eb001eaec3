//! The crate's own checks: the text helpers everywhere; against the host kernel where libbpf is
//! installed and bpf() is permitted (else those say so and pass), on the repository's prebuilt
//! `bpf/objects/kernel_refuses.o` and `ringbuf_records.o`.

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::*;

#[test]
fn last_lines_keeps_the_last_non_empty_lines_and_counts_the_rest() {
    let text = "a\n\n  b  \n \t\nc\t\nd\n";
    let l = last_lines(text, 2);
    assert_eq!(l.before, 2);
    assert_eq!(l.lines, ["c", "d"]);
    assert_eq!(last_lines(text, 3).one_line(), "b | c | d");
    let all = last_lines(text, 10);
    assert_eq!((all.before, all.lines), (0, vec!["a", "  b", "c", "d"]));
    assert_eq!(last_lines("", 2).one_line(), "");
    assert_eq!(last_lines("x\n", 0).before, 1);
}

#[test]
fn tail_slots_and_unsized_entries() {
    assert_eq!(tail_slot("classifier_3"), Some(3));
    assert_eq!(tail_slot("classifier_"), None);
    assert_eq!(tail_slot("classifier_x"), None);
    assert_eq!(tail_slot("entry"), None);
    assert_eq!(unsized_entries(4), 256);
    assert_eq!(unsized_entries(usize::MAX / 32), u32::MAX);
}

#[test]
fn a_refusal_gives_the_verifier_s_words_or_else_libbpf_s() {
    let mut r = Refusal {
        errno: 13,
        verifier_log:
            "0: (61) r2 = *(u32 *)(r1 +20)\ninvalid bpf_context access off=20 size=4\nprocessed 1 insns\n"
                .into(),
        said: Printed::default(),
    };
    assert_eq!(
        r.to_string(),
        "errno 13: invalid bpf_context access off=20 size=4 | processed 1 insns"
    );
    r.verifier_log = " \n".into();
    assert_eq!(r.to_string(), "errno 13: ");
    assert_eq!(r.reasons(PrintLevel::Warn), "");
}

#[test]
fn a_negative_descriptor_is_the_kernel_s_errno() {
    let e = owned_fd(-libc::EPERM).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
    let msg = Error::NotPermitted(e).to_string();
    assert!(
        msg.starts_with("bpf() is not permitted here (Operation not permitted"),
        "{msg}"
    );
}

/// The library and bpf(), or why the host checks cannot run.
fn host() -> Option<Lib> {
    let lib = match Lib::open() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("SKIPPED the host kernel's side: {e}");
            return None;
        }
    };
    if let Err(e) = lib.probe() {
        eprintln!("SKIPPED the host kernel's side: {e}");
        return None;
    }
    Some(lib)
}

fn object() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bpf/objects/kernel_refuses.o")
}

fn verify(func: &str) -> LoadOptions<'_> {
    LoadOptions {
        func,
        as_xdp: false,
        tail_calls: false,
        inner_maps: false,
        unsized_entries: 4,
        log: VerifierLog::Stats,
    }
}

#[test]
fn the_kernel_refuses_and_loads_what_it_should_with_its_words() {
    let Some(lib) = host() else { return };
    let progs = lib.programs(&object()).unwrap();
    let egress = progs.iter().find(|p| p.section == "xdp/egress").unwrap();
    assert_eq!(egress.name, "read_egress");
    let Err(Error::Refused(r)) = lib.load(&object(), &verify("read_egress")) else {
        panic!("the kernel loaded read_egress");
    };
    assert_eq!(r.errno, libc::EACCES);
    assert!(
        r.verifier_log
            .contains("invalid bpf_context access off=20 size=4"),
        "{}",
        r.verifier_log
    );
    assert!(r.to_string().starts_with("errno 13: "), "{r}");
    // The packet handed to helpers without packet access (the engine's static check refuses them
    // with these words too: bpf/tests/verify.rs).
    for func in [
        "pkt_helper",
        "pkt_perf",
        "pkt_printk",
        "pkt_load",
        "pkt_store",
        "pkt_fib",
        "pkt_mtu",
    ] {
        let Err(Error::Refused(r)) = lib.load(&object(), &verify(func)) else {
            panic!("the kernel loaded {func}");
        };
        assert!(
            r.verifier_log
                .contains("helper access to the packet is not allowed"),
            "{func}: {}",
            r.verifier_log
        );
    }
    // The map helpers and bpf_csum_diff may read the packet.
    lib.load(&object(), &verify("pkt_allowed")).unwrap();
    // A packet read beyond what a comparison with data_end proved, with no comparison, and
    // through a pointer bpf_xdp_adjust_head made a number (bpf/tests/verify.rs: the engine's
    // words are these).
    for (func, words) in [
        (
            "pkt_past",
            "invalid access to packet, off=64 size=1, R2(id=0,off=64,r=64)\nR2 offset is outside of the packet",
        ),
        (
            "pkt_unchecked",
            "invalid access to packet, off=12 size=1, R1(id=0,off=12,r=0)\nR1 offset is outside of the packet",
        ),
        ("pkt_adjusted", "R6 invalid mem access 'scalar'"),
        // Where the pointer lies past the end, the kernel says only this.
        ("pkt_gt_bad", "R2 offset is outside of the packet"),
        ("end_ge_bad", "R2 offset is outside of the packet"),
    ] {
        let Err(Error::Refused(r)) = lib.load(&object(), &verify(func)) else {
            panic!("the kernel loaded {func}");
        };
        let log = &r.verifier_log;
        assert!(log.contains(words), "{func}: {log:?}");
        assert!(
            !func.ends_with("_bad") || !log.contains("invalid access to packet"),
            "{func}: {log:?}"
        );
    }
    // Each form of the comparison the kernel matches proves the bytes before data + 14.
    for func in [
        "pkt_gt", "pkt_ge", "pkt_lt", "pkt_le", "end_gt", "end_ge", "end_lt", "end_le",
    ] {
        lib.load(&object(), &verify(func))
            .unwrap_or_else(|e| panic!("{func}: {e}"));
    }
    let fine = lib.load(&object(), &verify("fine")).unwrap();
    assert!(fine.verifier_log.contains("processed"), "{}", fine.verifier_log);
    let run = fine.test_run(&[0u8; 64]).unwrap();
    assert_eq!((run.retval, run.frame.len(), run.meta.len()), (2, 64, 0));
    let counts = fine.maps.iter().find(|m| m.name == "counts").unwrap();
    assert_eq!((counts.key_size, counts.value_size), (4, 4));
    assert!(fine.entries(counts, lib.possible_cpus()).is_empty());
}

#[test]
fn bad_paths_objects_and_names_are_errors() {
    let Some(lib) = host() else { return };
    let no = lib.load(&object(), &verify("no_such_function"));
    assert!(matches!(&no, Err(Error::NoProgram(f)) if f == "no_such_function"));
    let not_elf = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let e = lib.programs(&not_elf).unwrap_err();
    assert!(matches!(e, Error::Open(..)), "{e}");
    assert!(
        e.to_string().starts_with("libbpf cannot open the object ("),
        "{e}"
    );
    let nul = Path::new(std::ffi::OsStr::from_bytes(b"a\0b.o"));
    assert!(matches!(lib.programs(nul), Err(Error::BadPath(_))));
}

/// Set in the child [`probe_refused_to_an_unprivileged_user`] starts.
const CHILD: &str = "ONIC_LIBBPF_PROBE_CHILD";

/// In the child only: the probe's answer to a user without privileges.
#[test]
fn probe_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    match Lib::open().map(|l| l.probe()) {
        Ok(Err(e)) => println!("PROBE: {e}"),
        Ok(Ok(())) => println!("PROBE: permitted"),
        Err(e) => println!("PROBE: {e}"),
    }
}

/// The probe's error path for real: this test binary again, as `nobody`, where the kernel
/// refuses unprivileged bpf() (`kernel.unprivileged_bpf_disabled`); as root only.
#[test]
fn probe_refused_to_an_unprivileged_user() {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 || host().is_none() {
        eprintln!("SKIPPED: needs root and bpf()");
        return;
    }
    let disabled = std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled");
    if disabled.map_or(true, |d| d.trim() == "0") {
        eprintln!("SKIPPED: unprivileged bpf() is allowed here");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let child = std::process::Command::new(&exe)
        .args(["--exact", "tests::probe_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .uid(65534)
        .gid(65534)
        .output();
    // The binary may lie where `nobody` cannot reach it (a checkout under /root).
    let out = match child {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIPPED: {} cannot run as nobody: {e}", exe.display());
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("libbpf.so.1 cannot be opened") || !out.status.success() {
        eprintln!(
            "SKIPPED: the child could not run: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert!(
        text.contains("PROBE: bpf() is not permitted here (Operation not permitted"),
        "{text}"
    );
}

#[test]
fn ring_records_are_read_through_the_mmap_once_each_in_order() {
    let Some(lib) = host() else { return };
    let obj = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bpf/objects/ringbuf_records.o");
    let opts = LoadOptions {
        log: VerifierLog::OnFailure,
        ..verify("ringbuf_records")
    };
    let l = lib.load(&obj, &opts).unwrap();
    let ring = l.maps.iter().find(|m| m.name == "records").unwrap();
    assert_eq!(ring.max_entries, 4096);
    let frame: Vec<u8> = (0u8..61).collect();
    for _ in 0..2 {
        assert_eq!(l.test_run(&frame).unwrap().retval, 2);
    }
    let mut first = 61u32.to_le_bytes().to_vec();
    first.extend_from_slice(&frame[..20]);
    let copied = frame[6..13].to_vec();
    // The discarded record between them is skipped; the 7-byte one is padded to 8 in the ring.
    let want = vec![first.clone(), copied.clone(), first, copied];
    assert_eq!(l.ring_records(ring).unwrap(), want);
    assert!(l.ring_records(ring).unwrap().is_empty(), "read once");
    let even: Vec<u8> = (0u8..20).collect();
    l.test_run(&even).unwrap();
    let got = l.ring_records(ring).unwrap();
    assert_eq!((got.len(), got[1].clone()), (2, even[6..11].to_vec()));
    let not_a_ring = KMap {
        map_type: 2,
        ..ring.clone()
    };
    let e = l.ring_records(&not_a_ring).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
}
