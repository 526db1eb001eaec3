//! The `bpf_trace_printk` format language: `%d %i %u %x %X %c %p %s %%`, with an optional `0`
//! flag, a width, and `l`/`ll`/`h` length modifiers; at most three conversions. `%s` reads a
//! NUL-terminated string of at most 64 bytes from program memory.

use alloc::string::String;
use core::fmt::Write;

/// Longest string `%s` reads.
const STR_MAX: usize = 64;

/// Formats `fmt` with `args` into `out`; `read(addr, buf)` fills `buf` from program memory and
/// says whether it could. `Err(())` for a format the kernel would refuse.
#[allow(clippy::result_unit_err)]
pub fn format(
    fmt: &[u8],
    args: [u64; 3],
    out: &mut String,
    mut read: impl FnMut(u64, &mut [u8]) -> bool,
) -> Result<(), ()> {
    let mut next = 0;
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        if c != b'%' {
            out.push(if c.is_ascii() { c as char } else { '?' });
            continue;
        }
        if fmt.get(i) == Some(&b'%') {
            out.push('%');
            i += 1;
            continue;
        }
        let zero = fmt.get(i) == Some(&b'0');
        let mut width = 0usize;
        while let Some(d) = fmt.get(i).filter(|d| d.is_ascii_digit()) {
            width = (width * 10 + usize::from(d - b'0')).min(64);
            i += 1;
        }
        let mut long = 0;
        while let Some(m) = fmt.get(i).filter(|m| matches!(m, b'l' | b'h')) {
            long += usize::from(*m == b'l');
            i += 1;
        }
        let conv = *fmt.get(i).ok_or(())?;
        i += 1;
        let arg = *args.get(next).ok_or(())?;
        next += 1;
        let v = if long > 0 { arg } else { arg & 0xffff_ffff };
        let text = match conv {
            b'd' | b'i' if long > 0 => alloc::format!("{}", v as i64),
            b'd' | b'i' => alloc::format!("{}", v as u32 as i32),
            b'u' => alloc::format!("{v}"),
            b'x' => alloc::format!("{v:x}"),
            b'X' => alloc::format!("{v:X}"),
            b'c' => String::from(char::from(v as u8)),
            b'p' => alloc::format!("{arg:#x}"),
            b's' => read_str(arg, &mut read)?,
            _ => return Err(()),
        };
        let pad = width.saturating_sub(text.len());
        for _ in 0..pad {
            out.push(if zero { '0' } else { ' ' });
        }
        let _ = out.write_str(&text);
    }
    Ok(())
}

fn read_str(addr: u64, read: &mut impl FnMut(u64, &mut [u8]) -> bool) -> Result<String, ()> {
    let mut s = String::new();
    for k in 0..STR_MAX as u64 {
        let mut b = [0u8];
        if !read(addr.wrapping_add(k), &mut b) {
            return Err(());
        }
        if b[0] == 0 {
            break;
        }
        s.push(if b[0].is_ascii() { b[0] as char } else { '?' });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(f: &str, args: [u64; 3]) -> Result<String, ()> {
        let mut s = String::new();
        format(f.as_bytes(), args, &mut s, |a, b| {
            let text = b"hi\0";
            match text.get(a as usize) {
                Some(&c) => {
                    b[0] = c;
                    true
                }
                None => false,
            }
        })?;
        Ok(s)
    }

    #[test]
    fn conversions() {
        assert_eq!(fmt("n=%d x=%x %%", [u64::MAX, 255, 0]).unwrap(), "n=-1 x=ff %");
        assert_eq!(
            fmt("%lld %llu", [u64::MAX, u64::MAX, 0]).unwrap(),
            "-1 18446744073709551615"
        );
        assert_eq!(fmt("%08x|%4u", [0xab, 7, 0]).unwrap(), "000000ab|   7");
        assert_eq!(fmt("%s!", [0, 0, 0]).unwrap(), "hi!");
        assert!(fmt("%s", [9, 0, 0]).is_err());
        assert!(fmt("%d %d %d %d", [1, 2, 3]).is_err());
        assert!(fmt("%q", [1, 2, 3]).is_err());
        assert!(fmt("%", [1, 2, 3]).is_err());
    }
}
