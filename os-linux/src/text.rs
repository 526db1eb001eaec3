//! Text in fixed buffers: what `write!` produces in the module, where nothing may allocate or
//! panic (the logger runs in every context, the datapath's included; `cargo xtask
//! panic-paths` checks the object).

use core::fmt::Write;

/// A fixed buffer that `write!` fills and truncates (at a byte, so a truncated line may end
/// inside a character; its readers take bytes).
pub struct FixedBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> FixedBuf<N> {
    /// An empty buffer.
    #[must_use]
    pub const fn new() -> Self {
        Self { buf: [0; N], len: 0 }
    }

    /// What was written.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl<const N: usize> Default for FixedBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Write for FixedBuf<N> {
    // No indexing and no `copy_from_slice`: neither has a panic path then.
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.get_mut(self.len..).unwrap_or_default();
        let mut n = 0;
        for (d, b) in room.iter_mut().zip(s.as_bytes()) {
            *d = *b;
            n += 1;
        }
        self.len += n;
        Ok(())
    }

    fn write_char(&mut self, c: char) -> core::fmt::Result {
        let (bytes, len) = utf8(c);
        for b in bytes.iter().take(len) {
            if self.len >= N {
                break;
            }
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = *b;
            }
            self.len += 1;
        }
        Ok(())
    }
}

/// `c`'s UTF-8 bytes and their count (RFC 3629), without `char::encode_utf8`, whose check of
/// the buffer's size is a panic path.
#[must_use]
pub fn utf8(c: char) -> ([u8; 4], usize) {
    let v = u32::from(c);
    // CAST: every value is shifted or masked into 0..=255 first.
    let cont = |shift: u32| (0x80 | ((v >> shift) & 0x3F)) as u8;
    match v {
        0..=0x7F => ([v as u8, 0, 0, 0], 1),
        0x80..=0x7FF => ([(0xC0 | (v >> 6)) as u8, cont(0), 0, 0], 2),
        0x800..=0xFFFF => ([(0xE0 | (v >> 12)) as u8, cont(6), cont(0), 0], 3),
        _ => ([(0xF0 | (v >> 18)) as u8, cont(12), cont(6), cont(0)], 4),
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    #[test]
    fn characters_encode_as_the_standard_library_does() {
        for c in ['a', '\u{7f}', 'é', '\u{7ff}', '€', '\u{ffff}', '😀', char::MAX] {
            let (b, n) = utf8(c);
            let mut want = [0u8; 4];
            assert_eq!(&b[..n], c.encode_utf8(&mut want).as_bytes(), "{c:?}");
        }
    }

    #[test]
    fn writes_truncate_at_the_buffer_end() {
        let mut b = FixedBuf::<5>::new();
        let c = 'c';
        write!(b, "ab{c}é€").unwrap();
        // "abc" + 'é' (2 bytes) fill 5; '€' does not fit.
        assert_eq!(b.as_bytes(), "abcé".as_bytes());
        let mut b = FixedBuf::<4>::new();
        write!(b, "{:?}", "x\ny").unwrap();
        assert_eq!(b.as_bytes(), b"\"x\\n");
    }
}
