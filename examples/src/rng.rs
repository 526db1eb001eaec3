//! xorshift64*: a small, seeded, reproducible generator for the tool's made-up flows, addresses,
//! ports and frame sizes (not for anything that needs real randomness).

/// The generator's state (never zero).
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`, spread over the whole word first.
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A generator that starts from `state` as it is; `state` must not be zero.
    pub fn from_state(state: u64) -> Self {
        Self(state)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
