//! RSS state rules of ethtool (validation that leaves the state untouched) and the exact register
//! sequences of hardware.md §9.2 on the recording bus.

use std::string::ToString;
use std::vec;
use std::vec::Vec;

use onic_hal::recording::{Access, Recorder};
use onic_hal::{Bar, FunctionId, RegisterAccess};

use super::{read_back, read_key, read_table, write_key, write_table};
use crate::device::rss_control::{HashFunction, IndirectionTable, RssConfig, RssParts};
use crate::rss::{RssError, RssKey};

// ------------------------------------------------------------------------------------------------
// ethtool semantics and validation

fn pf(func: u8) -> FunctionId {
    FunctionId::new(func).unwrap()
}

fn snapshot(c: &RssConfig) -> RssConfig {
    *c
}

#[test]
fn probe_defaults() {
    let c = RssConfig::new(3).unwrap();
    assert_eq!(c.table(), &IndirectionTable::round_robin(3));
    assert_eq!(c.key(), &RssKey::DEFAULT);
    assert_eq!(
        c.pending,
        RssParts::TABLE,
        "default table written at probe, key left at reset value"
    );
    assert!(!c.table_user_set);
    assert_eq!(RssConfig::new(0), Err(RssError::NoQueues));
}

#[test]
fn set_table_key_and_both() {
    let mut c = RssConfig::new(4).unwrap();
    c.mark_programmed();
    let table: Vec<u16> = (0..128).map(|i| (i / 32) as u16).collect();
    assert_eq!(
        c.set(Some(&table), None, HashFunction::NoChange),
        Ok(RssParts::TABLE)
    );
    assert_eq!(c.table().entries()[..], table[..]);
    assert!(c.table_user_set);
    assert_eq!(
        c.set(None, Some(RssKey::MICROSOFT.as_bytes()), HashFunction::Toeplitz),
        Ok(RssParts::KEY)
    );
    assert_eq!(c.key(), &RssKey::MICROSOFT);
    assert_eq!(c.pending, RssParts::ALL);
    c.mark_programmed();
    let both = c.set(
        Some(&[1; 128]),
        Some(RssKey::DEFAULT.as_bytes()),
        HashFunction::NoChange,
    );
    assert_eq!(both, Ok(RssParts::ALL));
    assert_eq!(c.queue_for(0x1234_5678).get(), 1);
    // Nothing given: nothing changes, nothing pending.
    c.mark_programmed();
    assert_eq!(c.set(None, None, HashFunction::NoChange), Ok(RssParts::NONE));
    assert_eq!(c.pending, RssParts::NONE);
    // An empty table resets to the default, as indirection size 0 does in the ethtool ABI.
    assert_eq!(
        c.set(Some(&[]), None, HashFunction::NoChange),
        Ok(RssParts::TABLE)
    );
    assert_eq!(c.table(), &IndirectionTable::round_robin(4));
    assert!(!c.table_user_set);
}

#[test]
fn refused_requests_change_nothing() {
    let mut c = RssConfig::new(4).unwrap();
    c.set(
        Some(&[3; 128]),
        Some(RssKey::MICROSOFT.as_bytes()),
        HashFunction::NoChange,
    )
    .unwrap();
    c.mark_programmed();
    let before = snapshot(&c);
    let mut bad_table = [0u16; 128];
    bad_table[77] = 4;
    let key = RssKey::DEFAULT;
    let cases: Vec<(RssError, Result<RssParts, RssError>)> = vec![
        (
            RssError::QueueOutOfRange {
                index: 77,
                queue: 4,
                rx_queues: 4,
            },
            c.set(Some(&bad_table), Some(key.as_bytes()), HashFunction::NoChange),
        ),
        (
            RssError::TableLength { len: 127 },
            c.set(Some(&[0; 127]), None, HashFunction::NoChange),
        ),
        (
            RssError::TableLength { len: 256 },
            c.set(Some(&[0; 256]), None, HashFunction::NoChange),
        ),
        (
            RssError::KeyLength {
                len: 39,
                min: 40,
                max: 40,
            },
            c.set(Some(&[0; 128]), Some(&[0; 39]), HashFunction::NoChange),
        ),
        (
            RssError::KeyLength {
                len: 52,
                min: 40,
                max: 40,
            },
            c.set(None, Some(&[0; 52]), HashFunction::Toeplitz),
        ),
        // The hash function is checked first, even when table and key are also bad.
        (
            RssError::UnsupportedHashFunction(2),
            c.set(Some(&bad_table), Some(&[0; 3]), HashFunction::from_ethtool(2)),
        ),
        (
            RssError::UnsupportedHashFunction(4),
            c.set(Some(&[0; 128]), Some(key.as_bytes()), HashFunction::Other(4)),
        ),
        (RssError::EqualOutOfRange { n: 0, rx_queues: 4 }, c.equal(0)),
        (RssError::EqualOutOfRange { n: 5, rx_queues: 4 }, c.equal(5)),
        (RssError::WeightsAllZero, c.weights(&[0, 0, 0, 0])),
        (RssError::WeightsAllZero, c.weights(&[])),
        (RssError::WeightSumTooLarge { sum: 200 }, c.weights(&[100, 100])),
        (
            RssError::QueueOutOfRange {
                index: 64,
                queue: 4,
                rx_queues: 4,
            },
            c.weights(&[1, 0, 0, 0, 1]),
        ),
        (RssError::NoQueues, c.set_rx_queues(0)),
        (
            RssError::QueuesInUse {
                rx_queues: 3,
                max_entry: 3,
            },
            c.set_rx_queues(3),
        ),
    ];
    for (want, got) in cases {
        assert_eq!(got, Err(want));
        assert_eq!(c, before, "state changed after {want}");
    }
    // Error texts are readable.
    assert_eq!(
        RssError::QueueOutOfRange {
            index: 77,
            queue: 4,
            rx_queues: 4
        }
        .to_string(),
        "indirection entry 77 names queue 4, but there are only 4 RX queues"
    );
    assert_eq!(
        RssError::WeightsAllZero.to_string(),
        "at least one weight must be non-zero"
    );
}

#[test]
fn equal_and_weight_helpers() {
    let mut c = RssConfig::new(8).unwrap();
    assert_eq!(c.equal(3), Ok(RssParts::TABLE));
    assert_eq!(&c.table().entries()[..7], &[0, 1, 2, 0, 1, 2, 0]);
    assert!(c.table_user_set);
    assert_eq!(c.weights(&[1, 3]), Ok(RssParts::TABLE));
    assert_eq!(c.table().entries().iter().filter(|&&q| q == 0).count(), 32);
    assert_eq!(c.table().entries().iter().filter(|&&q| q == 1).count(), 96);
    // Trailing zero weights past the queue count are harmless, as in ethtool.
    assert_eq!(c.weights(&[1, 1, 0, 0, 0, 0, 0, 0, 0, 0]), Ok(RssParts::TABLE));
    assert_eq!(c.reset_table(), RssParts::TABLE);
    assert_eq!(c.table(), &IndirectionTable::round_robin(8));
}

#[test]
fn queue_count_changes() {
    let mut c = RssConfig::new(8).unwrap();
    c.mark_programmed();
    // Default table: follows the queue count.
    assert_eq!(c.set_rx_queues(2), Ok(RssParts::TABLE));
    assert_eq!(c.table(), &IndirectionTable::round_robin(2));
    // User table: kept, and must still fit.
    c.set_rx_queues(8).unwrap();
    c.equal(4).unwrap();
    c.mark_programmed();
    assert_eq!(c.set_rx_queues(4), Ok(RssParts::NONE));
    assert_eq!(c.rx_queues(), 4);
    assert_eq!(c.table(), &IndirectionTable::round_robin(4));
    assert_eq!(
        c.set_rx_queues(2),
        Err(RssError::QueuesInUse {
            rx_queues: 2,
            max_entry: 3
        })
    );
}

// ------------------------------------------------------------------------------------------------
// Programming and read-back on the recording bus

fn table_writes(base: u32, table: &IndirectionTable) -> Vec<Access> {
    (0..128)
        .map(|k| Access::write(Bar::Shell, base + 4 * k, u32::from(table.entries()[k as usize])))
        .collect()
}

fn key_writes(base: u32, key: &RssKey) -> Vec<Access> {
    key.to_register_words()
        .iter()
        .zip(0u32..)
        .map(|(&w, k)| Access::write(Bar::Shell, base + 4 * k, w))
        .collect()
}

#[test]
fn probe_programs_the_table_only() {
    let rec = Recorder::new();
    let shell = rec.window(Bar::Shell);
    let c = RssConfig::new(3).unwrap();
    assert_eq!(c.program(&shell, pf(0)), RssParts::TABLE);
    let log = rec.take_log();
    assert_eq!(log, table_writes(0x1400, &IndirectionTable::round_robin(3)));
    assert_eq!(log[0], Access::write(Bar::Shell, 0x1400, 0));
    assert_eq!(log[127], Access::write(Bar::Shell, 0x15FC, 127 % 3));
}

#[test]
fn key_example_of_spec_on_pf0() {
    let rec = Recorder::new();
    let shell = rec.window(Bar::Shell);
    let mut c = RssConfig::new(4).unwrap();
    c.mark_programmed();
    c.set(None, Some(RssKey::MICROSOFT.as_bytes()), HashFunction::Toeplitz)
        .unwrap();
    assert_eq!(c.program(&shell, pf(0)), RssParts::KEY);
    let log = rec.take_log();
    assert_eq!(log.len(), 10);
    assert_eq!(log[0], Access::write(Bar::Shell, 0x1600, 0xDA565A6D));
    assert_eq!(log[1], Access::write(Bar::Shell, 0x1604, 0xC20E5B25));
    assert_eq!(log[9], Access::write(Bar::Shell, 0x1624, 0xFA01ACBE));
    assert_eq!(log, key_writes(0x1600, &RssKey::MICROSOFT));
}

#[test]
fn both_parts_table_first_then_key_on_pf1() {
    let rec = Recorder::new();
    let shell = rec.window(Bar::Shell);
    let mut c = RssConfig::new(2).unwrap();
    c.mark_programmed();
    c.set(
        Some(&[1; 128]),
        Some(RssKey::MICROSOFT.as_bytes()),
        HashFunction::NoChange,
    )
    .unwrap();
    c.program(&shell, pf(1));
    let mut want = table_writes(0x2400, &super::IndirectionTable([1; 128]));
    want.extend(key_writes(0x2600, &RssKey::MICROSOFT));
    assert_eq!(rec.take_log(), want);
    // Nothing pending: nothing written.
    c.mark_programmed();
    assert_eq!(c.program(&shell, pf(1)), RssParts::NONE);
    assert!(rec.take_log().is_empty());
}

#[test]
fn read_back_masks_the_upper_half_and_reads_in_order() {
    let rec = Recorder::new();
    let shell = rec.window(Bar::Shell);
    for k in 0..128u32 {
        rec.poke(Bar::Shell, 0x1400 + 4 * k, 0xABCD_0000 | (k % 5));
    }
    for (k, w) in RssKey::MICROSOFT.to_register_words().iter().enumerate() {
        rec.poke(Bar::Shell, 0x1600 + 4 * k as u32, *w);
    }
    let (table, key) = read_back(&shell, pf(0));
    assert_eq!(table, IndirectionTable::round_robin(5));
    assert_eq!(key, RssKey::MICROSOFT);
    let log = rec.take_log();
    assert_eq!(log.len(), 138);
    let offsets: Vec<u32> = log.iter().map(|a| a.offset).collect();
    let want: Vec<u32> = (0..128)
        .map(|k| 0x1400 + 4 * k)
        .chain((0..10).map(|k| 0x1600 + 4 * k))
        .collect();
    assert_eq!(offsets, want);
    assert_eq!(log[0], Access::read(Bar::Shell, 0x1400, 0xABCD_0000));
}

#[test]
fn write_then_read_round_trip_per_function() {
    let rec = Recorder::new();
    let shell = rec.window(Bar::Shell);
    let t = IndirectionTable::weighted(&[1, 2, 3]).unwrap();
    for func in 0..4u8 {
        write_table(&shell, pf(func), &t);
        write_key(&shell, pf(func), &RssKey::MICROSOFT);
        assert_eq!(read_table(&shell, pf(func)), t);
        assert_eq!(read_key(&shell, pf(func)), RssKey::MICROSOFT);
        assert_eq!(read_back(&shell, pf(func)), (t, RssKey::MICROSOFT));
    }
    // Function 3's key ends at 0x4624; there is no function 4 to name.
    assert_eq!(rec.peek(Bar::Shell, 0x4624), 0xFA01ACBE);
    assert_eq!(FunctionId::new(4), None);
}

#[test]
fn default_key_is_the_reset_value_in_registers() {
    let rec = Recorder::new();
    let shell = rec.window(Bar::Shell);
    write_key(&shell, pf(0), &RssKey::DEFAULT);
    assert_eq!(shell.read(onic_hal::regs::shell::hash_key(pf(0), 0)), 0xD6E31417);
    assert_eq!(shell.read(onic_hal::regs::shell::hash_key(pf(0), 9)), 0x7C9C37DE);
}
