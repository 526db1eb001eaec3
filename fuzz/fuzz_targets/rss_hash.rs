//! The RSS hashes against their bit-serial references: the shell's hash of any frame under any
//! key (table-driven parser and hash vs `shell_hash_reference`, which parses on its own and
//! hashes one bit at a time), and standard Toeplitz of any input under any key length (tables
//! vs `toeplitz_reference`, plus the fixed-size IPv4/IPv6 helpers vs the reference over bytes
//! laid out here from the definition). A key of a length Toeplitz refuses must be refused, not
//! panic.

#![no_main]

use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use onic_core::rss::toeplitz::{MAX_KEY_LEN, MIN_KEY_LEN};
use onic_core::rss::{shell_hash_reference, toeplitz_reference, RssKey, ShellHasher, ShellTuple, Toeplitz};

#[derive(Arbitrary, Debug)]
struct Input {
    shell_key: [u8; 40],
    toeplitz_key: Vec<u8>,
    frame: Vec<u8>,
}

/// The hashers of the last keys seen: building one costs far more than hashing, and consecutive
/// inputs often share their keys.
struct Cache {
    shell: Option<([u8; 40], ShellHasher, ShellHasher)>,
    toeplitz: Option<(Vec<u8>, Toeplitz)>,
}

thread_local! {
    static CACHE: RefCell<Cache> = const { RefCell::new(Cache { shell: None, toeplitz: None }) };
}

fuzz_target!(|i: Input| {
    CACHE.with(|c| run(&mut c.borrow_mut(), &i));
});

fn run(cache: &mut Cache, i: &Input) {
    let key = RssKey::new(i.shell_key);
    if cache.shell.as_ref().is_none_or(|(k, _, _)| *k != i.shell_key) {
        // One hasher built for the key, one rekeyed from the previous key.
        let mut rekeyed = cache
            .shell
            .take()
            .map_or_else(ShellHasher::default, |(_, _, r)| r);
        rekeyed.rekey(&key);
        cache.shell = Some((i.shell_key, ShellHasher::new(&key), rekeyed));
    }
    if let Some((_, hasher, rekeyed)) = cache.shell.as_ref() {
        let fast = hasher.hash_frame(&i.frame);
        assert_eq!(fast.value, shell_hash_reference(&key, &i.frame), "shell hash");
        assert_eq!(
            hasher.hash_tuple(&ShellTuple::parse(&i.frame)),
            fast,
            "parse + hash"
        );
        assert_eq!(rekeyed.hash_frame(&i.frame), fast, "rekey");
    }

    let k = &i.toeplitz_key;
    if cache.toeplitz.as_ref().is_none_or(|(key, _)| key != k) {
        match Toeplitz::new(k) {
            Ok(t) => cache.toeplitz = Some((k.clone(), t)),
            Err(_) => {
                assert!(
                    !(MIN_KEY_LEN..=MAX_KEY_LEN).contains(&k.len()),
                    "key of {} bytes refused",
                    k.len()
                );
                return;
            }
        }
    }
    if let Some((_, t)) = cache.toeplitz.as_ref() {
        toeplitz(t, k, &i.frame);
    }
}

fn toeplitz(t: &Toeplitz, k: &[u8], frame: &[u8]) {
    // Input bytes past the longest key meet only zero key bits: the reference runs on the part
    // that can matter, and the rest must not change the hash.
    let head = &frame[..frame.len().min(MAX_KEY_LEN)];
    assert_eq!(t.hash(frame), t.hash(head), "bytes past the key");
    assert_eq!(t.hash(head), toeplitz_reference(k, head), "toeplitz");
    let b = |n: usize| frame.get(n).copied().unwrap_or(0);
    let v4 = |at: usize| Ipv4Addr::new(b(at), b(at + 1), b(at + 2), b(at + 3));
    let v6 = |at: usize| Ipv6Addr::from(core::array::from_fn::<u8, 16, _>(|n| b(at + n)));
    let port = |at: usize| u16::from_be_bytes([b(at), b(at + 1)]);
    let bytes = |n: usize| (0..n).map(b).collect::<Vec<u8>>();
    // The 2- and 4-tuple inputs are the frame's first bytes: addresses, then ports, big-endian.
    assert_eq!(t.hash_ipv4(v4(0), v4(4)), toeplitz_reference(k, &bytes(8)));
    assert_eq!(
        t.hash_ipv4_ports(v4(0), v4(4), port(8), port(10)),
        toeplitz_reference(k, &bytes(12))
    );
    assert_eq!(t.hash_ipv6(v6(0), v6(16)), toeplitz_reference(k, &bytes(32)));
    assert_eq!(
        t.hash_ipv6_ports(v6(0), v6(16), port(32), port(34)),
        toeplitz_reference(k, &bytes(36))
    );
}
