//! `onic run` end to end: a capture with known frames goes through the model, the driver and a
//! built-in XDP program; tshark reads the output captures back.
//!
//! tshark (Debian package `tshark`) must be installed; `.ci/run` installs it. Without it the test
//! fails when `CI` is set and is skipped (with a message) elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};

/// An Ethernet/IPv4 frame from `src_mac` to `dst_mac` with protocol `proto` and ports.
fn frame(proto: u8, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xAA]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xBB]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&[10, 1, 2, 3]);
    f[30..34].copy_from_slice(&[10, 9, 8, 7]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    if proto == 17 {
        f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    } else {
        f[46] = 0x50;
    }
    f
}

/// The known input: three DNS queries, two other UDP datagrams, one TCP segment.
fn known_frames() -> Vec<Vec<u8>> {
    vec![
        frame(17, 40001, 53, 80),
        frame(17, 40002, 5000, 200),
        frame(17, 40003, 53, 90),
        frame(6, 33000, 443, 600),
        frame(17, 40004, 53, 100),
        frame(17, 40005, 5000, 1514),
    ]
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(file).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(
            Duration::from_millis(i as u64),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
}

/// Whether tshark runs; fails the test in CI when it does not.
fn have_tshark() -> bool {
    let ok = Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "tshark is not installed, and CI is set: this test must run in CI \
             (apt-get install -y --no-install-recommends tshark; .ci/run does it)"
        );
        eprintln!("SKIPPED: tshark is not installed (outside CI the pcap check is skipped)");
    }
    ok
}

/// `tshark -r file -T fields -e field`, one line per frame.
fn tshark_fields(file: &Path, field: &str) -> Vec<String> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-e", field])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark -r {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A fresh directory under the target dir for one scenario.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("run_pcap").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `onic run` on the known capture; returns the output directory and stdout.
fn onic_run(name: &str, args: &[&str]) -> (PathBuf, String) {
    let dir = scratch(name);
    let input = dir.join("in.pcap");
    write_pcap(&input, &known_frames());
    let out_dir = dir.join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .arg("run")
        .arg("--pcap")
        .arg(&input)
        .arg("--out-dir")
        .arg(&out_dir)
        .args(args)
        .output()
        .expect("run onic");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "onic run {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("page accounting: every page returned"),
        "{stdout}"
    );
    (out_dir, stdout)
}

#[test]
fn drop_udp_program_splits_the_capture_between_pass_and_drop() {
    if !have_tshark() {
        return;
    }
    let (out, stdout) = onic_run(
        "drop_udp",
        &["--xdp", "drop-udp", "--udp-port", "53", "--queues", "2"],
    );
    assert_eq!(
        tshark_fields(&out.join("drop.pcap"), "udp.dstport"),
        ["53", "53", "53"]
    );
    let mut passed = tshark_fields(&out.join("pass.pcap"), "udp.dstport");
    passed.sort();
    // The TCP segment has no UDP port: an empty field.
    assert_eq!(passed, ["", "5000", "5000"]);
    assert_eq!(
        tshark_fields(&out.join("pass.pcap"), "tcp.dstport")
            .iter()
            .filter(|p| *p == "443")
            .count(),
        1
    );
    assert!(tshark_fields(&out.join("tx-port0.pcap"), "frame.len").is_empty());
    assert!(tshark_fields(&out.join("tx-port1.pcap"), "frame.len").is_empty());
    // ethtool -S style statistics and the per-queue table are printed.
    assert!(stdout.contains("rx_xdp_drop: 3"), "{stdout}");
    assert!(stdout.contains("rx_xdp_pass: 3"), "{stdout}");
    assert!(stdout.contains("rss_share"), "{stdout}");
}

#[test]
fn tx_program_sends_every_frame_back_with_swapped_macs() {
    if !have_tshark() {
        return;
    }
    let (out, stdout) = onic_run("tx", &["--xdp", "tx", "--queues", "1"]);
    let src = tshark_fields(&out.join("tx-port0.pcap"), "eth.src");
    assert_eq!(src, vec!["02:00:00:00:00:aa"; 6]);
    let dst = tshark_fields(&out.join("tx-port0.pcap"), "eth.dst");
    assert_eq!(dst, vec!["02:00:00:00:00:bb"; 6]);
    let mut lens = tshark_fields(&out.join("tx-port0.pcap"), "frame.len");
    lens.sort_by_key(|l| l.parse::<u32>().unwrap());
    assert_eq!(lens, ["80", "90", "100", "200", "600", "1514"]);
    assert!(tshark_fields(&out.join("pass.pcap"), "frame.len").is_empty());
    assert!(stdout.contains("rx_xdp_tx: 6"), "{stdout}");
}

#[test]
fn redirect_program_sends_frames_out_of_the_other_port() {
    if !have_tshark() {
        return;
    }
    let (out, _) = onic_run("redirect", &["--xdp", "redirect", "--port", "1", "--queues", "1"]);
    let ports = tshark_fields(&out.join("tx-port0.pcap"), "udp.dstport");
    assert_eq!(ports.len(), 6);
    assert!(tshark_fields(&out.join("tx-port1.pcap"), "frame.len").is_empty());
    assert_eq!(ports.iter().filter(|p| *p == "53").count(), 3);
}

#[test]
fn without_a_program_the_os_receives_everything_unchanged() {
    if !have_tshark() {
        return;
    }
    let (out, _) = onic_run("none", &["--queues", "1"]);
    let src = tshark_fields(&out.join("pass.pcap"), "ip.src");
    assert_eq!(src, vec!["10.1.2.3"; 6]);
    assert!(tshark_fields(&out.join("drop.pcap"), "frame.len").is_empty());
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let dir = scratch("bad");
    let input = dir.join("in.pcap");
    write_pcap(&input, &known_frames());
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(["run", "--xdp", "nope", "--pcap"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown XDP program 'nope'"));
    let out = Command::new(env!("CARGO_BIN_EXE_onic"))
        .args(["run", "--pcap"])
        .arg(dir.join("missing.pcap"))
        .output()
        .unwrap();
    assert!(!out.status.success());
}
