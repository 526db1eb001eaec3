//! The RSS key changes while datapaths hash frames: every poll's frames are hashed with the old
//! key or the new one, all of them with the same one, never a mix; and once `Rss::set` returns,
//! the datapaths hash with the key the shell holds.
//!
//! One thread plays the control path: it brings a function of the model card up and sets three keys
//! in turn through the function's `Rss`, publishing each to the datapaths' `PublishedHasher`
//! under a `Counted` grace period. Two threads play NAPI polls: each "poll" is a read-side
//! section in which a batch of frames is hashed with the published hasher, slowly (the thread
//! sleeps between frames), so that key changes land in the middle of polls.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use onic_core::config::DeviceConfig;
use onic_core::device::rss_control::HashFunction;
use onic_core::rss::{PublishedHasher, RssKey, ShellHasher};
use onic_core::Device;
use onic_hal::grace::Counted;
use onic_sim::{Card, CardConfig};

/// An IPv4/UDP frame of flow `n`.
fn frame(n: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, (n >> 8) as u8, n as u8]);
    f[30..34].copy_from_slice(&[10, 1, 0, 1]);
    f[34..36].copy_from_slice(&(1000 + n).to_be_bytes());
    f[36..38].copy_from_slice(&5201u16.to_be_bytes());
    f
}

#[test]
fn every_poll_hashes_with_one_key_whole_while_the_key_changes() {
    // Three keys in turn, so that each of the hasher's two slots is rebuilt for a different key
    // every time (with two, each slot would keep one key for good and a torn read could not show).
    let keys = [RssKey::DEFAULT, RssKey::MICROSOFT, RssKey::new([0x6b; 40])];
    let frames: Vec<Vec<u8>> = (0..16).map(frame).collect();
    let expect: Vec<Vec<u32>> = keys
        .iter()
        .map(|k| {
            let h = ShellHasher::new(k);
            frames.iter().map(|f| h.hash_frame(f).value).collect()
        })
        .collect();
    for (i, e) in expect.iter().enumerate() {
        assert!(
            expect[..i].iter().all(|o| o != e),
            "the keys must hash these flows differently"
        );
    }

    let hasher = Box::new(PublishedHasher::new(&keys[0]));
    let grace = Counted::new();
    let done = AtomicBool::new(false);
    let polls = AtomicU64::new(0);
    let changes = if cfg!(miri) { 4 } else { 200 };
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    let section = grace.section();
                    let h = hasher.read(&section);
                    let mut got = Vec::with_capacity(frames.len());
                    for f in &frames {
                        got.push(h.hash_frame(f).value);
                        // A slow poll: several key changes would fit into it.
                        thread::sleep(Duration::from_micros(20));
                    }
                    assert!(expect.contains(&got), "one poll hashed with two keys: {got:x?}");
                    polls.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let card = Card::new(CardConfig::default());
        let (dev, mut rss) = Device::init(
            card.qdma(0),
            card.shell(),
            &mut card.delay(),
            DeviceConfig::new(0, 4).unwrap(),
        )
        .unwrap();
        for i in 1..=changes {
            let key = keys[i % keys.len()];
            let parts = rss
                .set(
                    &dev,
                    &hasher,
                    &grace,
                    None,
                    Some(key.as_bytes()),
                    HashFunction::NoChange,
                )
                .unwrap();
            assert!(parts.key && !parts.table);
            // From here on every poll hashes with the key the shell holds.
            assert_eq!(dev.rss_read_back().1, key);
            let section = grace.section();
            assert_eq!(*hasher.read(&section).key(), key);
        }
        done.store(true, Ordering::SeqCst);
    });
    assert!(polls.load(Ordering::Relaxed) > 0);
}
