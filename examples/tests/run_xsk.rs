//! `onic run --xsk MODE` as a user runs it: AF_XDP zero copy on one queue of the model, in each
//! mode with 4 KiB and with 2 KiB chunks, with the printed counts checked against each other and the UMEM census against the
//! UMEM's size; bad options are refused with a message, not a panic.

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

/// The numbers after each of `keys` on the line starting with `prefix`.
fn fields(out: &str, prefix: &str, keys: &[&str]) -> Vec<u64> {
    let line = out
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    keys.iter()
        .map(|k| {
            let i = words
                .iter()
                .position(|w| w == k)
                .unwrap_or_else(|| panic!("no {k:?} in {line:?}"));
            words[i + 1].trim_end_matches([',', ';']).parse().unwrap()
        })
        .collect()
}

fn xsk(mode: &str, frames: u64, chunk_size: u32) -> Vec<u64> {
    let n = frames.to_string();
    let size = chunk_size.to_string();
    let args = [
        "run",
        "--xsk",
        mode,
        "--xsk-frames",
        &n,
        "--queues",
        "3",
        "--xsk-queue",
        "2",
        "--xsk-chunks",
        "512",
        "--xsk-chunk-size",
        &size,
        "--sizes",
        "64,300,1518",
    ];
    let (ok, out, err) = onic(&args);
    assert!(ok, "onic run --xsk {mode} failed: {err}\n{out}");
    assert!(out.contains("xsk: ok"), "{out}");
    assert!(out.contains(&format!("chunks of {chunk_size} bytes")), "{out}");
    // Every chunk is somewhere the census can name: the UMEM's 512.
    let umem = fields(&out, "umem:", &["umem:"]);
    assert_eq!(umem, [512], "{out}");
    fields(&out, "xsk: sent", &["sent", "rx", "tx", "egress", "completed"])
}

#[test]
fn rxdrop_receives_every_frame_into_the_umem() {
    assert_eq!(xsk("rxdrop", 3000, 4096), [3000, 3000, 0, 0, 0]);
}

#[test]
fn txonly_sends_every_frame_from_the_umem_and_completes_it() {
    assert_eq!(xsk("txonly", 3000, 4096), [0, 0, 3000, 3000, 3000]);
}

#[test]
fn l2fwd_echoes_every_frame_from_the_chunk_it_arrived_in() {
    assert_eq!(xsk("l2fwd", 3000, 4096), [3000, 3000, 3000, 3000, 3000]);
}

#[test]
fn rxdrop_receives_every_frame_into_2k_chunks() {
    assert_eq!(xsk("rxdrop", 3000, 2048), [3000, 3000, 0, 0, 0]);
}

#[test]
fn txonly_sends_every_frame_from_2k_chunks_and_completes_it() {
    assert_eq!(xsk("txonly", 3000, 2048), [0, 0, 3000, 3000, 3000]);
}

#[test]
fn l2fwd_echoes_every_frame_from_the_2k_chunk_it_arrived_in() {
    assert_eq!(xsk("l2fwd", 3000, 2048), [3000, 3000, 3000, 3000, 3000]);
}

#[test]
fn bad_xsk_options_are_refused() {
    for args in [
        &["run", "--xsk", "rxdrop", "--queues", "2", "--xsk-queue", "2"][..],
        &["run", "--xsk", "txonly", "--xsk-chunks", "10"],
        &["run", "--xsk", "l2fwd", "--xsk-frames", "0"],
        &["run", "--xsk", "l2fwd", "--xsk-batch", "0"],
        &["run", "--xsk", "rxdrop", "--xdp", "drop"],
        &["run", "--xsk", "rxdrop", "--xsk-chunk-size", "3000"],
        &["run", "--xsk", "txonly", "--xsk-chunk-size", "1024"],
        &["run", "--xsk", "l2fwd", "--xsk-chunk-size", "8192"],
    ] {
        let (ok, _, err) = onic(args);
        assert!(!ok && err.starts_with("onic: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
