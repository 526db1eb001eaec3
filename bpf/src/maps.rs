//! Maps: the types XDP programs use, their storage (allocated once at load), the operations the
//! helpers perform from the program side, and the host side (`--map` settings, dumps).
//!
//! Every value has a fixed place in its map's value storage: slot `s`, CPU copy `c` lies at byte
//! `(s * copies + c) * value_size`. A program's pointer to a value is that offset in the map's
//! address region, so a pointer stays valid (and checked) after the entry is deleted, as in the
//! kernel, where a deleted element's memory stays readable until a grace period ends.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::hashtab::{HashTable, Inserted};
use crate::lpm::{self, Lpm};
use crate::ring::{self, Ring};
use core::fmt;

/// Errno values the map helpers return (negated).
pub mod errno {
    #![allow(missing_docs)]
    pub const ENOENT: i64 = 2;
    pub const E2BIG: i64 = 7;
    pub const EEXIST: i64 = 17;
    pub const EACCES: i64 = 13;
    pub const EINVAL: i64 = 22;
    pub const EFAULT: i64 = 14;
    pub const ENODEV: i64 = 19;
    pub const ENOSPC: i64 = 28;
    pub const ENODATA: i64 = 61;
    pub const EOPNOTSUPP: i64 = 95;
    pub const EAFNOSUPPORT: i64 = 97;
}

/// `bpf_map_update_elem` flags.
const BPF_NOEXIST: u64 = 1;
const BPF_EXIST: u64 = 2;

/// The map types the engine provides (`enum bpf_map_type` numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapType {
    /// `BPF_MAP_TYPE_HASH` (1).
    Hash,
    /// `BPF_MAP_TYPE_ARRAY` (2).
    Array,
    /// `BPF_MAP_TYPE_PERCPU_HASH` (5).
    PercpuHash,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY` (6).
    PercpuArray,
    /// `BPF_MAP_TYPE_LRU_HASH` (9).
    LruHash,
    /// `BPF_MAP_TYPE_LRU_PERCPU_HASH` (10).
    LruPercpuHash,
    /// `BPF_MAP_TYPE_PERF_EVENT_ARRAY` (4): one event stream per CPU; an entry exists once the
    /// host opens it (`host_set`), and `bpf_perf_event_output` records go to
    /// [`crate::Host::output`].
    PerfEventArray,
    /// `BPF_MAP_TYPE_DEVMAP` (14): interface indexes, redirect targets.
    DevMap,
    /// `BPF_MAP_TYPE_CPUMAP` (16): CPUs a frame may be redirected to (the value is the queue
    /// size, or `struct bpf_cpumap_val`), onto the host's [`crate::Host::redirect_cpu`].
    CpuMap,
    /// `BPF_MAP_TYPE_XSKMAP` (17): AF_XDP sockets by RX queue, onto the host's user sink.
    XskMap,
    /// `BPF_MAP_TYPE_DEVMAP_HASH` (25).
    DevMapHash,
    /// `BPF_MAP_TYPE_LPM_TRIE` (11): longest-prefix match on `struct bpf_lpm_trie_key` keys
    /// (a 32-bit prefix length, then the data); created only with `BPF_F_NO_PREALLOC`, as the
    /// kernel requires.
    LpmTrie,
    /// `BPF_MAP_TYPE_RINGBUF` (27): a data area of `max_entries` bytes (a power of two, at
    /// least a page) where programs reserve, write and submit records; the host takes each
    /// record as it is submitted ([`crate::Host::output`]).
    RingBuf,
    /// `BPF_MAP_TYPE_PROG_ARRAY` (3): programs of the object for `bpf_tail_call`, by index; the
    /// host sets the entries (a value is the program's number in [`crate::Loaded::programs`]).
    ProgArray,
    /// `BPF_MAP_TYPE_ARRAY_OF_MAPS` (12): other maps of the object by index; a lookup gives
    /// the inner map, which the program passes to the map helpers. The host sets the entries
    /// ([`set_inner`]).
    ArrayOfMaps,
    /// `BPF_MAP_TYPE_HASH_OF_MAPS` (13): as [`MapType::ArrayOfMaps`], by key.
    HashOfMaps,
}

impl MapType {
    /// The type for a kernel map type number.
    #[must_use]
    pub const fn from_raw(t: u32) -> Option<Self> {
        Some(match t {
            1 => Self::Hash,
            2 => Self::Array,
            4 => Self::PerfEventArray,
            5 => Self::PercpuHash,
            6 => Self::PercpuArray,
            9 => Self::LruHash,
            10 => Self::LruPercpuHash,
            11 => Self::LpmTrie,
            27 => Self::RingBuf,
            3 => Self::ProgArray,
            12 => Self::ArrayOfMaps,
            13 => Self::HashOfMaps,
            14 => Self::DevMap,
            16 => Self::CpuMap,
            17 => Self::XskMap,
            25 => Self::DevMapHash,
            _ => return None,
        })
    }

    /// The kernel's name without the prefix, lower case (`hash`, `percpu_array`, ...).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Array => "array",
            Self::PerfEventArray => "perf_event_array",
            Self::PercpuHash => "percpu_hash",
            Self::PercpuArray => "percpu_array",
            Self::LruHash => "lru_hash",
            Self::LruPercpuHash => "lru_percpu_hash",
            Self::DevMap => "devmap",
            Self::CpuMap => "cpumap",
            Self::XskMap => "xskmap",
            Self::DevMapHash => "devmap_hash",
            Self::LpmTrie => "lpm_trie",
            Self::RingBuf => "ringbuf",
            Self::ProgArray => "prog_array",
            Self::ArrayOfMaps => "array_of_maps",
            Self::HashOfMaps => "hash_of_maps",
        }
    }

    /// One value per CPU.
    #[must_use]
    pub const fn is_percpu(self) -> bool {
        matches!(self, Self::PercpuHash | Self::PercpuArray | Self::LruPercpuHash)
    }

    const fn is_hash(self) -> bool {
        matches!(
            self,
            Self::Hash
                | Self::PercpuHash
                | Self::LruHash
                | Self::LruPercpuHash
                | Self::DevMapHash
                | Self::LpmTrie
                | Self::HashOfMaps
        )
    }

    const fn is_lru(self) -> bool {
        matches!(self, Self::LruHash | Self::LruPercpuHash)
    }

    /// Entries exist only once set (devmaps and xskmaps), unlike array slots.
    const fn is_sparse_array(self) -> bool {
        matches!(
            self,
            Self::DevMap
                | Self::XskMap
                | Self::CpuMap
                | Self::PerfEventArray
                | Self::ProgArray
                | Self::ArrayOfMaps
        )
    }

    /// Maps only the host writes (redirect maps, event arrays): a program's update, delete or
    /// store into a value is refused.
    #[must_use]
    pub const fn is_host_filled(self) -> bool {
        self.is_redirect() || self.is_map_of_maps() || matches!(self, Self::PerfEventArray | Self::ProgArray)
    }

    /// Maps whose values are other maps.
    #[must_use]
    pub const fn is_map_of_maps(self) -> bool {
        matches!(self, Self::ArrayOfMaps | Self::HashOfMaps)
    }

    /// Maps that only the host fills (a program may look them up and redirect through them).
    #[must_use]
    pub const fn is_redirect(self) -> bool {
        matches!(
            self,
            Self::DevMap | Self::XskMap | Self::DevMapHash | Self::CpuMap
        )
    }

    /// Devmaps (array or hash): interface indexes, the maps a broadcast redirect goes through.
    #[must_use]
    pub const fn is_devmap(self) -> bool {
        matches!(self, Self::DevMap | Self::DevMapHash)
    }
}

/// What a map is, as the object declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDef {
    /// Name (the variable's name; `.rodata`, `.data`, `.bss` for global data).
    pub name: String,
    /// Type.
    pub map_type: MapType,
    /// Key bytes.
    pub key_size: u32,
    /// Value bytes (one CPU's copy).
    pub value_size: u32,
    /// Entries.
    pub max_entries: u32,
    /// `map_flags` as declared.
    pub flags: u32,
    /// Program stores into values fault (`.rodata`).
    pub read_only: bool,
}

/// One map with its storage.
#[derive(Clone, Debug)]
pub struct Map {
    def: MapDef,
    copies: usize,
    values: Vec<u8>,
    /// Hash types.
    table: Option<HashTable>,
    /// Devmaps and xskmaps: which slots are set.
    present: Vec<bool>,
    /// LPM tries: the prefix lengths in use (the entries live in `table`).
    lpm: Option<Lpm>,
    /// Ring buffers: positions and reservations (the data area is `values`).
    ring: Option<Ring>,
    /// Maps of maps: what an inner map must be, as declared (`__array(values, ...)`).
    inner: Option<MapDef>,
}

/// Why a map definition is refused.
fn check_def(d: &MapDef) -> Result<(), String> {
    let t = d.map_type;
    if t == MapType::RingBuf {
        return check_ring(d);
    }
    if d.max_entries == 0 || d.value_size == 0 || d.key_size == 0 {
        return Err("key size, value size and max_entries must be positive".into());
    }
    if !t.is_hash() && d.key_size != 4 {
        return Err(format!(
            "a {} map needs 4-byte keys, not {}",
            t.name(),
            d.key_size
        ));
    }
    if t.is_host_filled() && !(d.value_size == 4 || (d.value_size == 8 && t != MapType::XskMap)) {
        return Err(format!(
            "a {} map needs 4-byte values (8 with a program fd)",
            t.name()
        ));
    }
    if d.key_size > 512 {
        return Err(format!("key size {} is above 512 bytes", d.key_size));
    }
    if t == MapType::LpmTrie {
        check_lpm(d)?;
    }
    Ok(())
}

/// What the kernel requires of a ring buffer's definition (`ringbuf_map_alloc`).
fn check_ring(d: &MapDef) -> Result<(), String> {
    if d.key_size != 0 || d.value_size != 0 {
        return Err("a ringbuf map has no keys or values (key and value size 0) (EINVAL)".into());
    }
    if !d.max_entries.is_power_of_two() || d.max_entries < ring::PAGE {
        return Err(format!(
            "a ringbuf map's max_entries is its size in bytes, a power of two of at least {} (a page), not {} (EINVAL)",
            ring::PAGE,
            d.max_entries
        ));
    }
    Ok(())
}

/// What the kernel requires of an LPM trie's definition (`trie_alloc`).
fn check_lpm(d: &MapDef) -> Result<(), String> {
    let data = (d.key_size as usize).saturating_sub(lpm::PREFIX_FIELD);
    if !(1..=lpm::MAX_DATA).contains(&data) {
        return Err(format!(
            "an lpm_trie map needs keys of a 4-byte prefix length and 1 to {} bytes of data, not {} bytes",
            lpm::MAX_DATA,
            d.key_size
        ));
    }
    if d.flags & lpm::NO_PREALLOC == 0 {
        return Err("an lpm_trie map must be declared with map_flags BPF_F_NO_PREALLOC, as the kernel requires (EINVAL)".into());
    }
    Ok(())
}

impl Map {
    /// Bytes the map needs with `cpus` CPUs.
    #[must_use]
    pub fn footprint(d: &MapDef, cpus: u32) -> usize {
        if d.map_type == MapType::RingBuf {
            return d.max_entries as usize;
        }
        let copies = if d.map_type.is_percpu() { cpus as usize } else { 1 };
        let n = d.max_entries as usize;
        let vals = n.saturating_mul(copies).saturating_mul(d.value_size as usize);
        let tab = if d.map_type.is_hash() {
            HashTable::footprint(d.key_size as usize, n)
        } else {
            n
        };
        vals.saturating_add(tab)
    }

    /// Creates the map (values zeroed), for `cpus` CPUs.
    ///
    /// # Errors
    ///
    /// A definition the engine cannot hold.
    pub fn new(def: MapDef, cpus: u32) -> Result<Self, String> {
        check_def(&def)?;
        let copies = if def.map_type.is_percpu() {
            cpus.max(1) as usize
        } else {
            1
        };
        let n = def.max_entries as usize;
        let bytes = n
            .checked_mul(copies)
            .and_then(|x| x.checked_mul(def.value_size as usize));
        // Program addresses carry offsets below 2 GiB (see `mem::BIAS`); the table must fit too.
        if bytes.is_none_or(|b| b >= crate::mem::BIAS as usize)
            || Self::footprint(&def, cpus) >= crate::mem::BIAS as usize
        {
            return Err("the map would take 2 GiB or more".into());
        }
        let table = def
            .map_type
            .is_hash()
            .then(|| HashTable::new(def.key_size as usize, n, def.map_type.is_lru()));
        let present = if def.map_type.is_sparse_array() {
            vec![false; n]
        } else {
            Vec::new()
        };
        let lpm = (def.map_type == MapType::LpmTrie).then(|| Lpm::new(def.key_size as usize));
        let ring = (def.map_type == MapType::RingBuf).then(|| Ring::new(def.max_entries));
        let bytes = if ring.is_some() {
            n
        } else {
            n * copies * def.value_size as usize
        };
        Ok(Self {
            values: vec![0; bytes],
            ring,
            inner: None,
            def,
            copies,
            table,
            present,
            lpm,
        })
    }

    /// The definition.
    #[must_use]
    pub const fn def(&self) -> &MapDef {
        &self.def
    }

    /// Live entries (set slots of devmaps and xskmaps; every slot of an array).
    #[must_use]
    pub fn len(&self) -> usize {
        if self.ring.is_some() {
            return 0;
        }
        match &self.table {
            Some(t) => t.len(),
            None if self.present.is_empty() => self.def.max_entries as usize,
            None => self.present.iter().filter(|p| **p).count(),
        }
    }

    /// Whether the map has no entry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value storage, for checked program access (see the module docs for the layout).
    #[must_use]
    pub fn storage(&self) -> &[u8] {
        &self.values
    }

    /// The value storage, writable.
    pub fn storage_mut(&mut self) -> &mut [u8] {
        &mut self.values
    }

    fn value_off(&self, slot: u32, cpu: usize) -> usize {
        (slot as usize * self.copies + cpu.min(self.copies - 1)) * self.def.value_size as usize
    }

    fn array_slot(&self, key: &[u8]) -> Option<u32> {
        let k = u32::from_le_bytes(key.try_into().ok()?);
        (k < self.def.max_entries).then_some(k)
    }

    /// The slot of `key` for a program's lookup (an LRU map marks it as used).
    fn find_slot(&mut self, key: &[u8]) -> Option<u32> {
        match (self.table.as_mut(), self.lpm.as_mut()) {
            (Some(t), Some(l)) => l.longest(t, key),
            (Some(t), None) => t.find(key),
            (None, _) => {
                let s = self.array_slot(key)?;
                let absent = self.present.get(s as usize).is_some_and(|p| !p);
                (!absent).then_some(s)
            }
        }
    }

    /// `bpf_map_lookup_elem` from a program on CPU `cpu`: the offset of the value in the storage.
    pub fn lookup(&mut self, key: &[u8], cpu: usize) -> Option<usize> {
        let s = self.find_slot(key)?;
        Some(self.value_off(s, cpu))
    }

    /// `bpf_map_update_elem` from a program: sets CPU `cpu`'s copy (a new entry of a per-CPU
    /// map has its other copies zeroed). Returns 0 or a negative errno.
    pub fn update(&mut self, key: &[u8], value: &[u8], flags: u64, cpu: usize) -> i64 {
        if self.def.map_type.is_host_filled() || self.ring.is_some() {
            return -errno::EOPNOTSUPP;
        }
        self.store(key, value, flags, Some(cpu))
    }

    /// Stores `value` under `key`: into CPU `cpu`'s copy, or every copy for `None`.
    fn store(&mut self, key: &[u8], value: &[u8], flags: u64, cpu: Option<usize>) -> i64 {
        if flags > BPF_EXIST || value.len() != self.def.value_size as usize {
            return -errno::EINVAL;
        }
        let slot = if self.table.is_some() {
            self.hash_slot(key, flags)
        } else {
            self.array_slot_for_store(key, flags)
        };
        let slot = match slot {
            Ok(s) => s,
            Err(e) => return e,
        };
        let cpus = match cpu {
            Some(c) => c.min(self.copies - 1)..c.min(self.copies - 1) + 1,
            None => 0..self.copies,
        };
        for c in cpus {
            let a = self.value_off(slot, c);
            self.values[a..a + value.len()].copy_from_slice(value);
        }
        0
    }

    /// The slot a store of `key` writes in a hash-backed map (a new entry's copies zeroed), or
    /// the negative errno the kernel answers.
    fn hash_slot(&mut self, key: &[u8], flags: u64) -> Result<u32, i64> {
        let Some(t) = self.table.as_mut() else {
            return Err(-errno::EINVAL);
        };
        let len = Lpm::prefix_len(key);
        let key = match self.lpm.as_mut() {
            Some(l) => l.entry_key(key).ok_or(-errno::EINVAL)?,
            None => key,
        };
        let exists = t.peek(key).is_some();
        if (flags == BPF_NOEXIST && exists) || (flags == BPF_EXIST && !exists) {
            return Err(if exists { -errno::EEXIST } else { -errno::ENOENT });
        }
        match t.insert(key) {
            Some(Inserted::Existing(s)) => Ok(s),
            Some(Inserted::New(s) | Inserted::Evicted(s)) => {
                if let Some(l) = self.lpm.as_mut() {
                    l.count(len, true);
                }
                let (a, n) = (self.value_off(s, 0), self.value_size_all());
                self.values[a..a + n].fill(0);
                Ok(s)
            }
            // The kernel's LPM trie answers a full map with ENOSPC, the hash maps with E2BIG.
            None if self.lpm.is_some() => Err(-errno::ENOSPC),
            None => Err(-errno::E2BIG),
        }
    }

    /// The slot a store of `key` writes in an array-like map, or the negative errno.
    fn array_slot_for_store(&mut self, key: &[u8], flags: u64) -> Result<u32, i64> {
        let s = self.array_slot(key).ok_or(-errno::E2BIG)?;
        let present = self.present.get(s as usize).copied().unwrap_or(true);
        if flags == BPF_NOEXIST && present {
            return Err(-errno::EEXIST);
        }
        if flags == BPF_EXIST && !present {
            return Err(-errno::ENOENT);
        }
        if let Some(p) = self.present.get_mut(s as usize) {
            *p = true;
        }
        Ok(s)
    }

    /// Declares what an inner map of this map of maps must be (its type, key and value sizes,
    /// and `max_entries` unless the template has `BPF_F_INNER_MAP`).
    pub fn set_inner_template(&mut self, def: MapDef) {
        self.inner = Some(def);
    }

    /// What an inner map of this map of maps must be, if the object declared it.
    #[must_use]
    pub const fn inner_template(&self) -> Option<&MapDef> {
        self.inner.as_ref()
    }

    /// The number stored under `key` (a map of maps: the inner map; a program array: the
    /// program), for the helpers and the host.
    #[must_use]
    pub fn index_at(&self, key: &[u8]) -> Option<u32> {
        let a = self.value_off(self.peek_slot(key)?, 0);
        let b = self.values.get(a..a + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A ring buffer's producer side (`None` for other maps).
    pub fn ring(&self) -> Option<&Ring> {
        self.ring.as_ref()
    }

    /// A ring buffer's producer side, writable.
    pub fn ring_mut(&mut self) -> Option<&mut Ring> {
        self.ring.as_mut()
    }

    fn value_size_all(&self) -> usize {
        self.copies * self.def.value_size as usize
    }

    /// `bpf_map_delete_elem` from a program: 0 or a negative errno.
    pub fn delete(&mut self, key: &[u8]) -> i64 {
        if self.def.map_type.is_host_filled() || self.ring.is_some() {
            return -errno::EOPNOTSUPP;
        }
        let Some(t) = self.table.as_mut() else {
            return -errno::EINVAL;
        };
        let len = Lpm::prefix_len(key);
        let key = match self.lpm.as_mut() {
            Some(l) => match l.entry_key(key) {
                Some(k) => k,
                None => return -errno::EINVAL,
            },
            None => key,
        };
        if t.remove(key).is_none() {
            return -errno::ENOENT;
        }
        if let Some(l) = self.lpm.as_mut() {
            l.count(len, false);
        }
        0
    }

    /// The interface index (devmaps) or socket value (xskmap) stored under `key`, for
    /// `bpf_redirect_map`.
    pub fn redirect_entry(&mut self, key: &[u8]) -> Option<u32> {
        let s = self.find_slot(key)?;
        let a = self.value_off(s, 0);
        let v = self.values.get(a..a + 4)?;
        Some(u32::from_le_bytes([v[0], v[1], v[2], v[3]]))
    }

    /// The first four bytes (interface index) of every entry's value, in slot order: the targets
    /// of a broadcast redirect through a devmap.
    pub fn redirect_values(&self, out: &mut Vec<u32>) {
        out.clear();
        let mut push = |slot: u32| {
            let a = self.value_off(slot, 0);
            if let Some(v) = self.values.get(a..a + 4) {
                out.push(u32::from_le_bytes([v[0], v[1], v[2], v[3]]));
            }
        };
        match &self.table {
            Some(t) => t.iter().for_each(|(s, _)| push(s)),
            None => (0..self.def.max_entries)
                .filter(|&s| self.present.get(s as usize).copied().unwrap_or(true))
                .for_each(&mut push),
        }
    }

    /// Host side: sets `key` to `value` in every CPU's copy (`--map`, initial global data).
    ///
    /// # Errors
    ///
    /// Wrong sizes, an index beyond an array, a full hash map.
    pub fn host_set(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        if key.len() != self.def.key_size as usize || value.len() != self.def.value_size as usize {
            return Err(format!(
                "map {}: keys are {} bytes and values {} bytes",
                self.def.name, self.def.key_size, self.def.value_size
            ));
        }
        match self.store(key, value, 0, None) {
            0 => Ok(()),
            e => Err(format!("map {}: {}", self.def.name, self.update_refusal(key, -e))),
        }
    }

    /// What a refused host update means, in words (the kernel's errno kept in parentheses).
    fn update_refusal(&self, key: &[u8], errno: i64) -> String {
        let d = &self.def;
        let index = (key.len() == 4).then(|| u32::from_le_bytes([key[0], key[1], key[2], key[3]]));
        match (errno, index) {
            (errno::E2BIG, Some(i)) if self.table.is_none() => format!(
                "key {i} is outside the map's {} entries (0..={}) (E2BIG)",
                d.max_entries,
                d.max_entries.saturating_sub(1)
            ),
            (errno::E2BIG, _) => format!("the map is full ({} entries) (E2BIG)", d.max_entries),
            (errno::ENOSPC, _) => format!("the map is full ({} entries) (ENOSPC)", d.max_entries),
            (errno::EINVAL, _) if self.lpm.is_some() => format!(
                "the key's prefix length is above the {} bits of its data (EINVAL)",
                8 * (d.key_size - 4)
            ),
            (errno::EINVAL, _) => "the value is not valid for this map type (EINVAL)".into(),
            (errno::EOPNOTSUPP, _) => "this map type cannot be updated (EOPNOTSUPP)".into(),
            (errno::EEXIST, _) => "the key exists already (EEXIST)".into(),
            (errno::ENOENT, _) => "the key does not exist (ENOENT)".into(),
            (e, _) => format!("update refused (errno {e})"),
        }
    }

    /// Host side: the copies (one per CPU) of `key`'s value, without touching the LRU order.
    #[must_use]
    pub fn host_get(&self, key: &[u8]) -> Option<Vec<&[u8]>> {
        Some(self.copies_of(self.peek_slot(key)?))
    }

    /// The slot holding exactly `key`, without touching the LRU order.
    fn peek_slot(&self, key: &[u8]) -> Option<u32> {
        match (&self.table, &self.lpm) {
            (Some(t), Some(l)) => t.peek(&l.entry_key_owned(key)?),
            (Some(t), None) => t.peek(key),
            (None, _) => {
                let s = self.array_slot(key)?;
                let absent = self.present.get(s as usize).is_some_and(|p| !p);
                (!absent).then_some(s)
            }
        }
    }

    fn copies_of(&self, slot: u32) -> Vec<&[u8]> {
        let vs = self.def.value_size as usize;
        (0..self.copies)
            .map(|c| {
                let a = self.value_off(slot, c);
                &self.values[a..a + vs]
            })
            .collect()
    }

    /// Copy `c` of the value in `slot`.
    fn value_of(&self, slot: u32, c: usize) -> &[u8] {
        let a = self.value_off(slot, c);
        &self.values[a..a + self.def.value_size as usize]
    }

    /// Calls `f(key, slot)` for every entry: array slots in index order, hash entries sorted by
    /// key bytes (only their slots are collected to sort).
    fn for_each_entry<E>(&self, mut f: impl FnMut(&[u8], u32) -> Result<(), E>) -> Result<(), E> {
        if self.ring.is_some() {
            return Ok(());
        }
        match &self.table {
            Some(t) => {
                let mut slots: Vec<u32> = t.iter().map(|(s, _)| s).collect();
                slots.sort_by(|&a, &b| t.key(a).cmp(t.key(b)));
                for s in slots {
                    f(t.key(s), s)?;
                }
            }
            None => {
                for s in 0..self.def.max_entries {
                    if self.present.get(s as usize).copied().unwrap_or(true) {
                        f(&s.to_le_bytes(), s)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Every entry, sorted by key bytes: (key, one value per CPU).
    #[must_use]
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<&[u8]>)> {
        if self.ring.is_some() {
            return Vec::new();
        }
        let mut out: Vec<(Vec<u8>, Vec<&[u8]>)> = match &self.table {
            Some(t) => t.iter().map(|(s, k)| (k.to_vec(), self.copies_of(s))).collect(),
            None => (0..self.def.max_entries)
                .filter(|&s| self.present.get(s as usize).copied().unwrap_or(true))
                .map(|s| (s.to_le_bytes().to_vec(), self.copies_of(s)))
                .collect(),
        };
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// `BPF_F_INNER_MAP`: inner maps may differ from the template in `max_entries`.
const INNER_MAP: u32 = 1 << 12;

/// Host side: puts map `inner` under `key` of map of maps `outer`, if it fits the template the
/// outer map declares (as the kernel's map update checks an inner map against the map it was
/// created with).
///
/// # Errors
///
/// No such maps, an outer map that holds no maps, an inner map of another kind or size.
pub fn set_inner(maps: &mut [Map], outer: usize, key: &[u8], inner: usize) -> Result<(), String> {
    let i = maps.get(inner).ok_or("no such inner map")?.def().clone();
    let o = maps.get(outer).ok_or("no such map")?;
    let name = &o.def().name;
    if !o.def().map_type.is_map_of_maps() {
        return Err(format!("map {name} holds no maps"));
    }
    if i.map_type.is_map_of_maps() {
        return Err(format!("map {name}: map {} holds maps itself (EINVAL)", i.name));
    }
    if let Some(t) = &o.inner {
        let fits = t.map_type == i.map_type
            && t.key_size == i.key_size
            && t.value_size == i.value_size
            && (t.flags & INNER_MAP != 0 || t.max_entries == i.max_entries);
        if !fits {
            return Err(format!(
                "map {name} holds {} maps of {}-byte keys, {}-byte values and {} entries; map {} is {} with {}, {} and {} (EINVAL)",
                t.map_type.name(), t.key_size, t.value_size, t.max_entries,
                i.name, i.map_type.name(), i.key_size, i.value_size, i.max_entries
            ));
        }
    }
    let idx = u32::try_from(inner).map_err(|_| "map index too large")?;
    maps[outer].host_set(key, &idx.to_le_bytes())
}

/// Parses a key or value for a map with `size`-byte keys or values: a number (decimal or
/// `0x`-hex, stored little-endian; sizes up to 8 bytes) or `hex:` followed by exactly `size`
/// bytes in hex.
///
/// # Errors
///
/// What is wrong with the text.
pub fn parse_bytes(text: &str, size: usize) -> Result<Vec<u8>, String> {
    if let Some(h) = text.strip_prefix("hex:") {
        let digits: Vec<u8> = h.bytes().filter(|b| !matches!(b, b'_' | b' ')).collect();
        if digits.len() != 2 * size {
            return Err(format!("'{text}': expected {size} bytes in hex"));
        }
        return digits
            .chunks(2)
            .map(|p| {
                let s = core::str::from_utf8(p).map_err(|_| format!("'{text}': not hex"))?;
                u8::from_str_radix(s, 16).map_err(|_| format!("'{text}': not hex"))
            })
            .collect();
    }
    if size > 8 {
        return Err(format!(
            "'{text}': {size}-byte keys/values are written as hex:<{size} bytes>"
        ));
    }
    let (digits, radix) = match text.strip_prefix("0x") {
        Some(h) => (h, 16),
        None => (text, 10),
    };
    let v = u64::from_str_radix(digits, radix).map_err(|_| format!("'{text}': not a number"))?;
    if size < 8 && v >> (8 * size) != 0 {
        return Err(format!("'{text}' does not fit in {size} bytes"));
    }
    Ok(v.to_le_bytes()[..size].to_vec())
}

/// Writes bytes as a JSON value: a number for 1, 2, 4 and 8 bytes (little-endian), a hex string
/// otherwise.
pub fn json_bytes(out: &mut String, b: &[u8]) {
    let _ = json_value(out, b);
}

/// A JSON document of every map and its entries: `{"maps": [{"name", "type", "key_size",
/// "value_size", "max_entries", "entries": [{"key", "value"}]}]}`; per-CPU maps give `"values"`,
/// one per CPU. Built in memory: for large maps use [`write_json`].
#[must_use]
pub fn to_json(maps: &[Map]) -> String {
    let mut s = String::new();
    let _ = write_json(maps, &mut s);
    s
}

/// Writes the document of [`to_json`] piece by piece into `out`: array entries in index order,
/// hash entries sorted by key bytes; nothing but a list of the hash maps' slots is held besides
/// what `out` keeps. At most [`json_size_bound`] bytes.
///
/// # Errors
///
/// The first error of `out`.
pub fn write_json<W: fmt::Write>(maps: &[Map], out: &mut W) -> fmt::Result {
    out.write_str("{\"maps\": [")?;
    for (i, m) in maps.iter().enumerate() {
        let d = m.def();
        write!(
            out,
            "{}\n  {{\"name\": \"{}\", \"type\": \"{}\", \"key_size\": {}, \"value_size\": {}, \"max_entries\": {}, \"entries\": [",
            if i > 0 { "," } else { "" },
            d.name.escape_default(),
            d.map_type.name(),
            d.key_size,
            d.value_size,
            d.max_entries
        )?;
        let mut first = true;
        m.for_each_entry(|key, slot| {
            out.write_str(if first {
                "\n    {\"key\": "
            } else {
                ",\n    {\"key\": "
            })?;
            first = false;
            json_value(out, key)?;
            if d.map_type.is_percpu() {
                out.write_str(", \"values\": [")?;
                for c in 0..m.copies {
                    if c > 0 {
                        out.write_str(", ")?;
                    }
                    json_value(out, m.value_of(slot, c))?;
                }
                out.write_str("]}")
            } else {
                out.write_str(", \"value\": ")?;
                json_value(out, m.value_of(slot, 0))?;
                out.write_char('}')
            }
        })?;
        out.write_str("]}")?;
    }
    out.write_str("\n]}\n")
}

/// Most bytes [`write_json`] can write for `maps`, counting every possible entry as present and
/// every number at its widest: known before a run, to refuse a dump that could not be handled.
#[must_use]
pub fn json_size_bound(maps: &[Map]) -> u64 {
    // The widest rendering of `n` bytes: a 20-digit number, or 2n hex digits in quotes.
    let item = |n: u64| if matches!(n, 1 | 2 | 4 | 8) { 20 } else { 2 * n + 2 };
    let mut total: u64 = 16;
    for m in maps {
        let d = m.def();
        let copies = m.copies as u64;
        // escape_default writes a character as at most 10 (`\u{10ffff}`).
        let head = 160 + 10 * d.name.len() as u64;
        // `,\n    {"key": ` + key + `, "values": [` + values with ", " + `]}`
        if d.map_type == MapType::RingBuf {
            total = total.saturating_add(head);
            continue;
        }
        let entry = 16 + item(u64::from(d.key_size)) + 14 + copies * (item(u64::from(d.value_size)) + 2) + 2;
        total = total
            .saturating_add(head)
            .saturating_add(entry.saturating_mul(u64::from(d.max_entries)));
    }
    total
}

/// Writes bytes as a JSON value (see [`json_bytes`]).
fn json_value<W: fmt::Write>(out: &mut W, b: &[u8]) -> fmt::Result {
    if matches!(b.len(), 1 | 2 | 4 | 8) {
        let mut v = [0u8; 8];
        v[..b.len()].copy_from_slice(b);
        write!(out, "{}", u64::from_le_bytes(v))
    } else {
        out.write_char('"')?;
        for x in b {
            write!(out, "{x:02x}")?;
        }
        out.write_char('"')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(t: MapType, k: u32, v: u32, n: u32) -> MapDef {
        MapDef {
            name: "m".into(),
            map_type: t,
            key_size: k,
            value_size: v,
            max_entries: n,
            flags: 0,
            read_only: false,
        }
    }

    #[test]
    fn array_semantics() {
        let mut m = Map::new(def(MapType::Array, 4, 8, 4), 2).unwrap();
        assert_eq!(m.lookup(&3u32.to_le_bytes(), 0), Some(24));
        assert_eq!(m.lookup(&4u32.to_le_bytes(), 0), None);
        assert_eq!(m.update(&1u32.to_le_bytes(), &[1; 8], 1, 0), -errno::EEXIST);
        assert_eq!(m.update(&9u32.to_le_bytes(), &[1; 8], 0, 0), -errno::E2BIG);
        assert_eq!(m.update(&1u32.to_le_bytes(), &[1; 8], 0, 0), 0);
        assert_eq!(m.delete(&1u32.to_le_bytes()), -errno::EINVAL);
        assert_eq!(m.host_get(&1u32.to_le_bytes()).unwrap(), [&[1u8; 8][..]]);
        assert!(Map::new(def(MapType::Array, 8, 8, 4), 1).is_err());
    }

    #[test]
    fn percpu_hash_keeps_one_copy_per_cpu() {
        let mut m = Map::new(def(MapType::PercpuHash, 2, 4, 2), 3).unwrap();
        assert_eq!(m.update(&[1, 0], &[7; 4], 0, 2), 0);
        let v = m.host_get(&[1, 0]).unwrap();
        assert_eq!(v, [&[0u8; 4][..], &[0; 4], &[7; 4]]);
        assert_eq!(m.lookup(&[1, 0], 2), Some(8));
        assert_eq!(m.update(&[1, 0], &[1; 4], 1, 0), -errno::EEXIST);
        assert_eq!(m.update(&[2, 0], &[1; 4], 2, 0), -errno::ENOENT);
        assert_eq!(m.update(&[2, 0], &[1; 4], 0, 0), 0);
        assert_eq!(m.update(&[3, 0], &[1; 4], 0, 0), -errno::E2BIG);
        assert_eq!(m.delete(&[1, 0]), 0);
        assert_eq!(m.delete(&[1, 0]), -errno::ENOENT);
        // A recycled slot starts from zero in every copy.
        assert_eq!(m.update(&[3, 0], &[5; 4], 0, 0), 0);
        assert_eq!(m.host_get(&[3, 0]).unwrap()[2], [0; 4]);
    }

    #[test]
    fn devmap_entries_exist_once_set_and_programs_cannot_change_them() {
        let mut m = Map::new(def(MapType::DevMap, 4, 4, 4), 1).unwrap();
        assert_eq!(m.redirect_entry(&0u32.to_le_bytes()), None);
        m.host_set(&0u32.to_le_bytes(), &2u32.to_le_bytes()).unwrap();
        assert_eq!(m.redirect_entry(&0u32.to_le_bytes()), Some(2));
        assert_eq!(m.update(&1u32.to_le_bytes(), &[0; 4], 0, 0), -errno::EOPNOTSUPP);
        assert_eq!(m.entries().len(), 1);
        assert!(Map::new(def(MapType::XskMap, 4, 8, 4), 1).is_err());
    }

    fn lpm_key(len: u32, data: [u8; 4]) -> [u8; 8] {
        let mut k = [0; 8];
        k[..4].copy_from_slice(&len.to_le_bytes());
        k[4..].copy_from_slice(&data);
        k
    }

    #[test]
    fn lpm_trie_matches_the_longest_prefix_and_keeps_the_kernels_errors() {
        let mut d = def(MapType::LpmTrie, 8, 4, 2);
        assert!(Map::new(d.clone(), 1).unwrap_err().contains("BPF_F_NO_PREALLOC"));
        d.flags = 1;
        assert!(Map::new(def(MapType::LpmTrie, 4, 4, 2), 1).is_err());
        let mut m = Map::new(d, 1).unwrap();
        assert_eq!(m.update(&lpm_key(8, [10, 9, 9, 9]), &[1; 4], 0, 0), 0);
        assert_eq!(m.update(&lpm_key(24, [10, 1, 2, 3]), &[2; 4], 0, 0), 0);
        assert_eq!(
            m.update(&lpm_key(16, [10, 1, 0, 0]), &[3; 4], 0, 0),
            -errno::ENOSPC
        );
        assert_eq!(m.update(&lpm_key(33, [0; 4]), &[3; 4], 0, 0), -errno::EINVAL);
        // The same prefix with other bits past it is the same entry.
        assert_eq!(
            m.update(&lpm_key(8, [10, 0, 0, 0]), &[4; 4], 1, 0),
            -errno::EEXIST
        );
        assert_eq!(m.update(&lpm_key(8, [10, 0, 0, 0]), &[4; 4], 2, 0), 0);
        let at = |m: &mut Map, k: [u8; 8]| m.lookup(&k, 0).map(|o| m.storage()[o]);
        assert_eq!(at(&mut m, lpm_key(32, [10, 1, 2, 200])), Some(2));
        assert_eq!(at(&mut m, lpm_key(32, [10, 1, 3, 200])), Some(4));
        assert_eq!(at(&mut m, lpm_key(16, [10, 1, 2, 200])), Some(4));
        assert_eq!(at(&mut m, lpm_key(32, [11, 1, 2, 3])), None);
        assert_eq!(m.delete(&lpm_key(24, [10, 1, 2, 0])), 0);
        assert_eq!(m.delete(&lpm_key(24, [10, 1, 2, 0])), -errno::ENOENT);
        assert_eq!(at(&mut m, lpm_key(32, [10, 1, 2, 200])), Some(4));
        assert_eq!(m.host_get(&lpm_key(8, [10, 7, 7, 7])).unwrap(), [&[4u8; 4][..]]);
        assert!(m
            .host_set(&lpm_key(40, [0; 4]), &[0; 4])
            .unwrap_err()
            .contains("32 bits"));
    }

    #[test]
    fn text_forms() {
        assert_eq!(parse_bytes("258", 4).unwrap(), [2, 1, 0, 0]);
        assert_eq!(parse_bytes("0xff", 1).unwrap(), [255]);
        assert!(parse_bytes("256", 1).is_err());
        assert_eq!(parse_bytes("hex:0a00_0001", 4).unwrap(), [10, 0, 0, 1]);
        assert!(parse_bytes("hex:0a", 4).is_err());
        assert!(parse_bytes("12", 16).is_err());
        let mut m = Map::new(def(MapType::Hash, 4, 16, 4), 1).unwrap();
        m.host_set(&[1, 0, 0, 0], &[0xab; 16]).unwrap();
        let j = to_json(core::slice::from_ref(&m));
        assert!(
            j.contains("{\"key\": 1, \"value\": \"abababababababababababababababab\"}"),
            "{j}"
        );
    }
}
