//! The BPF differential set as one file, for a host that cannot run the kernel side itself (the
//! bare-metal image): the frames, the objects, and for each program of the set the kernel's
//! outcome on every frame with the engine's where it differs; and the one way both the
//! differential runner and such a host run a program on a frame ([`test_run`]), laid out as the
//! kernel's `BPF_PROG_TEST_RUN` lays it out.
//!
//! The encoding is little-endian and length-prefixed: a magic that names the format's version,
//! then the frames, the objects and the programs, each a count followed by its items
//! ([`Bundle::encode`], [`Bundle::decode`]). A program carries what the harness does to its maps
//! after the load ([`Setup`]: tail call tables, inner maps), which [`set_up`] does on either host.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use onic_core::xdp::{XdpBuff, XdpRxq};

use crate::maps::{self, Map, MapDef, MapType};
use crate::{Host, Loaded, Loader, SimHost, XdpEngine};

/// First bytes of a bundle: the format's version is its last byte (2: programs carry their
/// [`Setup`]).
pub const MAGIC: &[u8; 8] = b"ONICBPF2";
/// Headroom in front of the frame (the kernel's `XDP_PACKET_HEADROOM`).
pub const HEADROOM: usize = 256;
/// The page a frame lies in (the kernel's test run uses one page too).
pub const PAGE: usize = 4096;

/// What a program did with one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The program ran: its return value, the metadata and the frame after it.
    Ran {
        /// The return value.
        verdict: u32,
        /// Metadata in front of the frame.
        meta: Vec<u8>,
        /// The frame.
        frame: Vec<u8>,
    },
    /// The run was refused (the kernel's errno or the engine's reason).
    Refused(String),
}

/// The records one run left in the ring buffers: (ring buffer, record), grouped by the ring
/// buffers' names in order, each one's records in the order they were committed.
pub type Records = Vec<(String, Vec<u8>)>;

/// One frame of one program: the kernel's outcome and ring buffer records, and the engine's
/// where they differ (a difference the differential run lists with its reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// What the kernel's test run did.
    pub kernel: Outcome,
    /// What the engine did on the host, when that is not the kernel's outcome.
    pub engine: Option<Outcome>,
    /// The records the kernel's run left in the ring buffers.
    pub records: Records,
    /// The engine's records on the host, when they are not the kernel's.
    pub engine_records: Option<Records>,
}

/// The records `engine`'s runs handed its host for its ring buffers, as [`Records`] orders them.
#[must_use]
pub fn ring_records(engine: &XdpEngine<SimHost>) -> Records {
    let mut rings: Vec<&str> = engine
        .maps()
        .iter()
        .filter(|m| m.def().map_type == MapType::RingBuf)
        .map(|m| m.def().name.as_str())
        .collect();
    rings.sort_unstable();
    rings.dedup();
    let mut out = Vec::new();
    for ring in rings {
        for (m, _, r) in engine.host().records.iter().filter(|(m, _, _)| m == ring) {
            out.push((m.clone(), r.clone()));
        }
    }
    out
}

/// One program of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleProgram {
    /// `object-id:function`.
    pub id: String,
    /// The function to load.
    pub func: String,
    /// Index of its object in [`Bundle::objects`].
    pub object: u32,
    /// Entries of a map declared without `max_entries`.
    pub entries: u32,
    /// Why a host without the kernel cannot run it (`None`: it can).
    pub skip: Option<String>,
    /// What the harness does to the maps after the load, in order.
    pub setup: Vec<Setup>,
    /// Per frame of [`Bundle::frames`]: what is expected, `None` where the kernel refused to run
    /// the frame (nothing to compare).
    pub frames: Vec<Option<Expected>>,
}

/// One thing the harness does to a loaded program's maps beyond what the object declares, as the
/// program's own user space would (the kernel side does the same through libbpf).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setup {
    /// Load function `func` of the same object (as XDP) and put it at entry `key` of program
    /// array `map`; a function named twice is loaded once.
    TailCall {
        /// The program array.
        map: String,
        /// Its entry.
        key: u32,
        /// The function.
        func: String,
    },
    /// Make an array of 4-byte keys named `<map>.inner` and put it at 4-byte key `key` of map of
    /// maps `map`.
    InnerArray {
        /// The map of maps.
        map: String,
        /// Its entry.
        key: u32,
        /// The inner array's value bytes.
        value_size: u32,
        /// The inner array's entries.
        max_entries: u32,
    },
}

/// Does `setup` to `loaded` (loaded by `loader` from `object`), in order.
///
/// # Errors
///
/// A map the object does not have or of the wrong type, a function that does not load, an entry
/// the map refuses (an index beyond it, an inner map that does not fit the declared one), or
/// more map memory than the loader's options allow.
pub fn set_up(
    loader: &Loader<'_>,
    object: &[u8],
    loaded: &mut Loaded,
    setup: &[Setup],
) -> Result<(), String> {
    let mut numbers: BTreeMap<&str, u32> = BTreeMap::new();
    for s in setup {
        match s {
            Setup::TailCall { map, key, func } => {
                let m = map_named(loaded, map, |t| t == MapType::ProgArray)?;
                let n = match numbers.get(func.as_str()) {
                    Some(&n) => n,
                    None => {
                        let other = loader
                            .load(object, Some(func))
                            .map_err(|e| format!("tail call target {func}: {e}"))?;
                        loaded.tail_programs.push(other.program);
                        let n = u32::try_from(loaded.tail_programs.len()).map_err(|_| "too many programs")?;
                        numbers.insert(func, n);
                        n
                    }
                };
                loaded.maps[m]
                    .host_set(&key.to_le_bytes(), &n.to_le_bytes())
                    .map_err(|e| format!("map {map}: entry {key}: {e}"))?;
            }
            Setup::InnerArray {
                map,
                key,
                value_size,
                max_entries,
            } => {
                let outer = map_named(loaded, map, MapType::is_map_of_maps)?;
                let def = MapDef {
                    name: format!("{map}.inner"),
                    map_type: MapType::Array,
                    key_size: 4,
                    value_size: *value_size,
                    max_entries: *max_entries,
                    flags: 0,
                    read_only: false,
                };
                let opts = loader.options();
                let used: usize = loaded
                    .maps
                    .iter()
                    .map(|m| Map::footprint(m.def(), opts.cpus))
                    .sum();
                if used.saturating_add(Map::footprint(&def, opts.cpus)) > opts.max_map_bytes {
                    return Err(format!(
                        "map {}: more map memory than {} bytes",
                        def.name, opts.max_map_bytes
                    ));
                }
                loaded.maps.push(Map::new(def, opts.cpus)?);
                let inner = loaded.maps.len() - 1;
                maps::set_inner(&mut loaded.maps, outer, &key.to_le_bytes(), inner)?;
            }
        }
    }
    Ok(())
}

/// The index of the map called `name`, if its type satisfies `want`.
fn map_named(loaded: &Loaded, name: &str, want: impl Fn(MapType) -> bool) -> Result<usize, String> {
    let i = loaded
        .maps
        .iter()
        .position(|m| m.def().name == name)
        .ok_or_else(|| format!("no map {name}"))?;
    if want(loaded.maps[i].def().map_type) {
        Ok(i)
    } else {
        Err(format!(
            "map {name} is a {}, not what the setup needs",
            loaded.maps[i].def().map_type.name()
        ))
    }
}

/// The differential set with the kernel's outcomes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bundle {
    /// The frames: name and bytes.
    pub frames: Vec<(String, Vec<u8>)>,
    /// The objects' bytes.
    pub objects: Vec<Vec<u8>>,
    /// The programs.
    pub programs: Vec<BundleProgram>,
}

/// Runs `engine` on `frame` as the kernel's test run does: the frame after [`HEADROOM`] bytes
/// of a zeroed [`PAGE`], received on queue 0 of port 0.
pub fn test_run<H: Host>(engine: &mut XdpEngine<H>, frame: &[u8]) -> Outcome {
    let mut page = vec![0u8; PAGE];
    let Some(room) = page.get_mut(HEADROOM..HEADROOM + frame.len()) else {
        return Outcome::Refused("frame larger than a page".into());
    };
    room.copy_from_slice(frame);
    let rxq = XdpRxq {
        queue_index: 0,
        port: 0,
    };
    match XdpBuff::new(&mut page, HEADROOM, frame.len(), rxq) {
        Ok(mut b) => {
            let verdict = engine.run(&mut b);
            Outcome::Ran {
                verdict,
                meta: b.meta().to_vec(),
                frame: b.data().to_vec(),
            }
        }
        Err(err) => Outcome::Refused(alloc::format!("the buffer is refused: {err:?}")),
    }
}

/// Why a bundle could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BundleError {
    /// It does not start with [`MAGIC`].
    Magic,
    /// It ends inside an item.
    Truncated,
    /// A string is not UTF-8, a tag is unknown, or an index names no object.
    Malformed,
}

impl core::fmt::Display for BundleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Magic => "not a bundle of this version (no ONICBPF2 magic)",
            Self::Truncated => "the bundle ends inside an item",
            Self::Malformed => "a string, tag or object index of the bundle is invalid",
        })
    }
}

/// Appends little-endian items.
struct Out(Vec<u8>);

impl Out {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn len(&mut self, n: usize) {
        // CAST: the set's items are far below 4 GiB.
        self.u32(n as u32);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }

    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.0.push(1);
                self.bytes(s.as_bytes());
            }
            None => self.0.push(0),
        }
    }

    fn setup(&mut self, s: &Setup) {
        match s {
            Setup::TailCall { map, key, func } => {
                self.0.push(0);
                self.bytes(map.as_bytes());
                self.u32(*key);
                self.bytes(func.as_bytes());
            }
            Setup::InnerArray {
                map,
                key,
                value_size,
                max_entries,
            } => {
                self.0.push(1);
                self.bytes(map.as_bytes());
                self.u32(*key);
                self.u32(*value_size);
                self.u32(*max_entries);
            }
        }
    }

    fn expected(&mut self, x: Option<&Expected>) {
        let Some(x) = x else {
            self.0.push(0);
            return;
        };
        self.0
            .push(1 | u8::from(x.engine.is_some()) << 1 | u8::from(x.engine_records.is_some()) << 2);
        self.outcome(&x.kernel);
        if let Some(e) = &x.engine {
            self.outcome(e);
        }
        self.records(&x.records);
        if let Some(r) = &x.engine_records {
            self.records(r);
        }
    }

    fn records(&mut self, r: &Records) {
        self.len(r.len());
        for (m, rec) in r {
            self.bytes(m.as_bytes());
            self.bytes(rec);
        }
    }

    fn outcome(&mut self, o: &Outcome) {
        match o {
            Outcome::Ran { verdict, meta, frame } => {
                self.0.push(0);
                self.u32(*verdict);
                self.bytes(meta);
                self.bytes(frame);
            }
            Outcome::Refused(why) => {
                self.0.push(1);
                self.bytes(why.as_bytes());
            }
        }
    }
}

/// Reads little-endian items.
struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BundleError> {
        if self.0.len() < n {
            return Err(BundleError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, BundleError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, BundleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A count of items that each take at least `min` bytes (a count no input could hold is
    /// refused before anything is allocated for it).
    fn count(&mut self, min: usize) -> Result<usize, BundleError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.0.len() {
            return Err(BundleError::Truncated);
        }
        Ok(n)
    }

    fn bytes(&mut self) -> Result<Vec<u8>, BundleError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }

    fn string(&mut self) -> Result<String, BundleError> {
        String::from_utf8(self.bytes()?).map_err(|_| BundleError::Malformed)
    }

    fn opt_string(&mut self) -> Result<Option<String>, BundleError> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.string().map(Some),
            _ => Err(BundleError::Malformed),
        }
    }

    fn outcome(&mut self) -> Result<Outcome, BundleError> {
        match self.u8()? {
            0 => Ok(Outcome::Ran {
                verdict: self.u32()?,
                meta: self.bytes()?,
                frame: self.bytes()?,
            }),
            1 => self.string().map(Outcome::Refused),
            _ => Err(BundleError::Malformed),
        }
    }

    fn setup(&mut self) -> Result<Setup, BundleError> {
        match self.u8()? {
            0 => Ok(Setup::TailCall {
                map: self.string()?,
                key: self.u32()?,
                func: self.string()?,
            }),
            1 => Ok(Setup::InnerArray {
                map: self.string()?,
                key: self.u32()?,
                value_size: self.u32()?,
                max_entries: self.u32()?,
            }),
            _ => Err(BundleError::Malformed),
        }
    }

    fn records(&mut self) -> Result<Records, BundleError> {
        let mut out = Vec::new();
        for _ in 0..self.count(8)? {
            out.push((self.string()?, self.bytes()?));
        }
        Ok(out)
    }

    /// A tag (0: nothing; bit 0: the kernel's outcome and records follow; bit 1: the engine's
    /// outcome follows; bit 2: the engine's records follow), then what it says.
    fn expected(&mut self) -> Result<Option<Expected>, BundleError> {
        let tag = self.u8()?;
        if tag == 0 {
            return Ok(None);
        }
        if tag & 1 == 0 || tag > 7 {
            return Err(BundleError::Malformed);
        }
        let kernel = self.outcome()?;
        let engine = if tag & 2 == 0 { None } else { Some(self.outcome()?) };
        let records = self.records()?;
        let engine_records = if tag & 4 == 0 { None } else { Some(self.records()?) };
        Ok(Some(Expected {
            kernel,
            engine,
            records,
            engine_records,
        }))
    }
}

impl Bundle {
    /// The bundle as bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Out(MAGIC.to_vec());
        o.len(self.frames.len());
        for (name, f) in &self.frames {
            o.bytes(name.as_bytes());
            o.bytes(f);
        }
        o.len(self.objects.len());
        for obj in &self.objects {
            o.bytes(obj);
        }
        o.len(self.programs.len());
        for p in &self.programs {
            o.bytes(p.id.as_bytes());
            o.bytes(p.func.as_bytes());
            o.u32(p.object);
            o.u32(p.entries);
            o.opt_str(p.skip.as_deref());
            o.len(p.setup.len());
            for x in &p.setup {
                o.setup(x);
            }
            o.len(p.frames.len());
            for x in &p.frames {
                o.expected(x.as_ref());
            }
        }
        o.0
    }

    /// Reads a bundle [`Bundle::encode`] wrote.
    ///
    /// # Errors
    ///
    /// A missing magic, a truncated item, an invalid string, tag or object index.
    pub fn decode(bytes: &[u8]) -> Result<Self, BundleError> {
        let mut i = In(bytes);
        if i.take(MAGIC.len()).map_err(|_| BundleError::Magic)? != MAGIC {
            return Err(BundleError::Magic);
        }
        let mut b = Self::default();
        for _ in 0..i.count(8)? {
            b.frames.push((i.string()?, i.bytes()?));
        }
        for _ in 0..i.count(4)? {
            b.objects.push(i.bytes()?);
        }
        for _ in 0..i.count(25)? {
            let mut p = BundleProgram {
                id: i.string()?,
                func: i.string()?,
                object: i.u32()?,
                entries: i.u32()?,
                skip: i.opt_string()?,
                setup: Vec::new(),
                frames: Vec::new(),
            };
            if p.object as usize >= b.objects.len() {
                return Err(BundleError::Malformed);
            }
            for _ in 0..i.count(13)? {
                p.setup.push(i.setup()?);
            }
            for _ in 0..i.count(1)? {
                p.frames.push(i.expected()?);
            }
            b.programs.push(p);
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn sample() -> Bundle {
        let ran = |v: u32, f: &[u8]| Outcome::Ran {
            verdict: v,
            meta: vec![1, 2],
            frame: f.to_vec(),
        };
        Bundle {
            frames: vec![
                ("udp".to_string(), vec![7; 60]),
                ("runt".to_string(), vec![1; 10]),
            ],
            objects: vec![vec![0x7f, b'E', b'L', b'F']],
            programs: vec![
                BundleProgram {
                    id: "a:xdp_prog".into(),
                    func: "xdp_prog".into(),
                    object: 0,
                    entries: 2,
                    skip: None,
                    setup: vec![
                        Setup::TailCall {
                            map: "jmp_table".into(),
                            key: 1,
                            func: "classifier_1".into(),
                        },
                        Setup::InnerArray {
                            map: "mim".into(),
                            key: 0,
                            value_size: 4,
                            max_entries: 2,
                        },
                    ],
                    frames: vec![
                        Some(Expected {
                            kernel: ran(2, &[7; 60]),
                            engine: None,
                            records: vec![
                                ("ring".to_string(), vec![1, 2, 3]),
                                ("ring".to_string(), Vec::new()),
                            ],
                            engine_records: None,
                        }),
                        Some(Expected {
                            kernel: ran(1, &[1; 10]),
                            engine: Some(Outcome::Refused("no".into())),
                            records: Vec::new(),
                            engine_records: Some(vec![("ring".to_string(), vec![9])]),
                        }),
                    ],
                },
                BundleProgram {
                    id: "a:other".into(),
                    func: "other".into(),
                    object: 0,
                    entries: 2,
                    skip: Some("needs the kernel's BTF".into()),
                    setup: Vec::new(),
                    frames: vec![None, None],
                },
            ],
        }
    }

    #[test]
    fn a_bundle_reads_back_as_written() {
        let b = sample();
        assert_eq!(Bundle::decode(&b.encode()), Ok(b));
    }

    #[test]
    fn every_truncation_and_a_bad_magic_are_refused_without_a_panic() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            assert!(Bundle::decode(&bytes[..n]).is_err(), "{n} bytes");
        }
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert_eq!(Bundle::decode(&bad), Err(BundleError::Magic));
        // A bundle of the first version (no setup) is refused as such, not misread.
        let mut old = bytes.clone();
        old[..8].copy_from_slice(b"ONICBPF1");
        assert_eq!(Bundle::decode(&old), Err(BundleError::Magic));
        let mut bad_tag = sample();
        bad_tag.programs[1].setup.push(Setup::TailCall {
            map: "m".into(),
            key: 0,
            func: "f".into(),
        });
        let mut bytes = bad_tag.encode();
        // The setup's tag is the byte after the program's setup count (after its skip string).
        let at = bytes.len() - (4 + 2) - (4 + 1 + 4 + 4 + 1) - 1;
        assert_eq!(bytes[at], 0);
        bytes[at] = 9;
        assert_eq!(Bundle::decode(&bytes), Err(BundleError::Malformed));
        // A frame's tag: the engine's outcome or records without the kernel's, an unknown bit.
        let mut bytes = sample().encode();
        let last = bytes.len() - 1;
        assert_eq!(bytes[last], 0);
        for tag in [2, 4, 8] {
            bytes[last] = tag;
            assert_eq!(Bundle::decode(&bytes), Err(BundleError::Malformed), "tag {tag}");
        }
    }

    #[test]
    fn an_object_index_beyond_the_objects_is_malformed() {
        let mut b = sample();
        b.programs[0].object = 1;
        assert_eq!(Bundle::decode(&b.encode()), Err(BundleError::Malformed));
    }

    #[test]
    fn a_frame_past_the_page_is_refused_and_a_small_one_runs_at_the_kernels_headroom() {
        // r0 = 2 (XDP_PASS); exit
        let i = |op, imm| crate::insn::Insn {
            op,
            dst: 0,
            src: 0,
            off: 0,
            imm,
        };
        let p = crate::Program::from_insns("pass", vec![i(0xb7, 2), i(crate::insn::EXIT, 0)]);
        let mut e = XdpEngine::with_program(p, Vec::new(), crate::SimHost::new(1, 1), 1000);
        assert!(matches!(test_run(&mut e, &[0; PAGE]), Outcome::Refused(_)));
        assert_eq!(
            test_run(&mut e, &[5; 60]),
            Outcome::Ran {
                verdict: 2,
                meta: Vec::new(),
                frame: vec![5; 60]
            }
        );
    }
}
