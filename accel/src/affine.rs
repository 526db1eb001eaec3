//! The bit matrices of [`Backend::Affine`](crate::Backend::Affine), derived from the key.
//!
//! Input byte `i` of the shell's hash (tuple position 0..13: protocol, source, destination, L4
//! bytes) has its bit `b` at input bit `4 + 8 i + b`; output (hash) byte `j` has its bit `c` at
//! hash bit `8 j + c`. That input bit reaches that output bit through key bit
//! `4 + 8 i + b + 8 j + c` (the window of the input bit, at offset `8 j + c`). So the map from input
//! byte `i` to output byte `j` is an 8 × 8 bit matrix that depends on `d = i + j` alone:
//! `A_d`, output bit `c` = parity of (input byte AND the 8 key bits from `4 + 8 d + c`). With
//! `i` in 0..13 and `j` in 0..4 there are 16 of them, `d` in 0..16.
//!
//! `gf2p8affineqb` computes output bit `c` of a byte as the parity of (the byte AND matrix byte
//! `7 - c`), so `A_d` as its 64-bit matrix operand holds the key byte for output bit `c` in byte
//! `7 - c`. The x86 code places each input byte in the lane of the matrix it meets and folds the
//! lanes (see `x86::common_affine`).
//!
//! Which lane holds which matrix ([`lane_matrix`]): the 128-bit half of a register holding
//! `A_0`..`A_7` meets input bytes 0..8 only, the half holding `A_8`..`A_15` bytes 5..13 only
//! (`d - j` with `j` in 0..4), so each half of a source register needs only 8 of the 13 input
//! bytes, which two 8-byte loads provide without joining them first.

use onic_core::rss::RssKey;

use crate::key_bits64;

/// Number of matrices: one per `i + j`, input byte `i` in 0..13, output byte `j` in 0..4.
pub(crate) const COUNT: usize = 16;

/// X bit of input byte 0's bit 0 (bits 0..3 are the VLAN nibble, always 0).
const FIRST_BIT: usize = 4;

/// Groups of four matrices, one 256-bit register each.
pub(crate) const GROUPS: usize = COUNT / 4;

/// The matrix `d` of 64-bit lane `lane` of group `group`: the lower 128-bit half of every
/// group (lanes 0 and 1) holds `A_0`..`A_7`, the upper half (lanes 2 and 3) `A_8`..`A_15`, two
/// consecutive matrices per half and group. Lane parity is matrix parity, which the fold relies
/// on (odd matrices use the upper 32 bits of their lane).
pub(crate) const fn lane_matrix(group: usize, lane: usize) -> usize {
    8 * (lane / 2) + 2 * group + lane % 2
}

/// The matrices `A_0`..`A_15` in `gf2p8affineqb`'s operand form, in [`GROUPS`] groups of four
/// (one ymm register each) placed by [`lane_matrix`], aligned so that the 128 bytes take two
/// cache lines.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Matrices(pub(crate) [[u64; 4]; GROUPS]);

impl Matrices {
    /// The matrices for `key`: byte `7 - c` of `A_d` is the 8 key bits from `4 + 8 d + c`.
    pub(crate) const fn new(key: &RssKey) -> Self {
        let k = key.as_bytes();
        let mut m = [[0u64; 4]; GROUPS];
        let mut at = 0;
        while at < COUNT {
            let (group, lane) = (at / 4, at % 4);
            let d = lane_matrix(group, lane);
            let mut rows = [0u8; 8];
            let mut c = 0;
            while c < 8 {
                // CAST: the low 8 of the 64 key bits from that position.
                rows[7 - c] = key_bits64(k, FIRST_BIT + 8 * d + c) as u8;
                c += 1;
            }
            m[group][lane] = u64::from_le_bytes(rows);
            at += 1;
        }
        Self(m)
    }

    /// `A_d`.
    #[cfg(test)]
    pub(crate) fn get(&self, d: usize) -> u64 {
        let at = (0..COUNT)
            .find(|&at| lane_matrix(at / 4, at % 4) == d)
            .expect("d below COUNT");
        self.0[at / 4][at % 4]
    }
}

/// `gf2p8affineqb` on one byte with an immediate of 0, as the instruction set reference defines
/// it: result bit `i` is the parity of `matrix.byte[7 - i] & x`. A model for the tests, which
/// must check the matrices and the layout on CPUs without the instruction too.
#[cfg(test)]
pub(crate) fn affine_byte(matrix: u64, x: u8) -> u8 {
    let rows = matrix.to_le_bytes();
    (0..8).fold(0, |out, i| {
        // CAST: a parity bit.
        let bit = (rows[7 - i] & x).count_ones() as u8 & 1;
        out | bit << i
    })
}

#[cfg(test)]
mod tests {
    use super::{affine_byte, lane_matrix, Matrices, COUNT, GROUPS};
    use onic_core::rss::{shell_hash_reference, RssKey, ShellHasher};

    /// An untagged IPv4 frame (IHL 5) with the 13 input bytes `tuple` at their frame offsets.
    fn frame_with(tuple: &[u8; 13]) -> [u8; 64] {
        let mut f = [0u8; 64];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = tuple[0];
        f[26..38].copy_from_slice(&tuple[1..]);
        f
    }

    /// The hash as the matrices give it: input byte `i` through `A_(i+j)` into output byte `j`.
    fn hash_by_matrices(m: &Matrices, tuple: &[u8; 13]) -> u32 {
        let mut h = 0u32;
        for (i, &x) in tuple.iter().enumerate() {
            for j in 0..4 {
                h ^= u32::from(affine_byte(m.get(i + j), x)) << (8 * j);
            }
        }
        h
    }

    fn keys() -> [RssKey; 3] {
        let mut odd = [0u8; 40];
        for (n, b) in odd.iter_mut().enumerate() {
            // CAST: n < 40.
            *b = (n as u8).wrapping_mul(0x9D) ^ 0x5A;
        }
        [RssKey::DEFAULT, RssKey::MICROSOFT, RssKey::new(odd)]
    }

    #[test]
    fn every_single_input_bit_matches_the_reference() {
        for key in keys() {
            let m = Matrices::new(&key);
            for i in 0..13 {
                for b in 0..8 {
                    let mut tuple = [0u8; 13];
                    tuple[i] = 1 << b;
                    let want = shell_hash_reference(&key, &frame_with(&tuple));
                    assert_eq!(hash_by_matrices(&m, &tuple), want, "byte {i} bit {b}");
                }
            }
        }
    }

    #[test]
    fn mixed_inputs_match_the_table_path() {
        // Linearity holds for the matrices only if every byte value works, not just one bit.
        for key in keys() {
            let (m, table) = (Matrices::new(&key), ShellHasher::new(&key));
            let mut tuple = [0u8; 13];
            for round in 0u32..512 {
                for (n, b) in tuple.iter_mut().enumerate() {
                    // CAST: a byte of a mixed counter.
                    *b = (round.wrapping_mul(0x0101_0F1F) >> (n % 4 * 8)) as u8 ^ (n as u8).wrapping_mul(37);
                }
                assert_eq!(hash_by_matrices(&m, &tuple), table.hash_input(&tuple));
            }
        }
    }

    #[test]
    fn each_matrix_has_one_lane_and_each_half_meets_eight_input_bytes() {
        let mut seen = [0u8; COUNT];
        for group in 0..GROUPS {
            for lane in 0..4 {
                let d = lane_matrix(group, lane);
                seen[d] += 1;
                assert_eq!(d % 2, lane % 2, "group {group} lane {lane}: parity");
                // The input bytes this matrix meets (d - j, j in 0..4, inside the tuple) lie in
                // the 8 bytes its half is loaded with: 0..8 for the lower half, 5..13 above.
                let from = if lane < 2 { 0 } else { 5 };
                for j in 0..4 {
                    if let Some(i) = d.checked_sub(j).filter(|&i| i < 13) {
                        assert!(
                            (from..from + 8).contains(&i),
                            "group {group} lane {lane}: byte {i}"
                        );
                    }
                }
            }
        }
        assert_eq!(seen, [1; COUNT]);
    }

    #[test]
    fn matrices_follow_the_key() {
        let (a, b) = (Matrices::new(&RssKey::DEFAULT), Matrices::new(&RssKey::MICROSOFT));
        assert!((0..COUNT).any(|d| a.get(d) != b.get(d)));
        // The model: the identity matrix changes nothing.
        for x in 0..=u8::MAX {
            assert_eq!(affine_byte(0x0102_0408_1020_4080, x), x);
        }
    }
}
