//! The input form ([`AccelHasher::hash_input`], [`AccelHasher::hash_inputs`]): on every backend
//! this CPU runs, the hash of 13 extracted input bytes equals the bit-serial reference over a
//! frame carrying them, and the frame form's value for that frame; one at a time, in batches, and
//! after a rekey.

use onic_accel::{AccelHasher, Backend};
use onic_core::rss::{shell_hash_reference, RssKey, ShellTuple};
use proptest::prelude::*;

/// The backends this CPU runs (the table path always).
fn backends() -> Vec<Backend> {
    Backend::ALL.into_iter().filter(|b| b.available()).collect()
}

/// A 40-byte key from two random parts (proptest's arrays stop at 32).
fn key_of(head: [u8; 32], tail: [u8; 8]) -> RssKey {
    let mut k = [0u8; 40];
    k[..32].copy_from_slice(&head);
    k[32..].copy_from_slice(&tail);
    RssKey::new(k)
}

/// An untagged IPv4 frame (IHL 5, not fragmented) carrying `input` where the shell reads it,
/// every other byte from `noise` (TTL, checksum and the bytes after the L4 ones included, which
/// the input form never sees and the frame form must skip).
fn frame_with(input: &[u8; 13], noise: &[u8; 32]) -> [u8; 64] {
    let mut f = [0u8; 64];
    for (n, b) in f.iter_mut().enumerate() {
        // CAST: n < 64.
        *b = noise[n % 32] ^ (n as u8);
    }
    f[12] = 0x08;
    f[13] = 0x00;
    f[14] = 0x45;
    f[20] &= 0x40; // DF at most: no MF, no offset
    f[21] = 0;
    f[23] = input[0];
    f[26..38].copy_from_slice(&input[1..]);
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 2048 }))]

    #[test]
    fn input_form_equals_the_reference_and_the_frame_form(
        head in prop::array::uniform32(any::<u8>()),
        tail in prop::array::uniform8(any::<u8>()),
        input in prop::array::uniform13(any::<u8>()),
        noise in prop::array::uniform32(any::<u8>()),
    ) {
        let key = key_of(head, tail);
        let f = frame_with(&input, &noise);
        // The layout is the one the core's parser gives.
        let parsed = ShellTuple::parse(&f);
        prop_assert_eq!(parsed.as_bytes(), &input);
        let want = shell_hash_reference(&key, &f);
        for b in backends() {
            let h = AccelHasher::with_backend(&key, b).unwrap();
            prop_assert_eq!(h.hash_input(&input), want, "backend {:?}", b);
            prop_assert_eq!(h.hash_frame(&f).value, want, "backend {:?}, frame", b);
        }
    }

    #[test]
    fn batches_equal_the_reference(
        head in prop::array::uniform32(any::<u8>()),
        tail in prop::array::uniform8(any::<u8>()),
        inputs in prop::collection::vec(prop::array::uniform13(any::<u8>()), 0..70),
        spare in 0usize..3,
    ) {
        let key = key_of(head, tail);
        let noise = [0xA5; 32];
        let want: Vec<u32> = inputs
            .iter()
            .map(|i| shell_hash_reference(&key, &frame_with(i, &noise)))
            .collect();
        for b in backends() {
            let h = AccelHasher::with_backend(&key, b).unwrap();
            let mut out = vec![!0u32; inputs.len() + spare];
            prop_assert_eq!(h.hash_inputs(&inputs, &mut out), inputs.len());
            prop_assert_eq!(&out[..inputs.len()], &want[..], "backend {:?}", b);
            prop_assert!(out[inputs.len()..].iter().all(|&v| v == !0), "backend {:?}: wrote past", b);
            // A shorter output stops the batch there, and nothing past it is written.
            let short = inputs.len() / 2;
            let mut out = vec![!0u32; inputs.len()];
            prop_assert_eq!(h.hash_inputs(&inputs, &mut out[..short]), short);
            prop_assert_eq!(&out[..short], &want[..short], "backend {:?}, short", b);
            prop_assert!(out[short..].iter().all(|&v| v == !0), "backend {:?}: short wrote past", b);
        }
    }
}

/// The UDP vector of hardware.md §9.4 (10.0.0.1:1234 → 10.0.0.2:5678, reset key) as input bytes.
#[test]
fn spec_udp_vector_on_every_backend() {
    let mut input = [0u8; 13];
    input[0] = 17;
    input[1..5].copy_from_slice(&[10, 0, 0, 1]);
    input[5..9].copy_from_slice(&[10, 0, 0, 2]);
    input[9..11].copy_from_slice(&1234u16.to_be_bytes());
    input[11..13].copy_from_slice(&5678u16.to_be_bytes());
    for b in backends() {
        let h = AccelHasher::with_backend(&RssKey::DEFAULT, b).unwrap();
        assert_eq!(h.hash_input(&input), 0x2F39E0E6, "{b:?}");
        let mut out = [0u32; 1];
        assert_eq!(h.hash_inputs(&[input], &mut out), 1);
        assert_eq!(out[0], 0x2F39E0E6, "{b:?}, batch");
    }
}

#[test]
fn rekey_moves_the_input_form_too() {
    let inputs: Vec<[u8; 13]> = (0u8..40)
        // CAST: n < 13.
        .map(|s| core::array::from_fn(|n| s.wrapping_mul(0x3D) ^ (n as u8).wrapping_mul(0x61)))
        .collect();
    for b in backends() {
        let mut h = AccelHasher::with_backend(&RssKey::DEFAULT, b).unwrap();
        let before: Vec<u32> = inputs.iter().map(|i| h.hash_input(i)).collect();
        h.rekey(&RssKey::MICROSOFT);
        let fresh = AccelHasher::with_backend(&RssKey::MICROSOFT, b).unwrap();
        let mut out = vec![0u32; inputs.len()];
        h.hash_inputs(&inputs, &mut out);
        for (n, i) in inputs.iter().enumerate() {
            assert_eq!(h.hash_input(i), fresh.hash_input(i), "{b:?} input {n}");
            assert_eq!(out[n], fresh.hash_input(i), "{b:?} input {n}, batch");
        }
        assert_ne!(out, before, "{b:?}: the key changed nothing");
    }
}

/// Every batch length from 0 to 9 and a few long ones (each remainder modulo 4 of the grouped
/// path), with the output as long as the inputs, longer, and shorter: each value equals the
/// table path's for the same input, in order, and nothing past the count is written.
#[test]
fn batches_of_every_length_equal_the_table_path() {
    let inputs: Vec<[u8; 13]> = (0u8..72)
        // CAST: n < 13.
        .map(|s| core::array::from_fn(|n| s.wrapping_mul(0x9D) ^ (n as u8).wrapping_mul(0x35) ^ 0x5A))
        .collect();
    let table = AccelHasher::with_backend(&RssKey::MICROSOFT, Backend::Table).unwrap();
    let want: Vec<u32> = inputs.iter().map(|i| table.hash_input(i)).collect();
    let lengths = (0usize..=9).chain([32, 65, 66, 67, 68]);
    for b in backends() {
        let h = AccelHasher::with_backend(&RssKey::MICROSOFT, b).unwrap();
        for len in lengths.clone() {
            for out_len in [len, len + 3, len.saturating_sub(1)] {
                let mut out = vec![!0u32; out_len];
                let n = len.min(out_len);
                assert_eq!(
                    h.hash_inputs(&inputs[..len], &mut out),
                    n,
                    "{b:?} {len} into {out_len}"
                );
                assert_eq!(out[..n], want[..n], "{b:?} {len} into {out_len}");
                assert!(
                    out[n..].iter().all(|&v| v == !0),
                    "{b:?} {len} into {out_len}: wrote past"
                );
            }
        }
    }
}
