//! The `onic trace` command as a user runs it.

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

fn is_trace_line(l: &str) -> bool {
    let f: Vec<&str> = l.split(' ').collect();
    f.len() == 4
        && (f[0] == "W" || f[0] == "R")
        && (f[1] == "0" || f[1] == "2")
        && [f[2], f[3]]
            .iter()
            .all(|h| h.len() == 10 && h.starts_with("0x") && h[2..].chars().all(|c| c.is_ascii_hexdigit()))
}

#[test]
fn init_prints_the_whole_bring_up_in_the_recording_format() {
    let (ok, out, err) = onic(&["trace", "init", "--pf", "0"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.iter().all(|l| is_trace_line(l)), "bad line in:\n{out}");
    // 2 FMAP commands (2 + 18 accesses), QCONF, 128 table entries, 71 CSR accesses, 2 × (1 version
    // read + 19 writes + 1 status read), 23 error-interrupt accesses.
    assert_eq!(lines.len(), 20 + 1 + 128 + 71 + 2 * 21 + 23);
    assert_eq!(lines[0], "W 0 0x00000844 0x00000018");
    assert_eq!(*lines.last().unwrap(), "W 0 0x00000b04 0x01009000");
}

#[test]
fn pf1_init_has_no_global_programming() {
    let (ok, out, _) = onic(&["trace", "init", "--pf", "1", "--queues", "4"]);
    assert!(ok);
    assert!(out.contains("W 2 0x00002000 0x00400004"));
    assert!(
        !out.lines().any(|l| l.starts_with("W 0 0x00000204")),
        "no ring-size table on PF1"
    );
}

#[test]
fn queue_scenarios_print_only_their_own_accesses() {
    let (ok, out, _) = onic(&[
        "trace",
        "tx-init",
        "--qid",
        "1",
        "--ring",
        "0x123456000",
        "--vector",
        "1",
    ]);
    assert!(ok);
    assert_eq!(out.lines().count(), 4 * 2 + 16);
    assert!(out.contains("W 0 0x00000808 0x0011000d"));
    let (ok, out, _) = onic(&["trace", "doorbell", "cmpt", "--qid", "3", "--index", "42"]);
    assert!(ok);
    assert_eq!(out, "W 0 0x0001803c 0x1d00002a\n");
}

#[test]
fn bad_settings_are_refused_with_a_clear_message() {
    let (ok, out, err) = onic(&["trace", "rx-init", "--buf-size-idx", "8"]);
    assert!(!ok);
    assert!(out.is_empty());
    assert!(err.contains("does not fit"), "{err}");
    let (ok, _, err) = onic(&["trace", "init", "--queues", "65"]);
    assert!(!ok);
    assert!(err.contains("queue count 65"), "{err}");
    let (ok, _, err) = onic(&["trace", "tx-init", "--ring-size-idx", "16"]);
    assert!(!ok);
    assert!(err.contains("ring-size index 16"), "{err}");
}

#[test]
fn help_lists_scenarios_and_presets() {
    let (ok, out, _) = onic(&["trace", "--help"]);
    assert!(ok);
    for word in [
        "init",
        "remove",
        "tx-init",
        "rx-init",
        "doorbell",
        "stats",
        "CORE_VERSION reads 0x301",
        "C2H_PFCH_CACHE_DEPTH reads 16",
    ] {
        assert!(out.contains(word), "--help lacks {word}:\n{out}");
    }
}

#[test]
fn rss_scenarios() {
    let key = "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa";
    let (ok, out, err) = onic(&["trace", "rss-set", "--key", key, "--hfunc", "toeplitz"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 10);
    assert_eq!(lines[0], "W 2 0x00001600 0xda565a6d");
    assert_eq!(lines[9], "W 2 0x00001624 0xfa01acbe");
    let (ok, out, _) = onic(&["trace", "rss-set", "--pf", "1", "--equal", "3"]);
    assert!(ok);
    assert_eq!(out.lines().count(), 128);
    assert!(out.starts_with("W 2 0x00002400 0x00000000\nW 2 0x00002404 0x00000001\nW 2 0x00002408 0x00000002\nW 2 0x0000240c 0x00000000\n"));
    let (ok, out, err) = onic(&["trace", "rss-set", "--default"]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 128);
    assert!(out.starts_with("W 2 0x00001400 0x00000000\nW 2 0x00001404 0x00000001\n"));
    let (ok, _, _) = onic(&["trace", "rss-set", "--default", "--equal", "2"]);
    assert!(!ok, "--default conflicts with --equal");
    let (ok, out, err) = onic(&["trace", "rss-set", "--equal", "9"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("equal"), "{err}");
    let (ok, out, _) = onic(&["trace", "rss-get"]);
    assert!(ok);
    assert_eq!(out.lines().count(), 138);
    assert!(out.lines().all(|l| l.starts_with("R 2 ")));
}
