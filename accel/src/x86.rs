//! The x86-64 backends: PCLMULQDQ with SSSE3, and with GFNI; GFNI affine transformations on
//! AVX2 registers (see the crate docs for the methods).

use core::arch::x86_64::{
    __m128i, __m256i, _mm256_blend_epi32, _mm256_broadcastsi128_si256, _mm256_castsi256_si128,
    _mm256_extracti128_si256, _mm256_gf2p8affine_epi64_epi8, _mm256_loadu_si256, _mm256_permute2x128_si256,
    _mm256_permute4x64_epi64, _mm256_set_m128i, _mm256_shuffle_epi32, _mm256_shuffle_epi8, _mm256_xor_si256,
    _mm_and_si128, _mm_clmulepi64_si128, _mm_cvtsi128_si32, _mm_cvtsi128_si64, _mm_gf2p8affine_epi64_epi8,
    _mm_loadl_epi64, _mm_loadu_si128, _mm_or_si128, _mm_set1_epi64x, _mm_set1_epi8, _mm_setr_epi8,
    _mm_shuffle_epi32, _mm_shuffle_epi8, _mm_srli_epi16, _mm_storeu_si128, _mm_unpacklo_epi64, _mm_xor_si128,
};

use onic_core::rss::shell_hash::TUPLE_LEN;
use onic_core::rss::{common_case, ipv4_hash_type, FrameHash, RxHash, ShellHasher, COMMON_LEN};

use crate::affine::{lane_matrix, Matrices, GROUPS};
use crate::{Backend, KeyForms};

/// What the CPU offers the backends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Features {
    /// PCLMULQDQ and SSSE3.
    pub(crate) clmul: bool,
    /// GFNI (its 128-bit, SSE-encoded form).
    pub(crate) gfni: bool,
    /// GFNI and AVX2 (with them GFNI's VEX-encoded 256-bit form), and the operating system
    /// saves the AVX registers.
    pub(crate) avx2_gfni: bool,
}

impl Features {
    /// Asks the standard library (which caches the answer).
    #[cfg(feature = "std")]
    pub(crate) fn detect() -> Self {
        Self {
            clmul: std::arch::is_x86_feature_detected!("pclmulqdq")
                && std::arch::is_x86_feature_detected!("ssse3"),
            gfni: std::arch::is_x86_feature_detected!("gfni"),
            avx2_gfni: std::arch::is_x86_feature_detected!("gfni")
                && std::arch::is_x86_feature_detected!("avx2"),
        }
    }

    /// Asks the CPU (CPUID leaves 1 and 7, and XCR0 for the AVX registers). The SSE registers
    /// are always enabled for x86-64 code outside a kernel; the AVX ones only where the
    /// operating system saves them, which XCR0 tells.
    #[cfg(not(feature = "std"))]
    pub(crate) fn detect() -> Self {
        use core::arch::x86_64::{__cpuid, __cpuid_count};
        const ECX1_PCLMULQDQ: u32 = 1 << 1;
        const ECX1_SSSE3: u32 = 1 << 9;
        const ECX1_OSXSAVE: u32 = 1 << 27;
        const ECX1_AVX: u32 = 1 << 28;
        const EBX7_AVX2: u32 = 1 << 5;
        const ECX7_GFNI: u32 = 1 << 8;
        // XCR0: the SSE and AVX (upper halves of ymm) register state.
        const XCR0_AVX: u64 = 0b110;
        let max = __cpuid(0).eax;
        let ecx1 = __cpuid(1).ecx;
        let (ebx7, ecx7) = if max >= 7 {
            let r = __cpuid_count(7, 0);
            (r.ebx, r.ecx)
        } else {
            (0, 0)
        };
        let gfni = ecx7 & ECX7_GFNI != 0;
        let avx2 = ecx1 & ECX1_AVX != 0 && ebx7 & EBX7_AVX2 != 0;
        let os_saves_ymm = ecx1 & ECX1_OSXSAVE != 0 && {
            // SAFETY: CPUID reported OSXSAVE, so the OS enabled XSAVE and XGETBV is available.
            let xcr0 = unsafe { core::arch::x86_64::_xgetbv(0) };
            xcr0 & XCR0_AVX == XCR0_AVX
        };
        Self {
            clmul: ecx1 & ECX1_PCLMULQDQ != 0 && ecx1 & ECX1_SSSE3 != 0,
            gfni,
            avx2_gfni: gfni && avx2 && os_saves_ymm,
        }
    }
}

/// Frame bytes 22..38 of a frame in the common case: TTL, protocol, checksum, source,
/// destination, L4 bytes.
const TUPLE_AT: usize = 22;

/// The hash of a frame in the common case (`onic_core::rss::common_case`) on `backend`; `None`
/// for any other frame, and for [`Backend::Table`] (which has no code here).
#[inline]
pub(crate) fn hash_common(frame: &[u8], backend: Backend, k: &KeyForms) -> Option<FrameHash> {
    let head = common_case(frame)?;
    let value = match backend {
        // SAFETY: a hasher's backend is ClmulGfni only after the CPU reported PCLMULQDQ, SSSE3
        // and GFNI (`Backend::available` / `Backend::detect`).
        Backend::ClmulGfni => unsafe { common_gfni(head, &k.segments) },
        // SAFETY: a hasher's backend is Clmul only after the CPU reported PCLMULQDQ and SSSE3.
        Backend::Clmul => unsafe { common_ssse3(head, &k.segments) },
        // SAFETY: a hasher's backend is Affine only after the CPU reported GFNI and AVX2, and
        // the OS saving the AVX registers.
        Backend::Affine => unsafe { common_affine(head, &k.matrices) },
        Backend::Table => return None,
    };
    Some(with_kind(head, value))
}

/// Hashes `frames[i]` into `out[i]` for as many frames as both slices hold, the common case on
/// `backend` and every other frame by `table`; returns that count. One call for the whole
/// batch: the per-frame work is inlined into a loop compiled for the backend's features.
pub(crate) fn hash_frames(
    frames: &[&[u8]],
    out: &mut [RxHash],
    backend: Backend,
    k: &KeyForms,
    table: &ShellHasher,
) -> usize {
    match backend {
        // SAFETY: as in `hash_common`: ClmulGfni is only chosen on a CPU with PCLMULQDQ, SSSE3
        // and GFNI.
        Backend::ClmulGfni => unsafe { frames_gfni(frames, out, &k.segments, table) },
        // SAFETY: as in `hash_common`: Clmul is only chosen on a CPU with PCLMULQDQ and SSSE3.
        Backend::Clmul => unsafe { frames_ssse3(frames, out, &k.segments, table) },
        // SAFETY: as in `hash_common`: Affine is only chosen on a CPU with GFNI and AVX2, whose
        // registers the OS saves.
        Backend::Affine => unsafe { frames_affine(frames, out, &k.matrices, table) },
        Backend::Table => table.hash_frames(frames, out),
    }
}

/// The hash of the 13 input bytes (protocol, source, destination, L4 bytes) on `backend`, by
/// the same kernel as a frame's; `None` for [`Backend::Table`] (which has no code here).
#[inline]
pub(crate) fn hash_input(input: &[u8; TUPLE_LEN], backend: Backend, k: &KeyForms) -> Option<u32> {
    Some(match backend {
        // SAFETY: as in `hash_common`: ClmulGfni is only chosen on a CPU with PCLMULQDQ, SSSE3
        // and GFNI.
        Backend::ClmulGfni => unsafe { input_gfni(input, &k.segments) },
        // SAFETY: as in `hash_common`: Clmul is only chosen on a CPU with PCLMULQDQ and SSSE3.
        Backend::Clmul => unsafe { input_ssse3(input, &k.segments) },
        // SAFETY: as in `hash_common`: Affine is only chosen on a CPU with GFNI and AVX2, whose
        // registers the OS saves.
        Backend::Affine => unsafe { input_affine(input, &k.matrices) },
        Backend::Table => return None,
    })
}

/// Hashes `inputs[i]` into `out[i]` for as many inputs as both slices hold on `backend`, one
/// call for the whole batch; returns that count, `None` for [`Backend::Table`].
pub(crate) fn hash_inputs(
    inputs: &[[u8; TUPLE_LEN]],
    out: &mut [u32],
    backend: Backend,
    k: &KeyForms,
) -> Option<usize> {
    Some(match backend {
        // SAFETY: as in `hash_common`: ClmulGfni is only chosen on a CPU with PCLMULQDQ, SSSE3
        // and GFNI.
        Backend::ClmulGfni => unsafe { inputs_gfni(inputs, out, &k.segments) },
        // SAFETY: as in `hash_common`: Clmul is only chosen on a CPU with PCLMULQDQ and SSSE3.
        Backend::Clmul => unsafe { inputs_ssse3(inputs, out, &k.segments) },
        // SAFETY: as in `hash_common`: Affine is only chosen on a CPU with GFNI and AVX2, whose
        // registers the OS saves.
        Backend::Affine => unsafe { inputs_affine(inputs, out, &k.matrices) },
        Backend::Table => return None,
    })
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

/// The 13 input bytes as two 8-byte halves, input bytes 0..8 and 5..13 (overlapping: nothing
/// past the array is read), each in the low half of a vector. Read straight into registers: a
/// copy into a 16-byte stack array read back whole would wait for the copy's stores.
#[inline]
#[target_feature(enable = "sse2")]
fn input_halves(input: &[u8; TUPLE_LEN]) -> (__m128i, __m128i) {
    const { assert!(TUPLE_LEN > 8) };
    // SAFETY: bytes 0..8 and TUPLE_LEN - 8..TUPLE_LEN of the array are readable (the assertion
    // above); `_mm_loadl_epi64` reads 8 bytes with no alignment requirement.
    unsafe {
        (
            _mm_loadl_epi64(input.as_ptr().cast::<__m128i>()),
            _mm_loadl_epi64(input.as_ptr().add(TUPLE_LEN - 8).cast::<__m128i>()),
        )
    }
}

/// Where input byte `i` sits once [`input_halves`] are joined into 16 bytes: at `i` in the first
/// half, at `i + 3` in the second (which starts with input byte 5).
const INPUT_OFFSETS: [u8; TUPLE_LEN] = [0, 1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14, 15];

/// Where tuple byte `i` sits in the 16 bytes [`load_tuple`] reads from a frame: the protocol at
/// 1, the other twelve from 4 on.
const FRAME_OFFSETS: [u8; TUPLE_LEN] = [1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// Where each tuple byte sits in the two 128-bit halves of an affine kernel's source register:
/// byte `i` at `[half][i]`, or [`ABSENT`] where the half does not hold it. A half needs only the
/// bytes its matrices meet ([`crate::affine::lane_matrix`]).
type HalfOffsets = [[u8; TUPLE_LEN]; 2];

/// A tuple byte a half of the source does not hold.
const ABSENT: u8 = 0xFF;

/// A frame's 16 bytes ([`load_tuple`]) repeated in both halves.
const FRAME_HALVES: HalfOffsets = [FRAME_OFFSETS, FRAME_OFFSETS];

/// The two [`input_halves`], one in each 128-bit half: input bytes 0..8 at 0..8 in the lower,
/// bytes 5..13 at 0..8 in the upper.
const INPUT_HALVES: HalfOffsets = {
    let mut h = [[ABSENT; TUPLE_LEN]; 2];
    let mut i = 0;
    while i < TUPLE_LEN {
        if i < 8 {
            // CAST: below 8.
            h[0][i] = i as u8;
        }
        if i >= TUPLE_LEN - 8 {
            // CAST: below 8.
            h[1][i] = (i - (TUPLE_LEN - 8)) as u8;
        }
        i += 1;
    }
    h
};

/// The 13 input bytes as a vector laid out as [`load_tuple`] lays out a frame's (the rest 0),
/// for the multiplication kernels: the joined [`input_halves`] and one byte shuffle.
#[inline]
#[target_feature(enable = "ssse3")]
fn load_input(input: &[u8; TUPLE_LEN]) -> __m128i {
    const TO_FRAME: [u8; 16] = {
        // Frame-layout byte `FRAME_OFFSETS[i]` takes input byte `i`; the others get 0 (0x80).
        let mut t = [0x80u8; 16];
        let mut i = 0;
        while i < TUPLE_LEN {
            t[FRAME_OFFSETS[i] as usize] = INPUT_OFFSETS[i];
            i += 1;
        }
        t
    };
    let (low, high) = input_halves(input);
    _mm_shuffle_epi8(_mm_unpacklo_epi64(low, high), load128(&TO_FRAME))
}

/// 16 bytes as a vector.
#[inline]
#[target_feature(enable = "sse2")]
fn load128(v: &[u8; 16]) -> __m128i {
    // SAFETY: `v` is 16 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadu_si128(v.as_ptr().cast::<__m128i>()) }
}

/// Two `u64`s as a vector (the first in the low half).
#[inline]
#[target_feature(enable = "sse2")]
fn load_u64x2(v: &[u64; 2]) -> __m128i {
    // SAFETY: `v` is 16 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadu_si128(v.as_ptr().cast::<__m128i>()) }
}

/// [`Backend::Clmul`]: the hash value of one common-case frame.
///
/// The backend functions return the value alone, in a register, and the caller adds the kind
/// ([`with_kind`]): returning a whole [`FrameHash`] from a function that is not inlined (its
/// target features differ from the caller's) went through a stack slot written and read back
/// with overlapping accesses of different widths, which the CPU cannot forward, once per frame.
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3")]
fn common_ssse3(head: &[u8; COMMON_LEN], s: &[u64; 4]) -> u32 {
    value_ssse3(load_tuple(head), s)
}

/// The [`Backend::Clmul`] kernel on a [`load_tuple`]-layout vector.
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3")]
fn value_ssse3(tuple: __m128i, s: &[u64; 4]) -> u32 {
    products(reverse_bits_ssse3(tuple), s)
}

/// The matrix of `gf2p8affineqb` that reverses the bits of each byte: result bit `i` is the parity
/// of the source byte ANDed with matrix byte `7 - i`, so matrix byte `k` selects source bit `k`
/// (byte 0 is 0x01, byte 7 is 0x80; the identity would be 0x0102_0408_1020_4080).
const GFNI_REVERSE: u64 = 0x8040_2010_0804_0201;

/// [`Backend::ClmulGfni`]: the hash value of one common-case frame
/// (as [`common_ssse3`]); the per-byte bit
/// reversal is one affine transformation over GF(2) whose matrix has its ones on the
/// anti-diagonal.
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3,gfni")]
fn common_gfni(head: &[u8; COMMON_LEN], s: &[u64; 4]) -> u32 {
    value_gfni(load_tuple(head), s)
}

/// The [`Backend::ClmulGfni`] kernel on a [`load_tuple`]-layout vector.
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3,gfni")]
fn value_gfni(tuple: __m128i, s: &[u64; 4]) -> u32 {
    // CAST: a bit pattern.
    let m = _mm_set1_epi64x(GFNI_REVERSE as i64);
    let reversed = _mm_gf2p8affine_epi64_epi8::<0>(tuple, m);
    products(reversed, s)
}

/// The byte shuffle for the four matrices of group `group` (see [`crate::affine`]): 64-bit
/// lane `l` meets matrix `d` ([`lane_matrix`]), and its byte `4 (d % 2) + j` receives tuple
/// byte `d - j`, the one that reaches hash byte `j` through `A_d` (where `d - j` is a tuple
/// byte); every other byte gets 0 (index 0x80), which the affine map sends to 0. Odd lanes use
/// their upper four bytes, so that the two 32-bit halves of the lanes' sum fold in one step
/// ([`fold_one`]). Tuple byte `i` is taken from byte `offsets[half][i]` of the lane's 128-bit
/// half of the source register (checked to be there when the table is built).
const fn affine_shuffle(group: usize, offsets: &HalfOffsets) -> [u8; 32] {
    let meets = group_meets(group);
    let mut s = [0x80u8; 32];
    let mut lane = 0;
    while lane < 4 {
        let d = lane_matrix(group, lane);
        let mut j = 0;
        while j < 4 {
            if let Some(i) = meets[lane][j] {
                let at = offsets[lane / 2][i];
                assert!(at < 16);
                s[8 * lane + 4 * (d % 2) + j] = at;
            }
            j += 1;
        }
        lane += 1;
    }
    s
}

/// For each lane `l` of group `group` (matrix `d`, [`lane_matrix`]) and hash byte `j`, the
/// tuple byte that reaches `j` through `A_d`: `d - j`, where that is a tuple byte. Both layouts
/// ([`affine_shuffle`], [`pair_shuffle`]) place these.
const fn group_meets(group: usize) -> [[Option<usize>; 4]; 4] {
    let mut m = [[None; 4]; 4];
    let mut lane = 0;
    while lane < 4 {
        let d = lane_matrix(group, lane);
        let mut j = 0;
        while j < 4 {
            if d >= j && d - j < TUPLE_LEN {
                m[lane][j] = Some(d - j);
            }
            j += 1;
        }
        lane += 1;
    }
    m
}

/// The four shuffles of one source layout: each 128-bit half of a ymm register, shuffled within
/// itself, puts every tuple byte where its matrix is.
type AffineShuffles = [[u8; 32]; GROUPS];

/// The shuffles for `offsets`.
const fn affine_shuffles(offsets: &HalfOffsets) -> AffineShuffles {
    [
        affine_shuffle(0, offsets),
        affine_shuffle(1, offsets),
        affine_shuffle(2, offsets),
        affine_shuffle(3, offsets),
    ]
}

/// The shuffles for a frame's 16 bytes ([`load_tuple`]).
static FRAME_SHUFFLES: AffineShuffles = affine_shuffles(&FRAME_HALVES);

/// The shuffles for the [`input_halves`], one in each 128-bit half.
static INPUT_SHUFFLES: AffineShuffles = affine_shuffles(&INPUT_HALVES);

/// 32 bytes as a ymm register.
#[inline]
#[target_feature(enable = "avx")]
fn load256<T>(v: &T) -> __m256i {
    const { assert!(size_of::<T>() == 32) };
    // SAFETY: `v` is 32 readable bytes (the assertion above); the load has no alignment
    // requirement.
    unsafe { _mm256_loadu_si256(core::ptr::from_ref(v).cast::<__m256i>()) }
}

/// [`Backend::Affine`]: the hash value of one common-case frame. Every tuple byte goes through
/// the matrix of each hash byte it reaches (four `vpshufb` place the bytes, four
/// `vgf2p8affineqb` on 16 lanes apply the matrices), and the lanes are XORed together
/// ([`affine_lanes`], [`fold_one`]).
///
/// AVX2 registers, not AVX-512: the same work in two zmm registers measured slower on Zen 4
/// (about 3.7 against 3.3 ns a frame, 3.2 against 2.5 ns in batches; `docs/benchmarks.md`).
#[inline]
#[target_feature(enable = "avx2,gfni")]
fn common_affine(head: &[u8; COMMON_LEN], m: &Matrices) -> u32 {
    value_affine(_mm256_broadcastsi128_si256(load_tuple(head)), m, &FRAME_SHUFFLES)
}

/// [`Backend::Affine`] on 13 input bytes: the same kernel as [`common_affine`], its source the
/// two [`input_halves`], one in each 128-bit half (each half's matrices meet only the 8 bytes
/// it holds), placed by [`INPUT_SHUFFLES`]. One insert makes the source, where joining the
/// halves and repeating them in both took two shuffles.
#[inline]
#[target_feature(enable = "avx2,gfni")]
fn input_affine(input: &[u8; TUPLE_LEN], m: &Matrices) -> u32 {
    let (low, high) = input_halves(input);
    value_affine(_mm256_set_m128i(high, low), m, &INPUT_SHUFFLES)
}

/// The [`Backend::Affine`] kernel up to the lanes: `tuple` holds in each 128-bit half the tuple
/// bytes that half's matrices meet, where `shuffles` picks them; the result holds the
/// hash's four shares, one 32-bit half of each 64-bit lane (which half: [`affine_shuffle`]),
/// whose XOR is the hash, and 0 in the other halves.
#[inline]
#[target_feature(enable = "avx2,gfni")]
fn affine_lanes(tuple: __m256i, m: &Matrices, shuffles: &AffineShuffles) -> __m256i {
    let group = |g: usize| {
        let placed = _mm256_shuffle_epi8(tuple, load256(&shuffles[g]));
        _mm256_gf2p8affine_epi64_epi8::<0>(placed, load256(&m.0[g]))
    };
    _mm256_xor_si256(
        _mm256_xor_si256(group(0), group(1)),
        _mm256_xor_si256(group(2), group(3)),
    )
}

/// The hash from [`affine_lanes`]: dwords 0 and 4 (the even lanes' low halves) and
/// 3 and 7 (the odd lanes' high halves) XORed, the rest being 0.
#[inline]
#[target_feature(enable = "avx2")]
fn fold_one(lanes: __m256i) -> u32 {
    let z = _mm_xor_si128(
        _mm256_castsi256_si128(lanes),
        _mm256_extracti128_si256::<1>(lanes),
    );
    // Dword 3 to dword 0 (the others are 0 or not read).
    let h = _mm_xor_si128(z, _mm_shuffle_epi32::<0b00_00_00_11>(z));
    // CAST: a bit pattern.
    _mm_cvtsi128_si32(h) as u32
}

/// The [`Backend::Affine`] kernel: [`affine_lanes`] folded by [`fold_one`].
#[inline]
#[target_feature(enable = "avx2,gfni")]
fn value_affine(tuple: __m256i, m: &Matrices, shuffles: &AffineShuffles) -> u32 {
    fold_one(affine_lanes(tuple, m, shuffles))
}

/// Defines a batch function for one backend: the common case through that backend's
/// single-frame code (inlined into the loop, as both carry the same target features), every
/// other frame through the table path.
macro_rules! batch_fn {
    ($(#[$doc:meta])* $name:ident, $features:literal, $one:ident, $key:ty) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        fn $name(frames: &[&[u8]], out: &mut [RxHash], s: &$key, table: &ShellHasher) -> usize {
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
    /// A batch on [`Backend::Clmul`].
    frames_ssse3,
    "pclmulqdq,ssse3",
    common_ssse3,
    [u64; 4]
);
batch_fn!(
    /// A batch on [`Backend::ClmulGfni`].
    frames_gfni,
    "pclmulqdq,ssse3,gfni",
    common_gfni,
    [u64; 4]
);
batch_fn!(
    /// A batch on [`Backend::Affine`].
    frames_affine,
    "avx2,gfni",
    common_affine,
    Matrices
);

/// Defines the batch form of one backend's hash of 13 input bytes: the single-input function
/// inlined into a loop compiled for the backend's features.
macro_rules! inputs_fn {
    ($(#[$doc:meta])* $batch:ident, $features:literal, $one:ident, $key:ty) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        fn $batch(inputs: &[[u8; TUPLE_LEN]], out: &mut [u32], s: &$key) -> usize {
            let n = inputs.len().min(out.len());
            for (o, input) in out.iter_mut().zip(inputs) {
                *o = $one(input, s);
            }
            n
        }
    };
}

/// [`Backend::Clmul`] on 13 input bytes: the frame kernel on [`load_input`].
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3")]
fn input_ssse3(input: &[u8; TUPLE_LEN], s: &[u64; 4]) -> u32 {
    value_ssse3(load_input(input), s)
}

/// [`Backend::ClmulGfni`] on 13 input bytes: the frame kernel on [`load_input`].
#[inline]
#[target_feature(enable = "pclmulqdq,ssse3,gfni")]
fn input_gfni(input: &[u8; TUPLE_LEN], s: &[u64; 4]) -> u32 {
    value_gfni(load_input(input), s)
}

inputs_fn!(
    /// A batch of inputs on [`Backend::Clmul`].
    inputs_ssse3,
    "pclmulqdq,ssse3",
    input_ssse3,
    [u64; 4]
);
inputs_fn!(
    /// A batch of inputs on [`Backend::ClmulGfni`].
    inputs_gfni,
    "pclmulqdq,ssse3,gfni",
    input_gfni,
    [u64; 4]
);
/// The byte shuffle of group `group` for two inputs at once ([`pair_lanes`]): each 128-bit half
/// of the source holds 8 bytes of input `a` from byte `from` and the same 8 of input `b` (from
/// byte 0 in the lower half, `TUPLE_LEN - 8` in the upper: the bytes each half's matrices meet,
/// [`lane_matrix`]). Lane `l` meets matrix `d`; its byte `j` receives byte `d - j` of `a` and its
/// byte `4 + j` byte `d - j` of `b` (where `d - j` is a tuple byte), so that one affine map
/// serves both inputs: `a`'s share in the low 32 bits of each lane, `b`'s in the high.
const fn pair_shuffle(group: usize) -> [u8; 32] {
    let meets = group_meets(group);
    let mut s = [0x80u8; 32];
    let mut lane = 0;
    while lane < 4 {
        let from = if lane < 2 { 0 } else { TUPLE_LEN - 8 };
        let mut j = 0;
        while j < 4 {
            if let Some(i) = meets[lane][j] {
                // The byte is inside the 8 loaded from `from` (checked when the table is built).
                assert!(i >= from && i - from < 8);
                // CAST: below 8.
                let at = (i - from) as u8;
                // Within each 128-bit half: `a`'s 8 bytes at 0, `b`'s at 8.
                s[8 * lane + j] = at;
                s[8 * lane + 4 + j] = 8 + at;
            }
            j += 1;
        }
        lane += 1;
    }
    s
}

/// The shuffles of [`pair_lanes`].
static PAIR_SHUFFLES: AffineShuffles = [pair_shuffle(0), pair_shuffle(1), pair_shuffle(2), pair_shuffle(3)];

/// Where [`pair_lanes`] loads 16 bytes from the first of two neighbouring inputs: at 0 (the
/// first's first 8 bytes, then more), at `TUPLE_LEN - 8` (the first's last 8, then the second's
/// first 8) and at `2 TUPLE_LEN - 16` (the second's last 8 in the upper 8), all inside the pair.
const PAIR_LOADS: [usize; 3] = [0, TUPLE_LEN - 8, 2 * TUPLE_LEN - 16];

/// The [`Backend::Affine`] kernel on two neighbouring inputs `a`, `b` at once, up to the lanes:
/// three 16-byte loads from the pair ([`PAIR_LOADS`]), each broadcast to both 128-bit halves,
/// and two 32-bit blends give one register with the first 8 bytes of `a` and of `b` side by side
/// in the lower half and their last 8 in the upper, placed by every group ([`pair_shuffle`]).
/// Building the source from whole loads costs no byte shuffle, against two for joining 8-byte
/// loads of the two inputs (measured 1.05 to 0.83 ns a hash in batches of 32 on Zen 4).
/// Four byte shuffles and four affine maps for two hashes, half of what [`affine_lanes`] takes
/// (the two inputs fill the lane bytes one leaves 0); the result holds in each 64-bit lane `a`'s
/// share of its hash in the low 32 bits and `b`'s in the high.
#[inline]
#[target_feature(enable = "avx2,gfni")]
fn pair_lanes(pair: &[[u8; TUPLE_LEN]; 2], m: &Matrices) -> __m256i {
    const { assert!(PAIR_LOADS[2] + 16 == size_of::<[[u8; TUPLE_LEN]; 2]>()) };
    let base = pair.as_ptr().cast::<u8>();
    let load = |at: usize| {
        // SAFETY: every `at` of PAIR_LOADS has 16 bytes from it inside the pair (the assertion
        // above for the last; the arrays are contiguous, no padding); the pointer derives from
        // the whole pair; the load has no alignment requirement.
        _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(base.add(at).cast::<__m128i>()) })
    };
    let (l0, l1, l2) = (load(PAIR_LOADS[0]), load(PAIR_LOADS[1]), load(PAIR_LOADS[2]));
    // Lower half: [a first 8 (first load), b first 8 (upper 8 of the second)]; upper half:
    // [a last 8 (lower 8 of the second), b last 8 (upper 8 of the third)].
    let source = _mm256_blend_epi32::<0b1100_0000>(_mm256_blend_epi32::<0b0011_1100>(l0, l1), l2);
    let group = |g: usize| {
        let placed = _mm256_shuffle_epi8(source, load256(&PAIR_SHUFFLES[g]));
        _mm256_gf2p8affine_epi64_epi8::<0>(placed, load256(&m.0[g]))
    };
    _mm256_xor_si256(
        _mm256_xor_si256(group(0), group(1)),
        _mm256_xor_si256(group(2), group(3)),
    )
}

/// The hashes of four inputs `a`, `b`, `c`, `d` from [`pair_lanes`] of `a`, `b` and of `c`, `d`,
/// in input order: the four 64-bit lanes of each XORed (the two 128-bit halves of `ab` into half
/// 0, those of `cd` into half 1, then the two lanes of each half), which leaves `[a, b]` in lane
/// 0 and `[c, d]` in lane 2.
#[inline]
#[target_feature(enable = "avx2")]
fn fold_pairs(ab: __m256i, cd: __m256i) -> __m128i {
    let low_ab_high_cd = _mm256_blend_epi32::<0b1111_0000>(ab, cd);
    let high_ab_low_cd = _mm256_permute2x128_si256::<0x21>(ab, cd);
    let w = _mm256_xor_si256(low_ab_high_cd, high_ab_low_cd);
    // The two 64-bit lanes of each half swapped.
    let s = _mm256_xor_si256(w, _mm256_shuffle_epi32::<0b01_00_11_10>(w));
    // 64-bit lanes 0 and 2 to the low half.
    _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b11_01_10_00>(s))
}

/// A batch of inputs on [`Backend::Affine`]: four at a time by [`pair_lanes`] and [`fold_pairs`]
/// (one 16-byte store), the n % 4 left by [`input_affine`]. Every load stays inside its pair of
/// inputs.
#[target_feature(enable = "avx2,gfni")]
fn inputs_affine(inputs: &[[u8; TUPLE_LEN]], out: &mut [u32], m: &Matrices) -> usize {
    let n = inputs.len().min(out.len());
    let (pairs, _) = inputs[..n].as_chunks::<2>();
    let (quads, _) = pairs.as_chunks::<2>();
    let (outs, _) = out[..n].as_chunks_mut::<4>();
    for ([ab, cd], o) in quads.iter().zip(outs.iter_mut()) {
        let folded = fold_pairs(pair_lanes(ab, m), pair_lanes(cd, m));
        // SAFETY: `o` is 4 writable `u32`s, 16 bytes; the store has no alignment requirement.
        unsafe { _mm_storeu_si128(o.as_mut_ptr().cast::<__m128i>(), folded) };
    }
    let done = 4 * quads.len();
    for (input, o) in inputs[done..n].iter().zip(&mut out[done..n]) {
        *o = input_affine(input, m);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::{
        affine_shuffle, pair_shuffle, HalfOffsets, ABSENT, FRAME_HALVES, GFNI_REVERSE, INPUT_HALVES,
    };
    use crate::affine::{affine_byte, lane_matrix, Matrices, GROUPS};
    use onic_core::rss::{RssKey, ShellHasher};

    #[test]
    fn gfni_matrix_reverses_the_bits_of_every_byte() {
        for x in 0..=u8::MAX {
            assert_eq!(affine_byte(GFNI_REVERSE, x), x.reverse_bits(), "byte {x:#04x}");
        }
    }

    /// `value_affine` step by step in software (byte shuffle within each 128-bit half of the
    /// source, affine map per 64-bit lane, XOR of all lanes, then of the two 32-bit halves), so
    /// that the placement is checked on CPUs without GFNI too.
    fn affine_model(m: &Matrices, loaded: &[[u8; 16]; 2], offsets: &HalfOffsets) -> u32 {
        let mut sum = [0u8; 8];
        for group in 0..GROUPS {
            for (n, &index) in affine_shuffle(group, offsets).iter().enumerate() {
                let byte = if index & 0x80 == 0 {
                    loaded[n / 16][usize::from(index & 15)]
                } else {
                    0
                };
                sum[n % 8] ^= affine_byte(m.0[group][n / 8], byte);
            }
        }
        let q = u64::from_le_bytes(sum);
        // CAST: the two halves.
        (q as u32) ^ (q >> 32) as u32
    }

    #[test]
    fn affine_layout_gives_the_table_path_hash() {
        let mut odd = [0u8; 40];
        for (n, b) in odd.iter_mut().enumerate() {
            // CAST: n < 40.
            *b = (n as u8).wrapping_mul(0x3B) ^ 0xC6;
        }
        for key in [RssKey::DEFAULT, RssKey::MICROSOFT, RssKey::new(odd)] {
            let (m, table) = (Matrices::new(&key), ShellHasher::new(&key));
            for round in 0u32..256 {
                // Mixed bytes, in the tuple and around it (where a frame has its TTL and
                // checksum, which the shuffles must skip).
                let mixed = |n: usize, salt: u32| {
                    // CAST: a byte of a mixed counter.
                    ((round ^ salt).wrapping_mul(0x2545_F491) >> (n % 4 * 8)) as u8
                        ^ (n as u8).wrapping_mul(101)
                };
                let tuple: [u8; 13] = core::array::from_fn(|i| mixed(i, 0));
                for offsets in [&FRAME_HALVES, &INPUT_HALVES] {
                    let loaded: [[u8; 16]; 2] = core::array::from_fn(|half| {
                        let mut h: [u8; 16] = core::array::from_fn(|n| mixed(n, 0x9E37_79B9 + half as u32));
                        for (i, &at) in offsets[half].iter().enumerate() {
                            if at != ABSENT {
                                h[usize::from(at)] = tuple[i];
                            }
                        }
                        h
                    });
                    assert_eq!(
                        affine_model(&m, &loaded, offsets),
                        table.hash_input(&tuple),
                        "round {round}, offsets {offsets:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn affine_shuffle_places_each_pair_once() {
        // Every (tuple byte, hash byte) pair appears exactly once over the shuffles, for both
        // source layouts, each in the 32-bit half of its lane that `fold_one` reads (low in the
        // even lanes, high in the odd), and in each half of each layout the bytes it holds have
        // distinct positions.
        for offsets in [&FRAME_HALVES, &INPUT_HALVES] {
            for half in offsets {
                let mut taken = [false; 16];
                for &at in half.iter().filter(|&&o| o != ABSENT) {
                    assert!(!taken[usize::from(at)], "position {at} twice in {half:?}");
                    taken[usize::from(at)] = true;
                }
            }
            let mut seen = [[0u8; 4]; 13];
            for group in 0..GROUPS {
                for (n, &index) in affine_shuffle(group, offsets).iter().enumerate() {
                    if index & 0x80 == 0 {
                        let d = lane_matrix(group, n / 8);
                        assert_eq!(n % 8 / 4, d % 2, "byte {n} of group {group}");
                        let j = n % 4;
                        let i = offsets[n / 16].iter().position(|&o| o == index).unwrap();
                        assert_eq!(i + j, d);
                        seen[i][j] += 1;
                    }
                }
            }
            assert_eq!(seen, [[1; 4]; 13], "offsets {offsets:?}");
        }
    }

    /// `pair_lanes` step by step in software: the lower 128-bit half of the source holds the
    /// first 8 bytes of `a` and of `b`, the upper half their last 8, the byte shuffle within
    /// each half and the affine map per 64-bit lane, the XOR of the lanes; `a`'s hash in the low
    /// 32 bits, `b`'s in the high.
    fn pair_model(m: &Matrices, a: &[u8; 13], b: &[u8; 13]) -> (u32, u32) {
        let source: [[u8; 16]; 2] = core::array::from_fn(|half| {
            let from = 5 * half;
            let mut s = [0u8; 16];
            s[..8].copy_from_slice(&a[from..from + 8]);
            s[8..].copy_from_slice(&b[from..from + 8]);
            s
        });
        let mut sum = [0u8; 8];
        for group in 0..GROUPS {
            for (n, &index) in pair_shuffle(group).iter().enumerate() {
                let byte = if index & 0x80 == 0 {
                    source[n / 16][usize::from(index & 15)]
                } else {
                    0
                };
                sum[n % 8] ^= affine_byte(m.0[group][n / 8], byte);
            }
        }
        let q = u64::from_le_bytes(sum);
        // CAST: the two halves.
        (q as u32, (q >> 32) as u32)
    }

    #[test]
    fn pair_layout_gives_the_table_path_hashes() {
        for key in [RssKey::DEFAULT, RssKey::MICROSOFT] {
            let (m, table) = (Matrices::new(&key), ShellHasher::new(&key));
            for round in 0u32..256 {
                let input = |salt: u32| -> [u8; 13] {
                    core::array::from_fn(|n| {
                        // CAST: a byte of a mixed counter.
                        (round.wrapping_mul(0x2545_F491) ^ salt).rotate_left(n as u32 * 5) as u8
                            ^ (n as u8).wrapping_mul(37)
                    })
                };
                let (a, b) = (input(0), input(0x9E37_79B9));
                assert_eq!(
                    pair_model(&m, &a, &b),
                    (table.hash_input(&a), table.hash_input(&b)),
                    "round {round}"
                );
            }
        }
    }

    #[test]
    fn pair_shuffle_places_each_pair_once_per_input() {
        // Every (tuple byte, hash byte) pair once for `a` (source bytes 0..8, low 32 bits of the
        // lane) and once for `b` (source bytes 8..16, high 32 bits).
        let mut seen = [[[0u8; 4]; 13]; 2];
        for group in 0..GROUPS {
            for (n, &index) in pair_shuffle(group).iter().enumerate() {
                if index & 0x80 == 0 {
                    let from = 5 * (n / 16);
                    let (d, which, j) = (lane_matrix(group, n / 8), n % 8 / 4, n % 4);
                    assert_eq!(usize::from(index) / 8, which, "byte {n} of group {group}");
                    let i = usize::from(index) % 8 + from;
                    assert_eq!(i + j, d);
                    seen[which][i][j] += 1;
                }
            }
        }
        assert_eq!(seen, [[[1; 4]; 13]; 2]);
    }
}
