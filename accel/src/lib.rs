//! The shell's RX hash (hardware.md §9.4), accelerated: the same value as `onic-core`'s
//! table-driven [`ShellHasher`], computed by GF(2) bit-matrix products (GFNI) or carry-less
//! multiplication where the CPU has them.
//!
//! # Why a multiplication
//!
//! The shell's hash XORs, for every set bit `j` of its input `X`, the 32 key bits starting at bit
//! `j` (see `onic_core::rss::shell_hash`). Bit `t` of the hash is therefore the parity of
//! `X_j · K_(j+t)` over all `j`: a correlation of the input with the key, which is a carry-less
//! product of the bit-reversed input with the key. [`AccelHasher`] splits the 104 input bits
//! (protocol, addresses, L4 bytes) into four chunks of at most 32 bits; chunk `c`, bit-reversed,
//! multiplied by the 64 key bits from bit `32 c + 4`, has the chunk's share of hash bit `t` at
//! product bit `31 + t`. Four 64 × 64-bit multiplications, XORed, and a shift give the hash.
//!
//! # Backends, chosen at run time
//!
//! [`Backend::detect`] says which one a CPU gets, and why.
//!
//! - [`Backend::Clmul`] (x86-64 with PCLMULQDQ and SSSE3): one 16-byte load picks the 13 input
//!   bytes of an untagged IPv4 frame with a 20-byte header out of the frame, a byte shuffle puts
//!   them in reverse order, two nibble lookups reverse the bits of each byte, four `pclmulqdq`.
//! - [`Backend::ClmulGfni`] (also GFNI): the bit reversal is one `gf2p8affineqb`.
//! - [`Backend::Affine`] (x86-64 with GFNI and AVX2): no multiplication. The hash is
//!   linear in the 13 input bytes, and the map from input byte `i` to hash byte `j` is an 8 × 8
//!   bit matrix that depends on `i + j` alone (the window slides along the key), so 16 matrices,
//!   derived from the key at [`AccelHasher::new`] / [`AccelHasher::rekey`], cover all 52 pairs.
//!   The 16-byte load is broadcast to a ymm register, four byte shuffles put each input byte in
//!   the 64-bit lane of the matrix it meets, four `vgf2p8affineqb` apply the matrices, and the
//!   lanes are XORed down to the 32-bit hash. (The same in two AVX-512 registers measured
//!   slower on Zen 4.)
//! - [`Backend::Table`]: `onic-core`'s [`ShellHasher`], on every other CPU and architecture, and
//!   on x86-64 targets built without SSE (`x86_64-unknown-none`: a kernel or bare-metal image that
//!   may not have enabled the SSE registers).
//!
//! Every backend falls back to the table path for frames outside the common case (VLAN tags, IP
//! options, non-IPv4, short buffers), so the result is bit-exact with [`ShellHasher`] for every
//! input; the property tests in `tests/` check that against the table path and the bit-serial
//! reference.
//!
//! Code compiled for CPU features the build does not assume cannot be inlined into code that is
//! not, so a frame at a time costs one call into the backend's code (the common-case test, the
//! products and the hash type are all inside it). [`AccelHasher::hash_frames`] makes one such call
//! per batch, with the per-frame work inlined in its loop. A build that assumes the features
//! (`RUSTFLAGS="-C target-feature=+avx2,+gfni"` for [`Backend::Affine`], for a CPU known to
//! have them) inlines a single hash into its caller too, its constants kept in the caller's
//! registers: `cargo xtask bench-peers` measures both builds (`docs/benchmarks.md`).
//!
//! # The input form
//!
//! [`AccelHasher::hash_input`] and [`AccelHasher::hash_inputs`] hash the 13 input bytes once a
//! parser has extracted them (protocol, source, destination, L4 bytes, as
//! [`ShellTuple::as_bytes`](onic_core::rss::ShellTuple::as_bytes) gives them), with no common-case
//! test and no hash type: the work a Toeplitz hash of an already extracted tuple does, so that the
//! two can be measured alike. Each backend runs the same kernel as for a frame: the frame path
//! loads its 16 bytes straight from the frame, the input form reads its 13 bytes into a register
//! with two overlapping 8-byte loads (nothing past the array). The multiplication backends then
//! shuffle them into the frame's positions; the affine backend skips that shuffle, its kernel
//! taking the byte placement for either layout (one byte shuffle less per hash, measured in
//! `docs/benchmarks.md`). In a batch it hashes two inputs with one kernel's work: a lane's
//! affine map serves four input bytes of one input and leaves four lane bytes 0, which the
//! second input fills (the first 8 bytes of both side by side for half the matrices, the last 8
//! for the other half: four byte shuffles and four affine maps for two hashes), and four hashes
//! are folded together and stored at once. Three 16-byte loads from two neighbouring inputs
//! (26 bytes, nothing outside them) and two blends set both registers up. The table path is
//! `onic-core`'s [`ShellHasher::hash_input`].
//!
//! # `unsafe`
//!
//! The intrinsics are the only `unsafe` of the datapath crates: calling a function compiled for
//! CPU features the build does not assume. Each call site states why the features are there (the
//! backend is only chosen after the CPU reported them). The Linux module does not use this crate
//! (see `os-linux/README.md`, "SIMD in the module").

#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

use onic_core::rss::shell_hash::TUPLE_LEN;
use onic_core::rss::{FrameHash, RssKey, RxHash, RxHasher, ShellHasher};

mod affine;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod x86;

/// How an [`AccelHasher`] computes the hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// `onic-core`'s table path (13 lookups).
    Table,
    /// Carry-less multiplication (x86-64: PCLMULQDQ, SSSE3).
    Clmul,
    /// Carry-less multiplication with the bit reversal by GFNI (x86-64: PCLMULQDQ, SSSE3, GFNI).
    ClmulGfni,
    /// Bit-matrix products by GFNI affine transformations on AVX2 registers (x86-64: GFNI,
    /// AVX2).
    Affine,
}

impl Backend {
    /// Every backend, whether this CPU runs it or not.
    pub const ALL: [Self; 4] = [Self::Table, Self::Clmul, Self::ClmulGfni, Self::Affine];

    /// Short name: `table`, `clmul`, `clmul+gfni` or `affine`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Clmul => "clmul",
            Self::ClmulGfni => "clmul+gfni",
            Self::Affine => "affine",
        }
    }

    /// The backend for this CPU: [`Backend::Affine`] where the CPU has GFNI and AVX2,
    /// [`Backend::ClmulGfni`] where it has GFNI and PCLMULQDQ but not AVX2 (the Atom cores of
    /// Goldmont Plus and Tremont), else the table path.
    ///
    /// Measured on a Zen 4 EPYC (`docs/benchmarks.md`, "RX hash"), the affine backend is the
    /// fastest there both a frame at a time (about 3.3 ns, against 3.7 for the table path and
    /// 4.4 for the products) and 32 frames per [`AccelHasher::hash_frames`] call (about 2.5,
    /// against 4.0 and 3.4). Intel cores with GFNI and AVX2 get it too, unmeasured.
    ///
    /// A CPU with PCLMULQDQ but no GFNI gets the table path on purpose: those are the older
    /// cores (e.g. AMD Zen 2/3, Intel before Ice Lake) where PCLMULQDQ issues at most every
    /// second cycle. Measured on a Zen 3 guest (`docs/benchmarks.md`, "RX hash"): a frame at a
    /// time, as the RX path hashes, the table path is faster (about 4.5 against 5.25 ns); 32
    /// frames per [`AccelHasher::hash_frames`] call, the products are (about 4.2 against 4.9 ns).
    /// [`AccelHasher::with_backend`] gives [`Backend::Clmul`] there for batch users.
    #[must_use]
    pub fn detect() -> Self {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            let f = x86::Features::detect();
            if f.avx2_gfni {
                return Self::Affine;
            }
            if f.clmul && f.gfni {
                return Self::ClmulGfni;
            }
        }
        Self::Table
    }

    /// Whether this CPU runs the backend.
    #[must_use]
    pub fn available(self) -> bool {
        match self {
            Self::Table => true,
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Clmul => x86::Features::detect().clmul,
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::ClmulGfni => {
                let f = x86::Features::detect();
                f.clmul && f.gfni
            }
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Affine => x86::Features::detect().avx2_gfni,
            #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
            Self::Clmul | Self::ClmulGfni | Self::Affine => false,
        }
    }
}

/// 64 key bits starting at bit `j` of the little-endian key integer (bits past the key are 0).
const fn key_bits64(key: &[u8; 40], j: usize) -> u64 {
    let mut acc: u128 = 0;
    let mut n = 0;
    while n < 9 {
        let i = j / 8 + n;
        if i < key.len() {
            acc |= (key[i] as u128) << (8 * n);
        }
        n += 1;
    }
    (acc >> (j % 8)) as u64
}

/// The key segments the multiplications use: for input chunk `c`, the 64 key bits from bit
/// `32 c + 4` (the input's first 4 bits are the VLAN nibble, always 0).
const fn key_segments(key: &RssKey) -> [u64; 4] {
    let k = key.as_bytes();
    [
        key_bits64(k, 4),
        key_bits64(k, 36),
        key_bits64(k, 68),
        key_bits64(k, 100),
    ]
}

/// The key in the forms the backends other than the table path use.
#[derive(Clone)]
#[cfg_attr(
    not(all(target_arch = "x86_64", target_feature = "sse2")),
    allow(dead_code, reason = "only the x86-64 backends read them")
)]
struct KeyForms {
    /// The multiplications' key segments ([`key_segments`]).
    segments: [u64; 4],
    /// The affine backend's bit matrices.
    matrices: affine::Matrices,
}

impl KeyForms {
    const fn new(key: &RssKey) -> Self {
        Self {
            segments: key_segments(key),
            matrices: affine::Matrices::new(key),
        }
    }
}

/// The shell's hash for one key, by the fastest backend the CPU has (see the crate docs).
#[derive(Clone)]
pub struct AccelHasher {
    table: ShellHasher,
    forms: KeyForms,
    backend: Backend,
}

impl AccelHasher {
    /// A hasher for `key` on the backend [`Backend::detect`] chooses for this CPU.
    #[must_use]
    pub fn new(key: &RssKey) -> Self {
        Self {
            table: ShellHasher::new(key),
            forms: KeyForms::new(key),
            backend: Backend::detect(),
        }
    }

    /// A hasher for `key` on `backend`; `None` if this CPU does not run it.
    #[must_use]
    pub fn with_backend(key: &RssKey, backend: Backend) -> Option<Self> {
        backend.available().then(|| Self {
            table: ShellHasher::new(key),
            forms: KeyForms::new(key),
            backend,
        })
    }

    /// The backend in use.
    #[must_use]
    pub const fn backend(&self) -> Backend {
        self.backend
    }

    /// The key.
    #[must_use]
    pub const fn key(&self) -> &RssKey {
        self.table.key()
    }

    /// Another key, same backend.
    pub fn rekey(&mut self, key: &RssKey) {
        self.table.rekey(key);
        self.forms = KeyForms::new(key);
    }

    /// The hash of one frame (bytes from the destination MAC on) and its protocol.
    #[inline]
    #[must_use]
    pub fn hash_frame_with_protocol(&self, frame: &[u8]) -> FrameHash {
        if self.backend == Backend::Table {
            return self.table.hash_frame_with_protocol(frame);
        }
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if let Some(h) = x86::hash_common(frame, self.backend, &self.forms) {
            return h;
        }
        self.hash_by_table(frame)
    }

    /// The table path for the frames a multiplication backend leaves (out of line, so that the
    /// fast path stays small).
    #[inline(never)]
    fn hash_by_table(&self, frame: &[u8]) -> FrameHash {
        self.table.hash_frame_with_protocol(frame)
    }

    /// The hash of one frame.
    #[inline]
    #[must_use]
    pub fn hash_frame(&self, frame: &[u8]) -> RxHash {
        self.hash_frame_with_protocol(frame).hash
    }

    /// Hashes `frames[i]` into `out[i]` for as many frames as both slices hold; returns that count.
    /// On a multiplication backend the whole batch is one call into code compiled for the
    /// backend's CPU features, which a frame at a time cannot be.
    pub fn hash_frames(&self, frames: &[&[u8]], out: &mut [RxHash]) -> usize {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if self.backend != Backend::Table {
            return x86::hash_frames(frames, out, self.backend, &self.forms, &self.table);
        }
        self.table.hash_frames(frames, out)
    }

    /// The hash value of the shell's 13 input bytes once a parser has extracted them: protocol,
    /// source address, destination address and the 4 bytes after the IPv4 header, in wire order
    /// ([`ShellTuple::as_bytes`](onic_core::rss::ShellTuple::as_bytes)). No type: the caller that
    /// parsed the frame knows it. The same kernel as [`AccelHasher::hash_frame`] on every
    /// backend, and every input is in its domain (no table-path fallback).
    #[inline]
    #[must_use]
    pub fn hash_input(&self, input: &[u8; TUPLE_LEN]) -> u32 {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if let Some(value) = x86::hash_input(input, self.backend, &self.forms) {
            return value;
        }
        self.table.hash_input(input)
    }

    /// Hashes `inputs[i]` (as [`AccelHasher::hash_input`]) into `out[i]` for as many inputs as
    /// both slices hold; returns that count. On a multiplication backend the whole batch is one
    /// call into code compiled for the backend's CPU features.
    pub fn hash_inputs(&self, inputs: &[[u8; TUPLE_LEN]], out: &mut [u32]) -> usize {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if let Some(n) = x86::hash_inputs(inputs, out, self.backend, &self.forms) {
            return n;
        }
        for (o, input) in out.iter_mut().zip(inputs) {
            *o = self.table.hash_input(input);
        }
        inputs.len().min(out.len())
    }
}

impl RxHasher for AccelHasher {
    #[inline]
    fn frame_hash(&self, frame: &[u8]) -> FrameHash {
        self.hash_frame_with_protocol(frame)
    }
}

impl Default for AccelHasher {
    /// A hasher for the RTL reset key.
    fn default() -> Self {
        Self::new(&RssKey::DEFAULT)
    }
}

impl core::fmt::Debug for AccelHasher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AccelHasher")
            .field("backend", &self.backend)
            .field("key", self.key())
            .finish_non_exhaustive()
    }
}
