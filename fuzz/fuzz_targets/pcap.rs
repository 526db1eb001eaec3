//! The `onic` tool's capture reader on any bytes: it must never panic, and whatever it accepts
//! must be a capture: every record within the file and within the largest snapshot length, and
//! written back by the tool's writer it must read back to the same frames (cut to the writer's
//! snapshot length; timestamps to the microsecond the writer keeps).

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use onic_cli::pcap::{encode, parse, FILE_HEADER_LEN, MAX_SNAPLEN, RECORD_HEADER_LEN, WRITE_SNAPLEN};

fuzz_target!(|data: &[u8]| {
    let Ok(records) = parse(data) else { return };
    let bytes: usize = records.iter().map(|r| RECORD_HEADER_LEN + r.data.len()).sum();
    assert_eq!(
        FILE_HEADER_LEN + bytes,
        data.len(),
        "records must cover the file exactly"
    );
    assert!(records.iter().all(|r| r.data.len() <= MAX_SNAPLEN as usize));
    // Seconds beyond the 32-bit field cannot occur (they were read from one).
    let frames: Vec<(Duration, Vec<u8>)> = records.iter().map(|r| (r.ts, r.data.clone())).collect();
    let back = parse(&encode(&frames)).expect("what the writer writes, the reader reads");
    assert_eq!(back.len(), records.len());
    for (a, b) in records.iter().zip(&back) {
        assert_eq!(a.data[..a.data.len().min(WRITE_SNAPLEN as usize)], b.data[..]);
        assert_eq!(a.ts.as_secs(), b.ts.as_secs());
        assert_eq!(a.ts.subsec_micros(), b.ts.subsec_micros());
    }
});
