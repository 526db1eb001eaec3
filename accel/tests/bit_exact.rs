//! Every backend this CPU runs gives, for every frame and key, exactly what `onic-core`'s table
//! path gives (and, for a sample, the bit-serial reference): the value, the type and the protocol.

use onic_accel::{AccelHasher, Backend};
use onic_core::rss::{shell_hash_reference, RssKey, RxHash, ShellHasher};
use proptest::prelude::*;

/// The backends this CPU runs (the table path always).
fn backends() -> Vec<Backend> {
    Backend::ALL.into_iter().filter(|b| b.available()).collect()
}

/// Frames biased toward the fast path's case (untagged IPv4, IHL 5, long enough), with every
/// field it reads random, plus mutations that leave it (tags, options, other types, short).
fn frame() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(any::<u8>(), 0..100),
        0u8..8,
        any::<u8>(),
        any::<u16>(),
    )
        .prop_map(|(mut f, shape, proto, frag)| {
            if f.len() >= 38 && shape < 6 {
                f[12] = 0x08;
                f[13] = 0x00;
                f[14] = 0x45;
                // Common protocols, fragments now and then.
                f[23] = match shape {
                    0 => 6,
                    1 => 17,
                    2 => 50,
                    _ => proto,
                };
                let frag = if shape == 3 { frag } else { frag & 0x4000 };
                f[20..22].copy_from_slice(&frag.to_be_bytes());
            } else if f.len() >= 42 && shape == 6 {
                // Tagged IPv4: the table path.
                f[12] = 0x81;
                f[13] = 0x00;
                f[16] = 0x08;
                f[17] = 0x00;
                f[18] = 0x45;
            }
            f
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 4096 }))]

    #[test]
    fn every_backend_equals_the_table_path(key in prop::array::uniform32(any::<u8>()), tail in prop::array::uniform8(any::<u8>()), f in frame()) {
        let mut k = [0u8; 40];
        k[..32].copy_from_slice(&key);
        k[32..].copy_from_slice(&tail);
        let key = RssKey::new(k);
        let table = ShellHasher::new(&key);
        let want = table.hash_frame_with_protocol(&f);
        for b in backends() {
            let h = AccelHasher::with_backend(&key, b).unwrap();
            prop_assert_eq!(h.hash_frame_with_protocol(&f), want, "backend {:?}", b);
        }
    }

    #[test]
    fn every_backend_batch_equals_the_table_path(frames in prop::collection::vec(frame(), 0..40), spare in 0usize..3) {
        // A batch hashes each frame as the table path does, and stops at the shorter slice.
        let key = RssKey::MICROSOFT;
        let table = ShellHasher::new(&key);
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let want: Vec<_> = refs.iter().map(|f| table.hash_frame(f)).collect();
        for b in backends() {
            let h = AccelHasher::with_backend(&key, b).unwrap();
            let mut out = vec![RxHash::default(); refs.len() + spare];
            prop_assert_eq!(h.hash_frames(&refs, &mut out), refs.len());
            prop_assert_eq!(&out[..refs.len()], &want[..], "backend {:?}", b);
            let short = refs.len() / 2;
            prop_assert_eq!(h.hash_frames(&refs, &mut out[..short]), short);
        }
    }

    #[test]
    fn every_backend_equals_the_reference(key in prop::array::uniform32(any::<u8>()), f in frame()) {
        // Fewer cases than against the table path: the reference is bit-serial.
        let mut k = [0u8; 40];
        k[..32].copy_from_slice(&key);
        let key = RssKey::new(k);
        let want = shell_hash_reference(&key, &f);
        for b in backends() {
            let h = AccelHasher::with_backend(&key, b).unwrap();
            prop_assert_eq!(h.hash_frame(&f).value, want, "backend {:?}", b);
            let mut out = [RxHash::default(); 1];
            prop_assert_eq!(h.hash_frames(&[&f], &mut out), 1);
            prop_assert_eq!(out[0].value, want, "backend {:?}, batch", b);
        }
    }

    #[test]
    fn the_detected_backend_equals_the_reference(f in frame()) {
        let key = RssKey::DEFAULT;
        let h = AccelHasher::new(&key);
        prop_assert_eq!(h.hash_frame(&f).value, shell_hash_reference(&key, &f));
    }
}

#[test]
fn spec_udp_vector_on_every_backend() {
    let mut f = [0u8; 64];
    f[12] = 0x08;
    f[14] = 0x45;
    f[14 + 9] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&5678u16.to_be_bytes());
    for b in backends() {
        let h = AccelHasher::with_backend(&RssKey::DEFAULT, b).unwrap();
        assert_eq!(h.hash_frame(&f).value, 0x2F39E0E6, "{b:?}");
    }
}

#[test]
fn rekey_follows_the_new_key() {
    let mut h = AccelHasher::new(&RssKey::DEFAULT);
    h.rekey(&RssKey::MICROSOFT);
    let f = [0x45u8; 60];
    assert_eq!(
        h.hash_frame(&f),
        ShellHasher::new(&RssKey::MICROSOFT).hash_frame(&f)
    );
}

#[test]
fn rekey_on_every_backend_equals_a_fresh_hasher() {
    // A common-case frame, so that every backend's own path (not the table fallback) runs.
    let mut f = [0u8; 64];
    f[12] = 0x08;
    f[14] = 0x45;
    f[23] = 6;
    for (n, b) in f[26..38].iter_mut().enumerate() {
        // CAST: n < 12.
        *b = 0x11 * n as u8 + 3;
    }
    for b in backends() {
        let mut h = AccelHasher::with_backend(&RssKey::DEFAULT, b).unwrap();
        let before = h.hash_frame(&f);
        h.rekey(&RssKey::MICROSOFT);
        let fresh = AccelHasher::with_backend(&RssKey::MICROSOFT, b).unwrap();
        assert_eq!(h.hash_frame(&f), fresh.hash_frame(&f), "{b:?}");
        assert_ne!(h.hash_frame(&f), before, "{b:?}: the key changed nothing");
        let mut out = [RxHash::default(); 1];
        h.hash_frames(&[&f], &mut out);
        assert_eq!(out[0], fresh.hash_frame(&f), "{b:?}, batch");
    }
}

/// On x86-64 with SSE the crate must find PCLMULQDQ where the CPU has it (every x86-64 CPU of the
/// last decade), else the benchmarks would silently measure the table path.
#[test]
fn detection_matches_the_cpu() {
    #[cfg(target_arch = "x86_64")]
    {
        let clmul =
            std::arch::is_x86_feature_detected!("pclmulqdq") && std::arch::is_x86_feature_detected!("ssse3");
        assert_eq!(Backend::Clmul.available(), clmul);
        let gfni = std::arch::is_x86_feature_detected!("gfni");
        assert_eq!(Backend::ClmulGfni.available(), clmul && gfni);
        assert_eq!(
            Backend::Affine.available(),
            gfni && std::arch::is_x86_feature_detected!("avx2")
        );
    }
    assert!(Backend::Table.available());
    eprintln!("detected backend: {}", Backend::detect().name());
}
