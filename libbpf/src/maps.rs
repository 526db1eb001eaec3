//! A loaded program's test runs and its maps: read, and put back to what they were.

use std::ffi::c_int;

use crate::ffi::{Fns, TestRunOpts, XdpMd};
use crate::Loaded;

/// A map of a loaded object.
#[derive(Clone, Debug)]
pub struct KMap {
    /// Name as libbpf gives it (global data: object-name prefix + section name).
    pub name: String,
    /// `enum bpf_map_type`.
    pub map_type: u32,
    /// Key bytes.
    pub key_size: u32,
    /// Value bytes.
    pub value_size: u32,
    /// Entries (a ring buffer: bytes of its data area).
    pub max_entries: u32,
    pub(crate) fd: c_int,
}

/// The result of one `BPF_PROG_TEST_RUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value.
    pub retval: u32,
    /// Metadata bytes in front of the frame.
    pub meta: Vec<u8>,
    /// The frame after the program.
    pub frame: Vec<u8>,
}

/// A map's entries: (key, value).
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

impl Loaded<'_> {
    fn f(&self) -> &Fns {
        &self.obj.lib.f
    }

    /// Runs the program once on `frame` (received on the loopback device's queue 0, the test
    /// run's default), or the errno the kernel refuses the run with.
    pub fn test_run(&self, frame: &[u8]) -> Result<TestRun, std::io::Error> {
        let len = u32::try_from(frame.len()).map_err(|_| std::io::Error::from_raw_os_error(libc::E2BIG))?;
        let ctx_in = XdpMd {
            data_end: len,
            ..XdpMd::default()
        };
        let mut ctx_out = XdpMd::default();
        let mut out = vec![0u8; 8192];
        let mut o = TestRunOpts {
            sz: std::mem::size_of::<TestRunOpts>(),
            data_in: frame.as_ptr() as usize,
            data_out: out.as_mut_ptr() as usize,
            data_size_in: len,
            data_size_out: out.len() as u32,
            ctx_in: std::ptr::from_ref(&ctx_in) as usize,
            ctx_out: std::ptr::from_mut(&mut ctx_out) as usize,
            ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
            ctx_size_out: std::mem::size_of::<XdpMd>() as u32,
            repeat: 1,
            ..TestRunOpts::default()
        };
        // SAFETY: every pointer in `o` is valid for the size next to it for the whole call.
        let r = unsafe { (self.f().test_run)(self.fd, &mut o) };
        if r != 0 {
            return Err(std::io::Error::from_raw_os_error(-r));
        }
        out.truncate(o.data_size_out as usize);
        let meta = (ctx_out.data as usize).min(out.len());
        let frame = out.split_off(meta);
        Ok(TestRun {
            retval: o.retval,
            meta: out,
            frame,
        })
    }

    /// Every entry of `m`, sorted by key: (key, value; per-CPU maps: CPU 0's copy). Read in
    /// batches (one syscall for thousands of entries), one key at a time where batches fail.
    pub fn entries(&self, m: &KMap, cpus: usize) -> Entries {
        let mut out = self
            .entries_batched(m, cpus)
            .unwrap_or_else(|| self.entries_one_by_one(m, cpus));
        out.sort();
        out
    }

    /// Bytes of one entry's value as the kernel hands it out: per-CPU maps give every possible
    /// CPU's copy, each rounded up to 8 bytes.
    fn value_stride(m: &KMap, cpus: usize) -> usize {
        let vs = m.value_size as usize;
        if matches!(m.map_type, 5 | 6 | 10) {
            vs.div_ceil(8) * 8 * cpus
        } else {
            vs
        }
    }

    fn entries_batched(&self, m: &KMap, cpus: usize) -> Option<Entries> {
        const BATCH: usize = 4096;
        let (ks, vs) = (m.key_size as usize, m.value_size as usize);
        let stride = Self::value_stride(m, cpus);
        let mut keys = vec![0u8; ks * BATCH];
        let mut values = vec![0u8; stride * BATCH];
        let mut token_in = vec![0u8; ks.max(8)];
        let mut token_out = vec![0u8; ks.max(8)];
        let mut out = Vec::new();
        let mut first = true;
        loop {
            let mut n = BATCH as u32;
            let tin = if first {
                std::ptr::null()
            } else {
                token_in.as_ptr().cast()
            };
            // SAFETY: the tokens have room for a key (at least 8 bytes), keys and values for
            // BATCH entries of the map's sizes; null options are the defaults.
            let r = unsafe {
                (self.f().lookup_batch)(
                    m.fd,
                    tin,
                    token_out.as_mut_ptr().cast(),
                    keys.as_mut_ptr().cast(),
                    values.as_mut_ptr().cast(),
                    &mut n,
                    std::ptr::null(),
                )
            };
            if r != 0 && r != -libc::ENOENT {
                return None;
            }
            for i in 0..(n as usize).min(BATCH) {
                out.push((keys[i * ks..][..ks].to_vec(), values[i * stride..][..vs].to_vec()));
            }
            if r == -libc::ENOENT {
                return Some(out);
            }
            std::mem::swap(&mut token_in, &mut token_out);
            first = false;
        }
    }

    fn entries_one_by_one(&self, m: &KMap, cpus: usize) -> Entries {
        let ks = m.key_size as usize;
        let vs = m.value_size as usize;
        let mut value = vec![0u8; Self::value_stride(m, cpus)];
        let mut out = Vec::new();
        let mut key: Option<Vec<u8>> = None;
        loop {
            let mut next = vec![0u8; ks];
            let prev = key.as_ref().map_or(std::ptr::null(), |k| k.as_ptr().cast());
            // SAFETY: `prev` is null or `ks` bytes, `next` has room for `ks` bytes.
            if unsafe { (self.f().next_key)(m.fd, prev, next.as_mut_ptr().cast()) } != 0 {
                break;
            }
            // SAFETY: `value` has room for every CPU's copy.
            let r = unsafe { (self.f().lookup)(m.fd, next.as_ptr().cast(), value.as_mut_ptr().cast()) };
            if r == 0 {
                out.push((next.clone(), value[..vs].to_vec()));
            }
            key = Some(next);
        }
        out
    }

    /// Puts `m` back from `now` (what [`Loaded::entries`] read after the last run) to `initial`
    /// (what it read after the load), writing only what differs: hash entries not in `initial`
    /// are deleted, changed or missing ones written (per-CPU maps: CPU 0's copy, the others
    /// zero, as a run pinned to CPU 0 leaves them). Both lists are sorted by key.
    pub fn restore(&self, m: &KMap, initial: &[(Vec<u8>, Vec<u8>)], now: &[(Vec<u8>, Vec<u8>)], cpus: usize) {
        if initial == now {
            return;
        }
        let is_hash = matches!(m.map_type, 1 | 5 | 9 | 10);
        fn find<'a>(list: &'a [(Vec<u8>, Vec<u8>)], k: &[u8]) -> Option<&'a Vec<u8>> {
            list.binary_search_by(|e| e.0.as_slice().cmp(k))
                .ok()
                .map(|i| &list[i].1)
        }
        if is_hash {
            for (k, _) in now.iter().filter(|(k, _)| find(initial, k).is_none()) {
                // SAFETY: a key of the map's key size.
                unsafe { (self.f().delete)(m.fd, k.as_ptr().cast()) };
            }
        }
        let vs = m.value_size as usize;
        let mut value = vec![0u8; Self::value_stride(m, cpus)];
        for (k, v) in initial {
            if find(now, k) == Some(v) {
                continue;
            }
            value.fill(0);
            value[..vs].copy_from_slice(v);
            // SAFETY: key and value of the map's sizes (all CPUs' copies for per-CPU maps).
            unsafe { (self.f().update)(m.fd, k.as_ptr().cast(), value.as_ptr().cast(), 0) };
        }
    }
}
