//! A ring buffer's records as a user-space reader sees them: through the map's `mmap`, the
//! consumer page (read-write), then the producer page and the data area, which the kernel maps
//! twice in a row so that a record running past the end reads on without a seam (the layout of
//! `kernel/bpf/ringbuf.c`, the one libbpf's `ring_buffer__consume` reads).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{KMap, Loaded};

/// `BPF_MAP_TYPE_RINGBUF`.
const MAP_RINGBUF: u32 = 27;
/// Record header bits: the producer has not committed it yet; it was discarded.
const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
/// Bytes of a record's header (its length and flags, then its page offset).
const HEADER: u64 = 8;

/// One shared mapping of a map, unmapped on drop.
struct Mapping {
    addr: *mut c_void,
    len: usize,
}

impl Mapping {
    fn new(fd: i32, len: usize, prot: i32, offset: usize) -> Result<Self, std::io::Error> {
        let off =
            libc::off_t::try_from(offset).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh shared mapping of a map descriptor; the kernel checks the length,
        // protection and offset against the ring buffer's layout.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, off) };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { addr, len })
    }

    /// The position word at the start of the mapping (consumer or producer position).
    fn position(&self) -> &AtomicU64 {
        // SAFETY: the mapping is page-aligned and at least a page long; the kernel and this
        // reader only ever access the word atomically (acquire/release, as libbpf does).
        unsafe { &*self.addr.cast::<AtomicU64>() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

impl Loaded<'_> {
    /// Takes every committed record of ring buffer `m` (submitted or written by
    /// `bpf_ringbuf_output`; discarded ones are skipped), in order, and moves the consumer
    /// position past them, as a reader does. Stops at a record still reserved.
    ///
    /// # Errors
    ///
    /// `m` is not a ring buffer (EINVAL), or the kernel refuses the mapping.
    pub fn ring_records(&self, m: &KMap) -> Result<Vec<Vec<u8>>, std::io::Error> {
        if m.map_type != MAP_RINGBUF || !m.max_entries.is_power_of_two() {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: no arguments; the page size of the running system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let size = m.max_entries as usize;
        let cons = Mapping::new(m.fd, page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let prod = Mapping::new(m.fd, page + 2 * size, libc::PROT_READ, page)?;
        let mut at = cons.position().load(Ordering::Acquire);
        let end = prod.position().load(Ordering::Acquire);
        let mut out = Vec::new();
        while at < end {
            // CAST: the mask keeps the offset below the data area's size.
            let off = page + (at & (size as u64 - 1)) as usize;
            // SAFETY: `off` lies within the first copy of the data area, and a header is 8
            // bytes at an 8-aligned position; the length word is read atomically, as the
            // producer commits it with a release store.
            let word = unsafe {
                &*prod
                    .addr
                    .cast::<u8>()
                    .add(off)
                    .cast::<std::sync::atomic::AtomicU32>()
            };
            let head = word.load(Ordering::Acquire);
            if head & BUSY != 0 {
                break;
            }
            let len = head & !(BUSY | DISCARD);
            if len as usize > size {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            if head & DISCARD == 0 {
                // SAFETY: the record's data follows its header and is at most the data area's
                // size, so it ends within the second copy of the area.
                let data = unsafe {
                    std::slice::from_raw_parts(
                        prod.addr.cast::<u8>().add(off + HEADER as usize),
                        len as usize,
                    )
                };
                out.push(data.to_vec());
            }
            at += (u64::from(len) + HEADER).div_ceil(8) * 8;
            cons.position().store(at, Ordering::Release);
        }
        Ok(out)
    }
}
