//! The helpers and the kfunc, each with the kernel's calling convention (arguments in r1-r5,
//! result in r0) and its return values. Pointers the program passes are read and written through
//! the interpreter's checked accessors; a bad pointer is a fault, a bad value (unknown flags, a
//! missing map entry) is the kernel's error return.

use onic_core::xdp::{XdpAction, XdpError};

use crate::insn::{helper as h, kfunc};
use crate::maps::errno;
use crate::mem::{self, Region};
use crate::vm::{FaultKind, Run};
use crate::Host;

const EINVAL: i64 = -errno::EINVAL;
/// `ENODATA`: no RX hash for this frame.
const ENODATA: i64 = -errno::ENODATA;
/// Low bits of `bpf_redirect_map`'s flags: the verdict when the key has no entry.
const REDIRECT_MISS_MASK: u64 = 0x7;
/// `bpf_redirect_map` flags: a copy to every devmap entry, and not to the ingress interface.
const BROADCAST: u64 = 1 << 3;
const EXCLUDE_INGRESS: u64 = 1 << 4;
/// Most bytes `bpf_trace_printk` formats.
const PRINTK_MAX: usize = 256;

fn bad(helper: &'static str, why: &'static str) -> FaultKind {
    FaultKind::HelperArg { helper, why }
}

/// A 64-bit register holding a negative errno.
const fn neg(e: i64) -> u64 {
    e as u64
}

/// The negative errno the kernel's XDP helpers return for a refusal of the core's buffer.
const fn xdp_errno(e: XdpError) -> i64 {
    match e {
        XdpError::OutOfBounds => EINVAL,
        XdpError::MetaLength => -errno::EACCES,
        XdpError::NoData => ENODATA,
    }
}

impl<H: Host> Run<'_, '_, H> {
    /// Calls helper `id` (validated at load).
    pub(crate) fn helper(&mut self, id: i32) -> Result<u64, FaultKind> {
        let r = self.regs;
        match id {
            h::MAP_LOOKUP_ELEM => self.map_lookup(r[1], r[2]),
            h::MAP_UPDATE_ELEM => self.map_update(r[1], r[2], r[3], r[4]),
            h::MAP_DELETE_ELEM => self.map_delete(r[1], r[2]),
            h::KTIME_GET_NS => Ok(self.host.ktime_ns()),
            h::GET_PRANDOM_U32 => Ok(u64::from(self.host.random_u32())),
            h::GET_SMP_PROCESSOR_ID => Ok(self.cpu as u64),
            h::TRACE_PRINTK => self.trace_printk(r[1], r[2], [r[3], r[4], r[5]]),
            h::REDIRECT => Ok(self.redirect(r[1] as u32, r[2])),
            h::REDIRECT_MAP => self.redirect_map(r[1], r[2], r[3]),
            h::CSUM_DIFF => self.csum_diff(r[1], r[2], r[3], r[4], r[5]),
            h::XDP_ADJUST_HEAD | h::XDP_ADJUST_TAIL | h::XDP_ADJUST_META => self.adjust(id, r[1], r[2]),
            // One run at a time holds every map value: a lock is always free.
            h::SPIN_LOCK | h::SPIN_UNLOCK => Ok(0),
            h::KTIME_GET_BOOT_NS | h::KTIME_GET_COARSE_NS => Ok(self.host.ktime_ns()),
            h::CHECK_MTU => self.check_mtu(r[1], r[2] as u32, r[3], r[4] as u32 as i32, r[5]),
            h::LOOP => self.bpf_loop(r[1], r[2], r[3], r[4]),
            h::PERF_EVENT_OUTPUT => self.perf_output(r[1], r[2], r[3], r[4], r[5]),
            h::FIB_LOOKUP => self.fib_lookup(r[1], r[2], r[3], r[4]),
            h::RINGBUF_OUTPUT => self.ringbuf_output(r[1], r[2], r[3], r[4]),
            h::RINGBUF_RESERVE => self.ringbuf_reserve(r[1], r[2], r[3]),
            h::RINGBUF_SUBMIT | h::RINGBUF_DISCARD => {
                self.ringbuf_commit(r[1], id == h::RINGBUF_SUBMIT)?;
                Ok(0)
            }
            h::RINGBUF_QUERY => {
                let m = self.ring_map(r[1], "bpf_ringbuf_query")?;
                Ok(self.maps[m].ring().map_or(0, |ring| ring.query(r[2])))
            }
            h::XDP_GET_BUFF_LEN => {
                self.ctx_arg(r[1], "bpf_xdp_get_buff_len")?;
                Ok(self.buff.len() as u64)
            }
            h::XDP_LOAD_BYTES | h::XDP_STORE_BYTES => {
                self.ctx_arg(r[1], "bpf_xdp_load_bytes/store_bytes")?;
                self.xdp_bytes(id == h::XDP_STORE_BYTES, r[2] as u32, r[3], r[4] as u32)
            }
            _ => Err(bad("call", "helper not provided")),
        }
    }

    /// Calls kfunc `id` (validated at load).
    pub(crate) fn kfunc(&mut self, id: i32) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_xdp_metadata_rx_hash";
        if id != kfunc::XDP_METADATA_RX_HASH {
            return Err(bad("kfunc", "not provided"));
        }
        if self.regs[1] != mem::addr(mem::CTX, 0) {
            return Err(bad(NAME, "the first argument is not the context"));
        }
        let (hash_at, type_at) = (self.regs[2], self.regs[3]);
        match self.buff.rx_hash() {
            Ok(hash) => {
                self.store(hash_at, 4, u64::from(hash.value))?;
                self.store(type_at, 4, u64::from(hash.xdp_type))?;
                Ok(0)
            }
            Err(_) => Ok(neg(ENODATA)),
        }
    }

    fn map_index(&self, handle: u64, helper: &'static str) -> Result<usize, FaultKind> {
        match mem::region(handle) {
            Region::MapHandle(m) if m < self.maps.len() => Ok(m),
            _ => Err(bad(helper, "the first argument is not a map")),
        }
    }

    /// Copies `len` bytes of program memory at `addr` into the scratch area at `at`.
    fn fetch(&mut self, addr: u64, at: usize, len: usize, helper: &'static str) -> Result<(), FaultKind> {
        let mut scratch = core::mem::take(&mut self.vm.scratch);
        let r = match scratch.get_mut(at..at + len) {
            Some(s) => self.read(addr, s),
            None => Err(bad(helper, "argument larger than the engine's scratch area")),
        };
        self.vm.scratch = scratch;
        r
    }

    fn map_lookup(&mut self, map: u64, key: u64) -> Result<u64, FaultKind> {
        let m = self.map_index(map, "bpf_map_lookup_elem")?;
        let ks = self.maps[m].def().key_size as usize;
        self.fetch(key, 0, ks, "bpf_map_lookup_elem")?;
        let cpu = self.cpu;
        let found = self.maps[m].lookup(&self.vm.scratch[..ks], cpu);
        if self.maps[m].def().map_type.is_map_of_maps() {
            // The inner map itself, for the program to hand to the map helpers.
            let inner = found.and_then(|off| self.maps[m].storage().get(off..off + 4));
            return Ok(inner.map_or(0, |b| {
                mem::map_handle(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            }));
        }
        Ok(found.map_or(0, |off| mem::map_value_addr(m, off as u32)))
    }

    fn map_update(&mut self, map: u64, key: u64, value: u64, flags: u64) -> Result<u64, FaultKind> {
        let m = self.map_index(map, "bpf_map_update_elem")?;
        let (ks, vs) = {
            let d = self.maps[m].def();
            (d.key_size as usize, d.value_size as usize)
        };
        self.fetch(key, 0, ks, "bpf_map_update_elem")?;
        self.fetch(value, ks, vs, "bpf_map_update_elem")?;
        let cpu = self.cpu;
        let (k, v) = self.vm.scratch.split_at(ks);
        Ok(self.maps[m].update(k, &v[..vs], flags, cpu) as u64)
    }

    fn map_delete(&mut self, map: u64, key: u64) -> Result<u64, FaultKind> {
        let m = self.map_index(map, "bpf_map_delete_elem")?;
        let ks = self.maps[m].def().key_size as usize;
        self.fetch(key, 0, ks, "bpf_map_delete_elem")?;
        Ok(self.maps[m].delete(&self.vm.scratch[..ks]) as u64)
    }

    /// `bpf_redirect(ifindex, flags)`: XDP_REDIRECT to the host's target for `ifindex`; an
    /// interface the host does not know gets a target no table has, so the redirect fails in
    /// the driver and is counted there, as in the kernel.
    fn redirect(&mut self, ifindex: u32, flags: u64) -> u64 {
        if flags != 0 {
            return u64::from(XdpAction::Aborted.raw());
        }
        let rxq = self.buff.rxq();
        let target = self.host.redirect_ifindex(rxq, ifindex).unwrap_or(u32::MAX);
        u64::from(self.buff.redirect(target).raw())
    }

    fn redirect_map(&mut self, map: u64, key: u64, flags: u64) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_redirect_map";
        let m = self.map_index(map, NAME)?;
        let t = self.maps[m].def().map_type;
        if !t.is_redirect() {
            return Err(bad(NAME, "the map is no devmap, cpumap or xskmap"));
        }
        // Flags beyond the fallback verdict: the broadcast pair, for devmaps only; anything else
        // is the kernel's XDP_ABORTED verdict (not a fault).
        let allowed = if t.is_devmap() {
            BROADCAST | EXCLUDE_INGRESS
        } else {
            0
        };
        if flags & !(REDIRECT_MISS_MASK | allowed) != 0 {
            return Ok(u64::from(XdpAction::Aborted.raw()));
        }
        let rxq = self.buff.rxq();
        if flags & BROADCAST != 0 {
            return Ok(self.broadcast(m, flags & EXCLUDE_INGRESS != 0));
        }
        let key32 = key as u32;
        let entry = self.maps[m].redirect_entry(&key32.to_le_bytes());
        let target = match (entry, t) {
            (None, _) => return Ok(flags & REDIRECT_MISS_MASK),
            (Some(_), crate::MapType::XskMap) => self.host.redirect_xsk(rxq, key32),
            (Some(_), crate::MapType::CpuMap) => self.host.redirect_cpu(rxq, key32),
            (Some(ifindex), _) => self.host.redirect_ifindex(rxq, ifindex),
        };
        Ok(u64::from(self.buff.redirect(target.unwrap_or(u32::MAX)).raw()))
    }

    /// A broadcast through devmap `m`: one copy to each entry's interface (without the ingress
    /// one when `exclude` is set), through the host's broadcast target; XDP_REDIRECT whether or
    /// not there is an entry, as in the kernel.
    fn broadcast(&mut self, m: usize, exclude: bool) -> u64 {
        let rxq = self.buff.rxq();
        let mut list = core::mem::take(&mut self.vm.targets);
        self.maps[m].redirect_values(&mut list);
        if exclude {
            let ingress = self.ifindex;
            list.retain(|&i| i != ingress);
        }
        let target = self.host.redirect_broadcast(rxq, &list);
        self.vm.targets = list;
        u64::from(self.buff.redirect(target.unwrap_or(u32::MAX)).raw())
    }

    /// `bpf_perf_event_output(ctx, map, flags, data, size)`: a record of `size` bytes of `data`
    /// followed by the frame's first `flags >> 32` bytes, to the entry of `flags`' low 32 bits
    /// (0xffffffff: this CPU's), through [`Host::output`]. An entry the host has not opened:
    /// -ENOENT, as the kernel's answer for an event array nobody reads.
    fn perf_output(
        &mut self,
        ctx: u64,
        map: u64,
        flags: u64,
        data: u64,
        size: u64,
    ) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_perf_event_output";
        self.ctx_arg(ctx, NAME)?;
        let m = self.map_index(map, NAME)?;
        if self.maps[m].def().map_type != crate::MapType::PerfEventArray {
            return Err(bad(NAME, "the map is no perf event array"));
        }
        let (index, pkt) = (flags as u32, (flags >> 32) as usize & 0xf_ffff);
        if flags & !0x000f_ffff_ffff_ffff != 0 || pkt > self.buff.len() {
            return Ok(neg(EINVAL));
        }
        let index = if index == u32::MAX { self.cpu as u32 } else { index };
        if index >= self.maps[m].def().max_entries {
            return Ok(neg(-errno::E2BIG));
        }
        if self.maps[m].host_get(&index.to_le_bytes()).is_none() {
            return Ok(neg(-errno::ENOENT));
        }
        let size = usize::try_from(size).unwrap_or(usize::MAX).min(1 << 16);
        let mut rec = alloc::vec![0u8; size];
        self.read(data, &mut rec)
            .map_err(|_| bad(NAME, "data outside program memory"))?;
        rec.extend_from_slice(&self.buff.data()[..pkt]);
        let name = self.maps[m].def().name.clone();
        self.host.output(&name, index, &rec);
        Ok(0)
    }

    /// `bpf_tail_call(ctx, prog_array, index)`: goes on in the program entry `index` holds, in
    /// the same stack frame, never to return here; when the index is outside the map, the run
    /// has made [`crate::vm::MAX_TAIL_CALLS`] already or the entry is empty, nothing happens and
    /// the caller goes on (r0 unchanged), as in the kernel, which counts an attempt on an empty
    /// entry too.
    pub(crate) fn tail_call(&mut self) -> Result<(), FaultKind> {
        const NAME: &str = "bpf_tail_call";
        self.ctx_arg(self.regs[1], NAME)?;
        let m = self.map_index(self.regs[2], NAME)?;
        let map = &self.maps[m];
        if map.def().map_type != crate::MapType::ProgArray {
            return Err(bad(NAME, "the map is no program array"));
        }
        let index = self.regs[3] as u32;
        if index >= map.def().max_entries || self.tail_calls >= crate::vm::MAX_TAIL_CALLS {
            return Ok(());
        }
        self.tail_calls += 1;
        let next = map.index_at(&index.to_le_bytes()).map(|p| p as usize);
        if let Some((p, prog)) = next.and_then(|p| Some((p, self.progs.get(p)?))) {
            self.cur = p;
            self.code = prog.code();
            self.pc = prog.entry();
        }
        Ok(())
    }

    /// The map of handle `map` if it is a ring buffer.
    fn ring_map(&self, map: u64, helper: &'static str) -> Result<usize, FaultKind> {
        let m = self.map_index(map, helper)?;
        if self.maps[m].ring().is_none() {
            return Err(bad(helper, "the map is no ring buffer"));
        }
        Ok(m)
    }

    /// `bpf_ringbuf_reserve(map, size, flags)`: the address of `size` bytes of a new record in
    /// the ring's data area, or NULL when there is no room or flags are given, as the kernel.
    fn ringbuf_reserve(&mut self, map: u64, size: u64, flags: u64) -> Result<u64, FaultKind> {
        let m = self.ring_map(map, "bpf_ringbuf_reserve")?;
        if flags != 0 {
            return Ok(0);
        }
        let at = self.maps[m].ring_mut().and_then(|r| r.reserve(size));
        Ok(at.map_or(0, |off| mem::map_value_addr(m, off)))
    }

    /// `bpf_ringbuf_submit` / `bpf_ringbuf_discard(data, flags)`: commits the record whose data
    /// `data` points at; a submitted record goes to [`Host::output`] (entry 0). The wake-up flags
    /// mean nothing here.
    fn ringbuf_commit(&mut self, data: u64, submit: bool) -> Result<(), FaultKind> {
        const NAME: &str = "bpf_ringbuf_submit/discard";
        let Region::MapValue(m, off) = mem::region(data) else {
            return Err(bad(NAME, "the pointer is no record a ring buffer reserved"));
        };
        let span = self
            .maps
            .get_mut(m)
            .and_then(|map| map.ring_mut())
            .and_then(|r| r.commit(off))
            .ok_or(bad(NAME, "the pointer is no record a ring buffer reserved"))?;
        if submit {
            let map = &self.maps[m];
            let rec = map.storage().get(span).unwrap_or(&[]);
            self.host.output(&map.def().name, 0, rec);
        }
        Ok(())
    }

    /// `bpf_ringbuf_output(map, data, size, flags)`: a record of `size` bytes copied from `data`,
    /// reserved and submitted at once: 0, -EAGAIN when the ring has no room, -EINVAL for flags
    /// other than the wake-up pair.
    fn ringbuf_output(&mut self, map: u64, data: u64, size: u64, flags: u64) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_ringbuf_output";
        const EAGAIN: i64 = 11;
        let m = self.ring_map(map, NAME)?;
        if flags & !3 != 0 {
            return Ok(neg(EINVAL));
        }
        // Reserved first: a record the ring has no room for is never copied (its size is then
        // at most the ring's, which the map limit bounds).
        let Some(off) = self.maps[m].ring_mut().and_then(|r| r.reserve(size)) else {
            return Ok(neg(-EAGAIN));
        };
        let size = size as usize;
        let mut rec = alloc::vec![0u8; size];
        if self.read(data, &mut rec).is_err() {
            self.maps[m].ring_mut().map(|r| r.commit(off));
            return Err(bad(NAME, "data outside program memory"));
        }
        let start = off as usize;
        if let Some(dst) = self.maps[m].storage_mut().get_mut(start..start + size) {
            dst.copy_from_slice(&rec);
        }
        self.ringbuf_commit(mem::map_value_addr(m, off), true)?;
        Ok(0)
    }

    /// `bpf_fib_lookup(ctx, params, plen, flags)`: the host's FIB ([`Host::fib_lookup`]) on the
    /// program's 64-byte `struct bpf_fib_lookup`. Refused before the host is asked, as the
    /// kernel's XDP helper refuses them: a shorter one or a flag the kernel does not know
    /// (-EINVAL), a family other than AF_INET and AF_INET6 (-EAFNOSUPPORT).
    fn fib_lookup(&mut self, ctx: u64, params: u64, plen: u64, flags: u64) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_fib_lookup";
        /// BPF_FIB_LOOKUP_DIRECT, _OUTPUT, _SKIP_NEIGH, _TBID, _SRC (Linux 6.1).
        const KNOWN_FLAGS: u64 = 0x1f;
        const AF_INET: u8 = 2;
        const AF_INET6: u8 = 10;
        self.ctx_arg(ctx, NAME)?;
        if plen < 64 || flags & !KNOWN_FLAGS != 0 {
            return Ok(neg(EINVAL));
        }
        let mut p = [0u8; 64];
        self.read(params, &mut p)
            .map_err(|_| bad(NAME, "params outside program memory"))?;
        if p[0] != AF_INET && p[0] != AF_INET6 {
            return Ok(neg(-errno::EAFNOSUPPORT));
        }
        // CAST: the flags are known to fit.
        let rc = self.host.fib_lookup(self.buff.rxq(), &mut p, flags as u32);
        self.write(params, &p)
            .map_err(|_| bad(NAME, "params outside program memory"))?;
        // CAST: a negative errno is returned sign-extended, as the kernel's int.
        Ok(i64::from(rc) as u64)
    }

    fn ctx_arg(&self, ctx: u64, helper: &'static str) -> Result<(), FaultKind> {
        if ctx == mem::addr(mem::CTX, 0) {
            Ok(())
        } else {
            Err(bad(helper, "the first argument is not the context"))
        }
    }

    /// `bpf_xdp_load_bytes` / `bpf_xdp_store_bytes(ctx, offset, buf, len)`: copies between the
    /// frame (from `data + offset`) and program memory; -EFAULT for an offset or length above
    /// 0xffff, -EINVAL past the end of the frame, as the kernel.
    fn xdp_bytes(&mut self, store: bool, offset: u32, buf: u64, len: u32) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_xdp_load_bytes/store_bytes";
        if offset > 0xffff || len > 0xffff {
            return Ok(neg(-errno::EFAULT));
        }
        let (o, n) = (offset as usize, len as usize);
        if o + n > self.buff.len() {
            return Ok(neg(EINVAL));
        }
        let mut tmp = alloc::vec![0u8; n];
        if store {
            self.read(buf, &mut tmp)
                .map_err(|_| bad(NAME, "buffer outside program memory"))?;
            self.buff.data_mut()[o..o + n].copy_from_slice(&tmp);
        } else {
            tmp.copy_from_slice(&self.buff.data()[o..o + n]);
            self.write(buf, &tmp)
                .map_err(|_| bad(NAME, "buffer outside program memory"))?;
        }
        Ok(0)
    }

    /// `bpf_check_mtu(ctx, ifindex, &mtu_len, len_diff, flags)` for XDP: whether the frame (its
    /// length plus `len_diff`, or `*mtu_len` plus the Ethernet header when that is set) fits the
    /// MTU of `ifindex` (0: the ingress interface) plus the Ethernet header: 0, or 1
    /// (`BPF_MTU_CHK_RET_FRAG_NEEDED`); `*mtu_len` becomes the MTU. Flags: -EINVAL, an unknown
    /// interface -ENODEV, as the kernel.
    fn check_mtu(
        &mut self,
        ctx: u64,
        ifindex: u32,
        mtu_at: u64,
        diff: i32,
        flags: u64,
    ) -> Result<u64, FaultKind> {
        self.ctx_arg(ctx, "bpf_check_mtu")?;
        if flags != 0 {
            return Ok(neg(EINVAL));
        }
        let Some(mtu) = self.host.mtu(self.buff.rxq(), ifindex) else {
            return Ok(neg(-errno::ENODEV));
        };
        let asked = self.load(mtu_at, 4)? as u32;
        let len = if asked != 0 {
            i64::from(asked) + 14
        } else {
            self.buff.len() as i64 + i64::from(diff)
        };
        self.store(mtu_at, 4, u64::from(mtu))?;
        Ok(u64::from(len > i64::from(mtu) + 14))
    }

    /// `bpf_loop(n, callback, ctx, flags)`: calls `callback(i, ctx)` for i = 0.. until it returns
    /// non-zero or `n` calls were made; the calls made. At most 1 << 23 iterations and no flags
    /// (-E2BIG, -EINVAL), as the kernel; the instruction budget bounds the whole run.
    fn bpf_loop(&mut self, n: u64, callback: u64, ctx: u64, flags: u64) -> Result<u64, FaultKind> {
        let Region::Func(slot) = mem::region(callback) else {
            return Err(bad("bpf_loop", "the callback is not a function of the program"));
        };
        if flags != 0 {
            return Ok(neg(EINVAL));
        }
        let n = n as u32;
        if n > 1 << 23 {
            return Ok(neg(-errno::E2BIG));
        }
        for i in 0..n {
            if self.call_callback(slot as usize, [u64::from(i), ctx])? != 0 {
                return Ok(u64::from(i) + 1);
            }
        }
        Ok(u64::from(n))
    }

    fn adjust(&mut self, id: i32, ctx: u64, delta: u64) -> Result<u64, FaultKind> {
        if ctx != mem::addr(mem::CTX, 0) {
            return Err(bad("bpf_xdp_adjust_*", "the first argument is not the context"));
        }
        // The delta is an int.
        let d = delta as u32 as i32 as isize;
        let r = match id {
            h::XDP_ADJUST_HEAD => self.buff.adjust_head(d),
            h::XDP_ADJUST_TAIL => self.buff.adjust_tail(d),
            _ => self.buff.adjust_meta(d),
        };
        Ok(match r {
            Ok(()) => 0,
            Err(e) => neg(xdp_errno(e)),
        })
    }

    /// `bpf_csum_diff(from, from_size, to, to_size, seed)`: the one's-complement sum of `seed`,
    /// the complement of each 32-bit word of `from` and each word of `to`, folded to 32 bits
    /// (words read in the machine's byte order, as the kernel's `csum_partial` does on x86).
    fn csum_diff(
        &mut self,
        from: u64,
        from_len: u64,
        to: u64,
        to_len: u64,
        seed: u64,
    ) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_csum_diff";
        if !from_len.is_multiple_of(4) || !to_len.is_multiple_of(4) || from_len > 512 || to_len > 512 {
            return Ok(neg(EINVAL));
        }
        let mut sum = seed & 0xffff_ffff;
        for (base, len, invert) in [(from, from_len, true), (to, to_len, false)] {
            for i in (0..len).step_by(4) {
                let w = self
                    .load(base.wrapping_add(i), 4)
                    .map_err(|_| bad(NAME, "buffer outside program memory"))?;
                sum += if invert { !w & 0xffff_ffff } else { w };
            }
        }
        while sum >> 32 != 0 {
            sum = (sum & 0xffff_ffff) + (sum >> 32);
        }
        Ok(sum)
    }

    fn trace_printk(&mut self, fmt: u64, len: u64, args: [u64; 3]) -> Result<u64, FaultKind> {
        const NAME: &str = "bpf_trace_printk";
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len == 0 || len > PRINTK_MAX {
            return Ok(neg(EINVAL));
        }
        let mut f = [0u8; PRINTK_MAX];
        self.read(fmt, &mut f[..len])
            .map_err(|_| bad(NAME, "format outside program memory"))?;
        let f = &f[..len];
        let end = f.iter().position(|&c| c == 0).unwrap_or(len);
        let mut out = alloc::string::String::new();
        match crate::printk::format(&f[..end], args, &mut out, |addr, buf| {
            self.read(addr, buf).is_ok()
        }) {
            Ok(()) => {
                let line = out.trim_end_matches('\n');
                self.host.log(line);
                Ok(out.len() as u64)
            }
            Err(()) => Ok(neg(EINVAL)),
        }
    }
}
