//! The x86-64 backends: PCLMULQDQ with SSSE3, and with GFNI (see the crate docs for the method).

use core::arch::x86_64::{
    __m128i, _mm_and_si128, _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_gf2p8affine_epi64_epi8,
    _mm_loadu_si128, _mm_or_si128, _mm_set1_epi64x, _mm_set1_epi8, _mm_setr_epi8, _mm_shuffle_epi8,
    _mm_srli_epi16, _mm_xor_si128,
};

use onic_core::rss::{ipv4_hash_type, FrameHash, RssHashType, RxHash};

/// What the CPU offers the backends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Features {
    /// PCLMULQDQ and SSSE3.
    pub(crate) clmul: bool,
    /// GFNI (its 128-bit, SSE-encoded form).
    pub(crate) gfni: bool,
}

impl Features {
    /// Asks the standard library (which caches the answer).
    #[cfg(feature = "std")]
    pub(crate) fn detect() -> Self {
        Self {
            clmul: std::arch::is_x86_feature_detected!("pclmulqdq")
                && std::arch::is_x86_feature_detected!("ssse3"),
            gfni: std::arch::is_x86_feature_detected!("gfni"),
        }
    }

    /// Asks the CPU (CPUID leaves 1 and 7). The SSE registers these instructions use are always
    /// enabled for x86-64 code outside a kernel.
    #[cfg(not(feature = "std"))]
    pub(crate) fn detect() -> Self {
        use core::arch::x86_64::{__cpuid, __cpuid_count};
        const ECX1_PCLMULQDQ: u32 = 1 << 1;
        const ECX1_SSSE3: u32 = 1 << 9;
        const ECX7_GFNI: u32 = 1 << 8;
        let max = __cpuid(0).eax;
        let ecx1 = __cpuid(1).ecx;
        let ecx7 = if max >= 7 { __cpuid_count(7, 0).ecx } else { 0 };
        Self {
            clmul: ecx1 & ECX1_PCLMULQDQ != 0 && ecx1 & ECX1_SSSE3 != 0,
            gfni: ecx7 & ECX7_GFNI != 0,
        }
    }
}

/// Bytes of an untagged IPv4 frame the fast path reads: the Ethernet header, a 20-byte IPv4
/// header and the 4 L4 bytes.
const COMMON_LEN: usize = 38;

/// Frame bytes 22..38 of an untagged IPv4 frame with version 4 and a 20-byte header whose 4 L4
/// bytes lie inside the frame (the shell parser's common case, which `ShellTuple::parse` tests
/// first the same way); `None` for any other frame.
#[inline(always)]
fn common_case(frame: &[u8]) -> Option<&[u8; 16]> {
    let head: &[u8; COMMON_LEN] = frame.get(..COMMON_LEN)?.try_into().ok()?;
    if head[12] != 0x08 || head[13] != 0x00 || head[14] != 0x45 {
        return None;
    }
    // Frame bytes 22..38: TTL, protocol, checksum, source, destination, L4 bytes.
    <&[u8; 16]>::try_from(&head[22..]).ok()
}

/// The hash value and the protocol (frame byte 23) of the common case; the type comes from
/// [`with_kind`].
#[inline(always)]
fn frame_hash(bytes: &[u8; 16], value: u32) -> FrameHash {
    FrameHash {
        hash: RxHash {
            value,
            kind: RssHashType::None,
        },
        protocol: bytes[1],
    }
}

/// The hash of a frame in the common case ([`common_case`]); `None` for any other frame.
#[inline]
pub(crate) fn hash_common(frame: &[u8], segments: &[u64; 4], gfni: bool) -> Option<FrameHash> {
    let bytes = common_case(frame)?;
    let value = if gfni {
        // SAFETY: `gfni` is only passed as true by a hasher whose backend is ClmulGfni, which is
        // only chosen after the CPU reported PCLMULQDQ, SSSE3 and GFNI (`Backend::available` /
        // `Backend::detect`).
        unsafe { hash_gfni(bytes, segments) }
    } else {
        // SAFETY: only called for a hasher whose backend is Clmul or ClmulGfni, chosen after the
        // CPU reported PCLMULQDQ and SSSE3.
        unsafe { hash_ssse3(bytes, segments) }
    };
    Some(with_kind(frame, frame_hash(bytes, value)))
}

/// Fills in the hash type from the frame's IPv4 flags, fragment offset and protocol.
#[inline(always)]
fn with_kind(frame: &[u8], mut h: FrameHash) -> FrameHash {
    let flags = frame.get(20..22).map_or(0, |f| u16::from_be_bytes([f[0], f[1]]));
    h.hash.kind = ipv4_hash_type(h.protocol, flags);
    h
}

/// Reverses the bits of every byte with two nibble lookups.
#[inline]
#[target_feature(enable = "ssse3")]
fn reverse_bits_ssse3(v: __m128i) -> __m128i {
    // rev4(n) for the low nibble's lookup moved to the high nibble, and as is for the high one.
    let rev_to_high = _mm_setr_epi8(
        0x00, -0x80, 0x40, -0x40, 0x20, -0x60, 0x60, -0x20, 0x10, -0x70, 0x50, -0x30, 0x30, -0x50, 0x70,
        -0x10,
    );
    let rev_to_low = _mm_setr_epi8(
        0x0, 0x8, 0x4, 0xC, 0x2, 0xA, 0x6, 0xE, 0x1, 0x9, 0x5, 0xD, 0x3, 0xB, 0x7, 0xF,
    );
    let nibble = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(v, nibble);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(v), nibble);
    _mm_or_si128(
        _mm_shuffle_epi8(rev_to_high, lo),
        _mm_shuffle_epi8(rev_to_low, hi),
    )
}

/// The hash from frame bytes 22..38 whose bits are already reversed within each byte: the chunks
/// in place, four products, the hash at bit 31.
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3")]
fn products(reversed: __m128i, s: &[u64; 4]) -> u32 {
    const Z: i8 = -0x80; // a shuffle index that writes 0
                         // Chunk c, bit-reversed as a whole, in the low 32 bits of a 64-bit lane: its bytes in reverse
                         // order (each already bit-reversed). Input bytes sit at 1 (protocol) and 4..16 (source,
                         // destination, L4 bytes) of the loaded vector; chunk 3 holds only the last L4 byte.
    let a = _mm_shuffle_epi8(
        reversed,
        _mm_setr_epi8(6, 5, 4, 1, Z, Z, Z, Z, 10, 9, 8, 7, Z, Z, Z, Z),
    );
    let b = _mm_shuffle_epi8(
        reversed,
        _mm_setr_epi8(14, 13, 12, 11, Z, Z, Z, Z, Z, Z, Z, 15, Z, Z, Z, Z),
    );
    let (k01, k23) = (load_u64x2(&[s[0], s[1]]), load_u64x2(&[s[2], s[3]]));
    let x = _mm_xor_si128(
        _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(a, k01),
            _mm_clmulepi64_si128::<0x11>(a, k01),
        ),
        _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(b, k23),
            _mm_clmulepi64_si128::<0x11>(b, k23),
        ),
    );
    // CAST: the 32 hash bits, 31..62 of the low 64.
    ((_mm_cvtsi128_si64(x) as u64) >> 31) as u32
}

/// The 16 bytes as a vector.
#[inline]
#[target_feature(enable = "sse2")]
fn load(bytes: &[u8; 16]) -> __m128i {
    // SAFETY: `bytes` is 16 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadu_si128(bytes.as_ptr().cast::<__m128i>()) }
}

/// Two `u64`s as a vector (the first in the low half).
#[inline]
#[target_feature(enable = "sse2")]
fn load_u64x2(v: &[u64; 2]) -> __m128i {
    // SAFETY: `v` is 16 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadu_si128(v.as_ptr().cast::<__m128i>()) }
}

/// [`Backend::Clmul`](crate::Backend::Clmul), from frame bytes 22..38.
#[target_feature(enable = "pclmulqdq,ssse3")]
fn hash_ssse3(bytes: &[u8; 16], s: &[u64; 4]) -> u32 {
    products(reverse_bits_ssse3(load(bytes)), s)
}

/// [`Backend::ClmulGfni`](crate::Backend::ClmulGfni), from frame bytes 22..38: the per-byte bit
/// reversal is one affine transformation over GF(2) whose matrix has its ones on the
/// anti-diagonal.
#[target_feature(enable = "pclmulqdq,ssse3,gfni")]
fn hash_gfni(bytes: &[u8; 16], s: &[u64; 4]) -> u32 {
    const REVERSE: u64 = 0x8040_2010_0804_0201;
    // CAST: a bit pattern.
    let m = _mm_set1_epi64x(REVERSE as i64);
    products(_mm_gf2p8affine_epi64_epi8::<0>(load(bytes), m), s)
}
