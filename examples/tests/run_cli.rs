//! The `onic run` main job as a user runs it: short runs, with the printed counts checked against
//! each other.

use std::process::Command;

fn onic(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(args)
        .output()
        .expect("run onic");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn num(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// The rows of the throughput table: (direction, sent, received).
fn throughput(out: &str) -> Vec<(String, u64, u64)> {
    out.lines()
        .skip_while(|l| *l != "throughput")
        .skip(2)
        .take_while(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), num(f[1]), num(f[3]))
        })
        .collect()
}

/// The per-queue tables: for each, (title, per-queue rx_packets, per-queue tx_packets).
fn per_queue(out: &str) -> Vec<(String, Vec<u64>, Vec<u64>)> {
    let lines: Vec<&str> = out.lines().collect();
    let mut tables = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(title) = l.strip_prefix("per-queue: ") {
            let rows: Vec<Vec<&str>> = lines[i + 2..]
                .iter()
                .take_while(|r| r.trim_start().starts_with(|c: char| c.is_ascii_digit()))
                .map(|r| r.split_whitespace().collect())
                .collect();
            tables.push((
                title.to_string(),
                rows.iter().map(|r| num(r[1])).collect(),
                rows.iter().map(|r| num(r[9])).collect(),
            ));
        }
    }
    tables
}

/// The numbers of the `accounting:` line: sent, received, corrupt, driver drops, model drops.
fn accounting(out: &str) -> [u64; 5] {
    let l = out
        .lines()
        .find(|l| l.starts_with("accounting:"))
        .expect("accounting line");
    let n: Vec<u64> = l
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(num)
        .collect();
    [n[0], n[1], n[2], n[3], n[4]]
}

#[test]
fn both_directions_deliver_every_frame_and_the_tables_add_up() {
    let (ok, out, err) = onic(&[
        "run",
        "--packets",
        "3000",
        "--queues",
        "3",
        "--sizes",
        "64,300,1518",
        "--flows",
        "40",
        "--direction",
        "both",
        "--progress-ms",
        "0",
    ]);
    assert!(ok, "onic run failed:\n{out}\n{err}");
    let tp = throughput(&out);
    assert_eq!(tp.len(), 2, "{out}");
    for (dir, sent, received) in &tp {
        assert_eq!(*sent, 3000, "{dir}");
        assert_eq!(*received, 3000, "{dir}: a clean run loses nothing");
    }
    let tables = per_queue(&out);
    assert_eq!(tables.len(), 2);
    for (title, rx, tx) in &tables {
        assert_eq!(rx.len(), 3, "{title}");
        assert_eq!(rx.iter().sum::<u64>(), 3000, "{title}: per-queue RX adds up");
        assert_eq!(tx.iter().sum::<u64>(), 3000, "{title}: per-queue TX adds up");
        // 40 flows over 3 queues: RSS gives every queue some.
        assert!(rx.iter().all(|&n| n > 0), "{title}: {rx:?}");
    }
    assert_eq!(accounting(&out), [6000, 6000, 0, 0, 0]);
    assert!(out.contains("after teardown: 0 live pages, 0 mapped, 0 rings, 0 violations: OK"));
    assert!(out.lines().any(|l| l.starts_with("result: OK")), "{out}");
    // The CMAC counters, read through the driver, saw every frame leave and arrive.
    let cmac = |name: &str| -> Vec<u64> {
        let l = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing"));
        l.split_whitespace().skip(1).map(num).collect()
    };
    assert_eq!(cmac("stat_tx_total_good_pkts"), [3000, 3000]);
    assert_eq!(cmac("stat_rx_total_good_pkts"), [3000, 3000]);
}

#[test]
fn drops_for_lack_of_descriptors_are_accounted_for() {
    // One queue with 64-entry rings at 64-byte line rate cannot keep up: the model drops frames
    // for lack of descriptors, and the accounting still balances.
    let (ok, out, err) = onic(&[
        "run",
        "--packets",
        "5000",
        "--queues",
        "1",
        "--ring",
        "64",
        "--sizes",
        "64",
        "--progress-ms",
        "0",
    ]);
    assert!(ok, "onic run failed:\n{out}\n{err}");
    let [sent, received, corrupt, driver, model] = accounting(&out);
    assert_eq!(sent, 5000);
    assert_eq!(corrupt, 0);
    assert!(model > 0, "expected model drops:\n{out}");
    assert_eq!(sent, received + driver + model);
    assert!(out.lines().any(|l| l.starts_with("result: OK")));
}

#[test]
fn a_size_range_and_a_rate_run() {
    let (ok, out, err) = onic(&[
        "run",
        "--size-range",
        "64..1518",
        "--rate-pps",
        "2000000",
        "--seconds",
        "0.001",
        "--queues",
        "2",
        "--proto",
        "tcp",
        "--progress-ms",
        "0",
    ]);
    assert!(ok, "onic run failed:\n{out}\n{err}");
    // 2 Mpps for 1 ms of virtual time.
    assert_eq!(throughput(&out), [("0->1".to_string(), 2000, 2000)]);
}

#[test]
fn bad_arguments_are_refused() {
    for args in [
        &["run", "--sizes", "40"][..],
        &["run", "--size-range", "100..50"],
        &["run", "--ring", "1000"],
        &["run", "--queues", "65"],
    ] {
        let (ok, out, err) = onic(args);
        assert!(!ok, "{args:?} should fail:\n{out}");
        assert!(err.starts_with("onic: "), "{args:?}: {err}");
    }
}
