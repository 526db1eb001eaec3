//! Bad input to the `onic` tool, as a hostile tester would give it: every numeric option out of
//! its range, combinations that need more memory than any machine, broken captures, an output
//! directory that cannot be written, a reader that goes away. Each is refused up front with a
//! message that says what was checked, never a panic, never a run that does not end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `onic ARGS`; returns (success, stdout, stderr), and fails the test on a panic or a run
/// longer than a minute (every case here must be refused at once), killing such a run.
fn onic(args: &[&str]) -> (bool, String, String) {
    use std::io::Read;
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run onic");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            String::from_utf8_lossy(&b).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for onic") {
            break st;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} took more than a minute (killed)");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    (status.success(), stdout, stderr)
}

/// `onic ARGS` must fail with a one-line message starting `onic: ` and containing `want`.
fn refused(args: &[&str], want: &str) {
    let (ok, out, err) = onic(args);
    assert!(!ok, "{args:?} should be refused:\n{out}");
    assert!(err.starts_with("onic: "), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: expected {want:?} in:\n{err}");
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("bad_inputs")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn numeric_options_are_range_checked_up_front() {
    for (args, want) in [
        (
            &["run", "--tick-ns", "18446744073709551615"][..],
            "--tick-ns 18446744073709551615: outside 1..=1000000000",
        ),
        (&["run", "--tick-ns", "0"], "--tick-ns 0: outside"),
        (
            &["run", "--seconds", "1e30"],
            "--seconds 1000000000000000000000000000000: outside",
        ),
        (&["run", "--seconds", "inf"], "--seconds inf: outside"),
        (&["run", "--seconds", "NaN"], "--seconds NaN: outside"),
        (&["run", "--seconds=-1"], "--seconds -1: outside"),
        (
            &["run", "--rate-pps", "1e-9"],
            "--rate-pps 0.000000001: outside 1..=",
        ),
        (&["run", "--rate-pps", "inf"], "--rate-pps inf: outside"),
        (
            &["run", "--rate-pps", "1", "--packets", "200000"],
            "take 2.000e11 ticks",
        ),
        (&["run", "--packets", "0"], "--packets 0: outside 1..="),
        (
            &["run", "--packets", "18446744073709551615"],
            "--packets 18446744073709551615: outside",
        ),
        (&["run", "--budget", "0"], "--budget 0: outside 1..=16384"),
        (&["run", "--flows", "0"], "--flows 0: outside 1..=65535"),
        (&["run", "--flows", "70000"], "--flows 70000: outside"),
        (&["run", "--queues", "22"], "--queues 22: outside 1..=21"),
        (&["run", "--queues", "0"], "--queues 0: outside"),
        (&["run", "--ring", "1000"], "--ring 1000: not a size"),
        (
            // A replay drives the kernel module's port: four rings per queue index, three of
            // them from the function's 64 H2C queues.
            &["run", "--xdp", "pass", "--queues", "22"],
            "--queues 22: outside 1..=21",
        ),
        (&["run", "--xdp", "pass", "--frames", "0"], "--frames 0: outside"),
        (
            &["run", "--xdp", "pass", "--frames", "18446744073709551615"],
            "--frames 18446744073709551615: outside",
        ),
        (
            &["pcap-sample", "/dev/null", "--frames", "0"],
            "--frames 0: outside",
        ),
        (
            &["rss", "spread", "--queues", "65"],
            "--queues 65: outside 1..=64",
        ),
        (
            &["rss", "spread", "--queues", "65535"],
            "--queues 65535: outside 1..=64",
        ),
        (&["rss", "spread", "--flows", "0"], "--flows 0: outside 1..="),
        (
            &["rss", "spread", "--flows", "4294967295"],
            "--flows 4294967295: outside",
        ),
        (&["bench", "--reps", "0"], "--reps 0: outside 1..=1000"),
        (
            &["bench", "--rep-ms", "18446744073709551615"],
            "--rep-ms 18446744073709551615: outside",
        ),
    ] {
        refused(args, want);
    }
}

#[test]
fn ring_addresses_are_reported_for_what_is_checked() {
    refused(
        &["trace", "tx-init", "--ring", "0x10000010"],
        "ring address 0x10000010 is not aligned to 4 KiB",
    );
    // Rings whose end lies past 2^64.
    refused(
        &["trace", "tx-init", "--ring", "0xFFFFFFFFFFFFF000"],
        "ring at 0xfffffffffffff000 of 65536 bytes ends past 2^64",
    );
    refused(
        &["trace", "rx-init", "--cmpt-ring", "0xFFFFFFFFFFFFF000"],
        "ring at 0xfffffffffffff000 of 8192 bytes ends past 2^64",
    );
}

#[test]
fn captures_are_read_by_one_reader_with_one_set_of_messages() {
    let d = scratch("captures");
    let pcapng = d.join("x.pcapng");
    std::fs::write(
        &pcapng,
        [0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a].repeat(3),
    )
    .unwrap();
    let mut zero_snaplen = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    zero_snaplen.extend_from_slice(&[0; 12]);
    zero_snaplen.extend_from_slice(&1u32.to_le_bytes());
    let mut too_long = zero_snaplen.clone();
    too_long[16..20].copy_from_slice(&64u32.to_le_bytes());
    for f in [&mut zero_snaplen, &mut too_long] {
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&100u32.to_le_bytes());
        f.extend_from_slice(&100u32.to_le_bytes());
        f.extend_from_slice(&[0x11; 100]);
    }
    let zero = d.join("zero.pcap");
    let long = d.join("long.pcap");
    std::fs::write(&zero, &zero_snaplen).unwrap();
    std::fs::write(&long, &too_long).unwrap();
    let out_dir = d.join("out");
    for (file, want) in [
        (
            &pcapng,
            "a pcapng file; only classic pcap is read (convert it with `editcap -F pcap IN OUT`)",
        ),
        (
            &long,
            "record 1 at byte 24: captured length 100 is above the snapshot length 64",
        ),
    ] {
        let f = file.to_str().unwrap();
        let msg = format!("{f}: {want}");
        refused(&["rss", "spread", "--pcap", f], &msg);
        refused(
            &["run", "--pcap", f, "--out-dir", out_dir.to_str().unwrap()],
            &msg,
        );
    }
    // A snapshot length of 0 means "not set": the record is read, by both subcommands.
    let z = zero.to_str().unwrap();
    let (ok, out, err) = onic(&["rss", "spread", "--pcap", z]);
    assert!(ok && out.contains("1 frames from"), "{out}{err}");
    let (ok, out, err) = onic(&["run", "--pcap", z, "--out-dir", out_dir.to_str().unwrap()]);
    assert!(ok && out.contains("replayed 1 frames"), "{out}{err}");
}

#[test]
fn an_unwritable_output_directory_is_found_before_the_replay() {
    let d = scratch("outdir");
    let file = d.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let bad = file.join("out");
    let (ok, out, err) = onic(&["run", "--xdp", "pass", "--out-dir", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.starts_with("onic: --out-dir "), "{err}");
    assert!(!out.contains("replayed"), "the replay ran first:\n{out}");
}

#[test]
fn a_write_failure_says_write() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    refused(
        &["pcap-sample", "/dev/full", "--frames", "10"],
        "/dev/full: cannot write:",
    );
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly() {
    // `onic run ... | head -1`: read one line, close the pipe.
    for args in [
        &["run", "--packets", "2000", "--progress-ms", "0"][..],
        &["run", "--xdp", "pass", "--frames", "200", "--out-dir"],
        &["trace", "init"],
        // Its second line was printed with `println!`, which panics on a closed pipe.
        &["bench", "rss", "--reps", "1", "--rep-ms", "1"],
    ] {
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        if args.last().is_some_and(|a| a == "--out-dir") {
            args.push(scratch("pipe").to_str().unwrap().to_string());
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_onic"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty());
        // The reader is gone: the stdout handle was dropped with the BufReader.
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}:\n{err}");
        assert!(out.status.success(), "{args:?}: {:?}\n{err}", out.status);
    }
}

/// Every line of the tool goes through `onic_cli::out` (which survives a closed pipe); a bare
/// `println!`/`print!`/`eprintln!`/`eprint!`/`dbg!` anywhere in the tool's code panics once its
/// reader has gone. Comment lines (documentation that names the macros) are skipped.
#[test]
fn no_output_bypasses_the_pipe_safe_writer() {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let code = line.trim_start();
                    if code.starts_with("//") {
                        continue;
                    }
                    for mac in ["println!", "print!", "eprintln!", "eprint!", "dbg!"] {
                        let hit = code.match_indices(mac).any(|(at, _)| {
                            // `outln!`, `errout!`... end in the same letters: a hit must start a
                            // word.
                            at == 0
                                || !code.as_bytes()[at - 1].is_ascii_alphanumeric()
                                    && code.as_bytes()[at - 1] != b'_'
                        });
                        if hit {
                            found.push(format!("{}:{}: {line}", path.display(), n + 1));
                        }
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut found);
    assert!(
        found.is_empty(),
        "output that panics on a closed pipe:\n{}",
        found.join("\n")
    );
}

/// `bpf/objects/<name>`: the engine's prebuilt objects.
fn bpf_object(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bpf/objects")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn instruction_budgets_are_range_checked_and_capped_overall() {
    let faults = bpf_object("faults.o");
    let out = scratch("insn");
    let out = out.to_str().unwrap();
    let forever = ["run", "--xdp-obj", &faults, "--sec", "forever", "--out-dir", out];
    let with =
        |extra: &[&str]| -> Vec<String> { forever.iter().chain(extra).map(|s| s.to_string()).collect() };
    for (extra, want) in [
        (
            &["--frames", "1", "--insn-budget", "18446744073709551615"][..],
            "--insn-budget 18446744073709551615: outside 1..=100000000",
        ),
        (
            &["--frames", "1", "--insn-budget", "0"],
            "--insn-budget 0: outside 1..=",
        ),
        (
            &["--frames", "1", "--insn-total", "0"],
            "--insn-total 0: outside 1..=",
        ),
        // Three runs of a million instructions reach the cap: the run stops with a message.
        (
            &["--frames", "300", "--insn-total", "3000000"],
            "executed 3000000 instructions in 3 runs and reached --insn-total 3000000",
        ),
    ] {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, want);
    }
    // A long run says how far it got, on stderr, also when stderr is no terminal.
    let args = with(&["--frames", "20", "--progress-ms", "1"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, _, err) = onic(&args);
    assert!(ok, "{err}");
    assert!(
        err.contains("progress: ") && err.contains("program instructions"),
        "no progress line:\n{err}"
    );
}

#[test]
fn options_a_replay_would_ignore_are_refused() {
    refused(
        &["run", "--xdp", "pass", "--direction", "both"],
        "--direction both is for traffic mode",
    );
    refused(
        &["run", "--pcap", "x.pcap", "--direction", "1to0"],
        "--direction 1to0 is for traffic mode",
    );
}

/// Runs `onic ARGS` with its address space limited to 512 MiB (`ulimit -v`): a whole-file read of
/// a large or endless input dies there instead of taking the machine's memory.
fn onic_in_512m(args: &[&str]) -> (bool, String, String) {
    let mut sh = vec![
        "-c",
        "ulimit -v 524288 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_onic"),
    ];
    sh.extend_from_slice(args);
    let out = Command::new("sh").args(&sh).output().expect("run sh");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn large_and_endless_inputs_are_read_with_a_bound() {
    let d = scratch("bounded");
    // Sparse files: 4 GiB of zeros as a capture, 2 GiB as an object (no disk space used).
    let big_pcap = d.join("big.pcap");
    let big_obj = d.join("big.o");
    std::fs::File::create(&big_pcap)
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    std::fs::File::create(&big_obj).unwrap().set_len(2 << 30).unwrap();
    let out_dir = d.join("out");
    let out = out_dir.to_str().unwrap();
    let (p, o) = (big_pcap.to_str().unwrap(), big_obj.to_str().unwrap());
    let not_pcap = "not a pcap file (magic number 0x00000000";
    let mut cases = vec![
        (vec!["rss", "spread", "--pcap", p], format!("{p}: {not_pcap}")),
        (
            vec!["run", "--pcap", p, "--out-dir", out],
            format!("{p}: {not_pcap}"),
        ),
        (
            vec!["run", "--xdp-obj", o, "--out-dir", out],
            format!("{o}: larger than 16777216 bytes, the most an XDP object may be"),
        ),
    ];
    if Path::new("/dev/zero").exists() {
        cases.push((
            vec!["run", "--pcap", "/dev/zero", "--out-dir", out],
            format!("/dev/zero: {not_pcap}"),
        ));
        cases.push((
            vec!["run", "--xdp-obj", "/dev/zero", "--out-dir", out],
            "/dev/zero: larger than 16777216 bytes".to_string(),
        ));
    }
    for (args, want) in cases {
        let start = Instant::now();
        let (ok, _, err) = onic_in_512m(&args);
        assert!(
            !ok && err.starts_with("onic: ") && err.contains(&want),
            "{args:?}: {err}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{args:?}: {:?}",
            start.elapsed()
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Runs `onic ARGS` with files limited to 64 KiB (`ulimit -f`, SIGXFSZ ignored): a write past the
/// limit fails with "File too large", as on a full file system.
fn onic_with_small_files(args: &[&str]) -> (bool, String, String) {
    let mut sh = vec![
        "-c",
        "trap '' XFSZ && ulimit -f 128 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_onic"),
    ];
    sh.extend_from_slice(args);
    let out = Command::new("sh").args(&sh).output().expect("run sh");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names in `dir`.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_failed_write_leaves_no_partial_file() {
    let d = scratch("partial");
    let input = d.join("in.pcap");
    let (ok, _, err) = onic(&["pcap-sample", input.to_str().unwrap(), "--frames", "2000"]);
    assert!(ok, "{err}");
    // pcap-sample: no file at all.
    let gen_dir = d.join("gen");
    std::fs::create_dir_all(&gen_dir).unwrap();
    let target = gen_dir.join("sample.pcap");
    let (ok, _, err) = onic_with_small_files(&["pcap-sample", target.to_str().unwrap(), "--frames", "2000"]);
    assert!(!ok && err.contains("cannot write"), "{err}");
    assert_eq!(names(&gen_dir), Vec::<String>::new());
    // A replay: its captures are written as it goes and appear together at the end, so none is
    // there, and no temporary file is left.
    let out_dir = d.join("out");
    let (ok, _, err) = onic_with_small_files(&[
        "run",
        "--pcap",
        input.to_str().unwrap(),
        "--out-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("pass.pcap: cannot write"), "{err}");
    assert_eq!(names(&out_dir), Vec::<String>::new());
    // An existing capture is replaced only by a complete one.
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("pass.pcap"), b"earlier").unwrap();
    let (ok, _, _) = onic_with_small_files(&[
        "run",
        "--pcap",
        input.to_str().unwrap(),
        "--out-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert_eq!(std::fs::read(out_dir.join("pass.pcap")).unwrap(), b"earlier");
    assert_eq!(names(&out_dir), ["pass.pcap"]);
}

/// `legacy.o` with its map turned into an array of `entries` one-byte values (the legacy map
/// definition is five little-endian words at byte 0xa8: type, key size, value size, entries,
/// flags).
fn legacy_with_entries(dir: &Path, entries: u32) -> PathBuf {
    let mut obj = std::fs::read(bpf_object("legacy.o")).unwrap();
    let def = 0xa8;
    assert_eq!(
        obj[def..def + 16],
        [2, 0, 0, 0, 4, 0, 0, 0, 8, 0, 0, 0, 64, 0, 0, 0]
    );
    obj[def + 8..def + 12].copy_from_slice(&1u32.to_le_bytes());
    obj[def + 12..def + 16].copy_from_slice(&entries.to_le_bytes());
    let path = dir.join(format!("array{entries}.o"));
    std::fs::write(&path, obj).unwrap();
    path
}

#[test]
fn a_map_dump_that_could_not_be_handled_is_refused_before_the_run() {
    let d = scratch("dump");
    let out = d.join("out");
    let json = d.join("maps.json");
    // 33 million one-byte values: 33 MB of map (inside the 64 MiB the maps may take), over a
    // gigabyte as JSON.
    let obj = legacy_with_entries(&d, 33_000_000);
    let (o, j, out) = (
        obj.to_str().unwrap(),
        json.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    for dump in [&["--dump-maps", j][..], &["--dump-maps"]] {
        let mut args = vec!["run", "--xdp-obj", o, "--frames", "10", "--out-dir", out];
        args.extend_from_slice(dump);
        let start = Instant::now();
        let (ok, stdout, err) = onic_in_512m(&args);
        assert!(
            !ok && err.contains("--dump-maps: the maps could take up to"),
            "{err}"
        );
        assert!(!stdout.contains("replayed"), "the replay ran first:\n{stdout}");
        assert!(start.elapsed() < Duration::from_secs(20));
    }
    assert!(!json.exists());
    // A dump within the bound is streamed: 100000 entries, every one in the file.
    let obj = legacy_with_entries(&d, 100_000);
    let (ok, _, err) = onic_in_512m(&[
        "run",
        "--xdp-obj",
        obj.to_str().unwrap(),
        "--frames",
        "10",
        "--out-dir",
        out,
        "--dump-maps",
        j,
    ]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(text.matches("{\"key\": ").count(), 100_000);
    assert!(text.ends_with("]}\n]}\n"));
}

#[test]
fn where_results_go_is_checked_before_the_work() {
    let d = scratch("before");
    let file = d.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let plot = d.join("plots");
    let p = plot.to_str().unwrap();
    let bad_utf8 = d.join("peers.bin");
    std::fs::write(&bad_utf8, [b'a', 0xff, 0xfe]).unwrap();
    // Each would run every benchmark first (minutes): refused at once.
    let bench = |extra: &[&str]| -> Vec<String> {
        ["bench", "--reps", "1000", "--rep-ms", "60000"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    for (extra, want) in [
        (&["--plot", f][..], format!("--plot {f}: not a directory")),
        (
            &["--plot", p, "--peers", "/nonexistent/peers.txt"],
            "--peers /nonexistent/peers.txt: cannot read".to_string(),
        ),
        (
            &["--plot", p, "--peers", bad_utf8.to_str().unwrap()],
            format!("--peers {}: not UTF-8 text", bad_utf8.display()),
        ),
    ] {
        let args = bench(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, &want);
    }
    // A read-only capture in a writable output directory.
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let pass = out.join("pass.pcap");
    std::fs::write(&pass, b"keep").unwrap();
    let mut perm = std::fs::metadata(&pass).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(&pass, perm).unwrap();
    // Root may write a read-only file: then there is nothing to refuse.
    if std::fs::OpenOptions::new().write(true).open(&pass).is_err() {
        let (ok, stdout, err) = onic(&["run", "--xdp", "pass", "--out-dir", out.to_str().unwrap()]);
        assert!(
            !ok && err.contains("pass.pcap: exists and cannot be written"),
            "{err}"
        );
        assert!(!stdout.contains("replayed"), "the replay ran first:\n{stdout}");
    }
    // A directory where an output file should be.
    let out2 = d.join("out2");
    std::fs::create_dir_all(out2.join("drop.pcap")).unwrap();
    let (ok, stdout, err) = onic(&["run", "--xdp", "pass", "--out-dir", out2.to_str().unwrap()]);
    assert!(
        !ok && err.contains("drop.pcap: is a directory, not a file"),
        "{err}"
    );
    assert!(!stdout.contains("replayed"), "the replay ran first:\n{stdout}");
}

#[test]
fn messages_say_what_is_wrong() {
    if Path::new("/proc/self").exists() {
        refused(
            &["run", "--xdp", "pass", "--out-dir", "/proc/"],
            "--out-dir /proc/: no file can be created in directory /proc/ (its file system refuses new files",
        );
    }
    refused(
        &["trace", "rss-set", "--hfunc", "xor"],
        "--hfunc xor: not a hash function (toeplitz, no-change, or a function number 0..=255)",
    );
    let redirect = bpf_object("xdp_redirect_map.o");
    let out = scratch("msg-out");
    refused(
        &[
            "run",
            "--xdp-obj",
            &redirect,
            "--sec",
            "xdp",
            "--map",
            "tx_port:64=2",
            "--out-dir",
            out.to_str().unwrap(),
        ],
        "--map tx_port:64=2: map tx_port: key 64 is outside the map's 4 entries (0..=3) (E2BIG)",
    );
    // An empty capture: no "-100.0%" against the expected share.
    let d = scratch("empty");
    let empty = d.join("empty.pcap");
    let mut h = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&65535u32.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    std::fs::write(&empty, h).unwrap();
    let (ok, out, err) = onic(&["rss", "spread", "--pcap", empty.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(!out.contains("-100.0%"), "{out}");
    assert!(
        out.contains("0 frames from") && out.contains("no frames"),
        "{out}"
    );
}
