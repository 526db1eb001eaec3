//! The x86-64 backends: PCLMULQDQ with SSSE3, and with GFNI (see the crate docs for the method).

use core::arch::x86_64::{
    __m128i, _mm_and_si128, _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_gf2p8affine_epi64_epi8,
    _mm_loadu_si128, _mm_or_si128, _mm_set1_epi64x, _mm_set1_epi8, _mm_setr_epi8, _mm_shuffle_epi8,
    _mm_srli_epi16, _mm_xor_si128,
};

use onic_core::rss::{common_case, ipv4_hash_type, FrameHash, RxHash, ShellHasher, COMMON_LEN};

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

/// Frame bytes 22..38 of a frame in the common case: TTL, protocol, checksum, source,
/// destination, L4 bytes.
const TUPLE_AT: usize = 22;

/// The hash of a frame in the common case (`onic_core::rss::common_case`); `None` for any
/// other frame.
#[inline]
pub(crate) fn hash_common(frame: &[u8], segments: &[u64; 4], gfni: bool) -> Option<FrameHash> {
    let head = common_case(frame)?;
    let value = if gfni {
        // SAFETY: `gfni` is only passed as true by a hasher whose backend is ClmulGfni, which is
        // only chosen after the CPU reported PCLMULQDQ, SSSE3 and GFNI (`Backend::available` /
        // `Backend::detect`).
        unsafe { common_gfni(head, segments) }
    } else {
        // SAFETY: only called for a hasher whose backend is Clmul or ClmulGfni, chosen after the
        // CPU reported PCLMULQDQ and SSSE3.
        unsafe { common_ssse3(head, segments) }
    };
    Some(with_kind(head, value))
}

/// Hashes `frames[i]` into `out[i]` for as many frames as both slices hold, the common case by
/// multiplication and every other frame by `table`; returns that count. One call for the whole
/// batch: the per-frame work is inlined into a loop compiled for the backend's features.
pub(crate) fn hash_frames(
    frames: &[&[u8]],
    out: &mut [RxHash],
    segments: &[u64; 4],
    gfni: bool,
    table: &ShellHasher,
) -> usize {
    if gfni {
        // SAFETY: as in `hash_common`: ClmulGfni is only chosen on a CPU with PCLMULQDQ, SSSE3
        // and GFNI.
        unsafe { frames_gfni(frames, out, segments, table) }
    } else {
        // SAFETY: as in `hash_common`: only for a Clmul or ClmulGfni hasher, chosen on a CPU
        // with PCLMULQDQ and SSSE3.
        unsafe { frames_ssse3(frames, out, segments, table) }
    }
}

/// The hash of a common-case frame from its value: the type from the IPv4 flags, fragment offset
/// and protocol.
#[inline(always)]
fn with_kind(head: &[u8; COMMON_LEN], value: u32) -> FrameHash {
    let protocol = head[TUPLE_AT + 1];
    FrameHash {
        hash: RxHash {
            value,
            kind: ipv4_hash_type(protocol, u16::from_be_bytes([head[20], head[21]])),
        },
        protocol,
    }
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

/// Frame bytes 22..38 of a common-case frame as a vector: TTL, protocol, checksum, source,
/// destination, L4 bytes.
#[inline]
#[target_feature(enable = "sse2")]
fn load_tuple(head: &[u8; COMMON_LEN]) -> __m128i {
    const { assert!(TUPLE_AT + 16 == COMMON_LEN) };
    // SAFETY: `head` holds COMMON_LEN bytes, so the 16 bytes from TUPLE_AT are readable (the
    // assertion above); the load has no alignment requirement.
    unsafe { _mm_loadu_si128(head.as_ptr().add(TUPLE_AT).cast::<__m128i>()) }
}

/// Two `u64`s as a vector (the first in the low half).
#[inline]
#[target_feature(enable = "sse2")]
fn load_u64x2(v: &[u64; 2]) -> __m128i {
    // SAFETY: `v` is 16 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadu_si128(v.as_ptr().cast::<__m128i>()) }
}

/// [`Backend::Clmul`](crate::Backend::Clmul): the hash value of one common-case frame.
///
/// The backend functions return the value alone, in a register, and the caller adds the kind
/// ([`with_kind`]): returning a whole [`FrameHash`] from a function that is not inlined (its
/// target features differ from the caller's) went through a stack slot written and read back
/// with overlapping accesses of different widths, which the CPU cannot forward, once per frame.
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3")]
fn common_ssse3(head: &[u8; COMMON_LEN], s: &[u64; 4]) -> u32 {
    products(reverse_bits_ssse3(load_tuple(head)), s)
}

/// The matrix of `gf2p8affineqb` that reverses the bits of each byte: result bit `i` is the parity
/// of the source byte ANDed with matrix byte `7 - i`, so matrix byte `k` selects source bit `k`
/// (byte 0 is 0x01, byte 7 is 0x80; the identity would be 0x0102_0408_1020_4080).
const GFNI_REVERSE: u64 = 0x8040_2010_0804_0201;

/// [`Backend::ClmulGfni`](crate::Backend::ClmulGfni): the hash value of one common-case frame
/// (as [`common_ssse3`]); the per-byte bit
/// reversal is one affine transformation over GF(2) whose matrix has its ones on the
/// anti-diagonal.
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3,gfni")]
fn common_gfni(head: &[u8; COMMON_LEN], s: &[u64; 4]) -> u32 {
    // CAST: a bit pattern.
    let m = _mm_set1_epi64x(GFNI_REVERSE as i64);
    let reversed = _mm_gf2p8affine_epi64_epi8::<0>(load_tuple(head), m);
    products(reversed, s)
}

/// Defines a batch function for one backend: the common case through that backend's
/// single-frame code (inlined into the loop, as both carry the same target features), every
/// other frame through the table path.
macro_rules! batch_fn {
    ($(#[$doc:meta])* $name:ident, $features:literal, $one:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        fn $name(frames: &[&[u8]], out: &mut [RxHash], s: &[u64; 4], table: &ShellHasher) -> usize {
            let n = frames.len().min(out.len());
            for (o, f) in out.iter_mut().zip(frames) {
                *o = match common_case(f) {
                    Some(head) => with_kind(head, $one(head, s)).hash,
                    None => table.hash_frame(f),
                };
            }
            n
        }
    };
}

batch_fn!(
    /// A batch on [`Backend::Clmul`](crate::Backend::Clmul).
    frames_ssse3,
    "pclmulqdq,ssse3",
    common_ssse3
);
batch_fn!(
    /// A batch on [`Backend::ClmulGfni`](crate::Backend::ClmulGfni).
    frames_gfni,
    "pclmulqdq,ssse3,gfni",
    common_gfni
);

#[cfg(test)]
mod tests {
    use super::GFNI_REVERSE;

    /// `gf2p8affineqb` on one byte with an immediate of 0, as the instruction set reference
    /// defines it: result bit `i` is the parity of `matrix.byte[7 - i] & x`. This CPU may not have
    /// GFNI (nor may QEMU's TCG emulate it), so the GFNI backend's one difference from the
    /// SSSE3 one, the bit-reversal matrix, is checked against this model everywhere; the
    /// property tests run the instruction itself where the CPU has it.
    fn affine_byte(matrix: u64, x: u8) -> u8 {
        let rows = matrix.to_le_bytes();
        (0..8).fold(0, |out, i| {
            let bit = (rows[7 - i] & x).count_ones() as u8 & 1;
            out | bit << i
        })
    }

    #[test]
    fn gfni_matrix_reverses_the_bits_of_every_byte() {
        for x in 0..=u8::MAX {
            assert_eq!(affine_byte(GFNI_REVERSE, x), x.reverse_bits(), "byte {x:#04x}");
        }
        // The model itself: the identity matrix changes nothing.
        for x in 0..=u8::MAX {
            assert_eq!(affine_byte(0x0102_0408_1020_4080, x), x);
        }
    }
}
