//! The one capture reader (and writer) of the `onic` tool: `onic run --pcap` and `onic rss spread
//! --pcap` read captures here, with the same rules and the same messages.
//!
//! Rules for reading:
//!
//! - classic pcap only (magic `a1b2c3d4` for microsecond or `a1b23c4d` for nanosecond
//!   timestamps, in either byte order), version 2.x; a pcapng file is refused with a hint to
//!   convert it (`editcap -F pcap`);
//! - link type Ethernet (1); the FCS-length bits above the link type are ignored;
//! - a snapshot length of 0 (some writers leave it unset) or above 262144 bytes (libpcap's
//!   largest) means 262144;
//! - a record whose captured length is above the snapshot length, whose header or data is cut
//!   short by the end of the file, or whose timestamp fraction is a second or more, is an error
//!   naming the record and its byte offset;
//! - the original length is kept as information only (a record may have been cut by the
//!   snapshot length).

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::file::OutputFile;

/// Bytes of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Bytes of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Link type of Ethernet captures.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The largest snapshot length (libpcap's `MAXIMUM_SNAPLEN`); no record is longer.
pub const MAX_SNAPLEN: u32 = 262_144;
/// The snapshot length the writer records (the usual 65535; frames here are far shorter).
pub const WRITE_SNAPLEN: u32 = 65_535;

/// One record of a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Timestamp (since the epoch, as the file says).
    pub ts: Duration,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// The frame's length on the wire as the file says (at least `data.len()` in a sane file).
    pub orig_len: u32,
}

/// Why a capture cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PcapError {
    /// Shorter than a file header.
    TooShort {
        /// Bytes in the file.
        len: usize,
    },
    /// A pcapng file.
    Pcapng,
    /// Not a pcap magic number.
    Magic {
        /// The first four bytes, big-endian.
        magic: u32,
    },
    /// A major version other than 2.
    Version {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// Not Ethernet.
    LinkType {
        /// The link type.
        linktype: u32,
    },
    /// A record header cut short by the end of the file.
    RecordHeader {
        /// Record number (from 1).
        index: u64,
        /// Byte offset of the record.
        offset: u64,
    },
    /// A captured length above the snapshot length.
    CapLen {
        /// Record number (from 1).
        index: u64,
        /// Byte offset of the record.
        offset: u64,
        /// The captured length.
        incl_len: u32,
        /// The snapshot length in effect.
        snaplen: u32,
    },
    /// A timestamp fraction of a second or more.
    Timestamp {
        /// Record number (from 1).
        index: u64,
        /// Byte offset of the record.
        offset: u64,
        /// The fraction field.
        frac: u32,
        /// Its unit: "microseconds" or "nanoseconds".
        unit: &'static str,
    },
    /// The file could not be read (an I/O error, not its contents).
    Io {
        /// Byte offset the read started at.
        offset: u64,
        /// The system's message.
        msg: String,
    },
    /// Record data cut short by the end of the file.
    RecordData {
        /// Record number (from 1).
        index: u64,
        /// Byte offset of the record.
        offset: u64,
        /// The captured length.
        incl_len: u32,
        /// Bytes left in the file after the record header.
        left: usize,
    },
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len } => write!(
                f,
                "{len} bytes long, shorter than a pcap file header ({FILE_HEADER_LEN} bytes)"
            ),
            Self::Pcapng => write!(
                f,
                "a pcapng file; only classic pcap is read (convert it with `editcap -F pcap IN OUT`)"
            ),
            Self::Magic { magic } => write!(
                f,
                "not a pcap file (magic number {magic:#010x}; expected a1b2c3d4 or a1b23c4d in either byte order)"
            ),
            Self::Version { major, minor } => {
                write!(f, "pcap version {major}.{minor}; only version 2.x is read")
            }
            Self::LinkType { linktype } => write!(
                f,
                "link type {linktype} is not Ethernet ({LINKTYPE_ETHERNET}); only Ethernet captures are read"
            ),
            Self::RecordHeader { index, offset } => write!(
                f,
                "record {index} at byte {offset}: the file ends inside its {RECORD_HEADER_LEN}-byte header"
            ),
            Self::CapLen {
                index,
                offset,
                incl_len,
                snaplen,
            } => write!(
                f,
                "record {index} at byte {offset}: captured length {incl_len} is above the snapshot length {snaplen}"
            ),
            Self::Timestamp {
                index,
                offset,
                frac,
                unit,
            } => write!(
                f,
                "record {index} at byte {offset}: timestamp fraction {frac} {unit} is not below one second"
            ),
            Self::Io { offset, ref msg } => write!(f, "cannot read at byte {offset}: {msg}"),
            Self::RecordData {
                index,
                offset,
                incl_len,
                left,
            } => write!(
                f,
                "record {index} at byte {offset}: captured length {incl_len}, but only {left} bytes are left in the file"
            ),
        }
    }
}

impl std::error::Error for PcapError {}

/// The layout a file header announced.
#[derive(Clone, Copy)]
struct Format {
    big_endian: bool,
    /// Nanoseconds per unit of the timestamps' fraction field.
    frac_ns: u64,
    snaplen: u32,
}

impl Format {
    fn u32_at(self, b: &[u8], at: usize) -> Option<u32> {
        let w: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    }

    fn u16_at(self, b: &[u8], at: usize) -> Option<u16> {
        let w: [u8; 2] = b.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u16::from_be_bytes(w)
        } else {
            u16::from_le_bytes(w)
        })
    }
}

fn file_header(data: &[u8]) -> Result<Format, PcapError> {
    let header = data
        .get(..FILE_HEADER_LEN)
        .ok_or(PcapError::TooShort { len: data.len() })?;
    let magic = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let (big_endian, frac_ns) = match magic {
        0xa1b2_c3d4 => (true, 1_000),
        0xd4c3_b2a1 => (false, 1_000),
        0xa1b2_3c4d => (true, 1),
        0x4d3c_b2a1 => (false, 1),
        0x0a0d_0d0a => return Err(PcapError::Pcapng),
        _ => return Err(PcapError::Magic { magic }),
    };
    let mut fmt = Format {
        big_endian,
        frac_ns,
        snaplen: MAX_SNAPLEN,
    };
    let major = fmt.u16_at(header, 4).unwrap_or(0);
    let minor = fmt.u16_at(header, 6).unwrap_or(0);
    if major != 2 {
        return Err(PcapError::Version { major, minor });
    }
    let snaplen = fmt.u32_at(header, 16).unwrap_or(0);
    if snaplen != 0 && snaplen < MAX_SNAPLEN {
        fmt.snaplen = snaplen;
    }
    let linktype = fmt.u32_at(header, 20).unwrap_or(0) & 0x0FFF_FFFF;
    if linktype != LINKTYPE_ETHERNET {
        return Err(PcapError::LinkType { linktype });
    }
    Ok(fmt)
}

/// Reads into `buf` until it is full or the input ends; returns the bytes read.
fn fill(r: &mut impl Read, buf: &mut [u8], offset: u64) -> Result<usize, PcapError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(PcapError::Io {
                    offset: offset + got as u64,
                    msg: e.to_string(),
                })
            }
        }
    }
    Ok(got)
}

/// A capture read one record at a time: the file header is checked when the reader is made, a
/// record is read only when asked for, and no more than one record's bytes (at most
/// [`MAX_SNAPLEN`]) are held, whatever the input's size (a file, a pipe, `/dev/zero`).
pub struct Reader<R> {
    input: R,
    fmt: Format,
    /// Records read so far.
    records: u64,
    /// Byte offset of the next record.
    offset: u64,
    /// After an error or the end: nothing more is read.
    done: bool,
}

impl<R: Read> Reader<R> {
    /// Reads and checks the file header.
    ///
    /// # Errors
    ///
    /// [`PcapError`] for a header the rules refuse, or one that cannot be read.
    pub fn new(mut input: R) -> Result<Self, PcapError> {
        let mut header = [0u8; FILE_HEADER_LEN];
        let got = fill(&mut input, &mut header, 0)?;
        let fmt = file_header(&header[..got])?;
        Ok(Self {
            input,
            fmt,
            records: 0,
            offset: FILE_HEADER_LEN as u64,
            done: false,
        })
    }

    /// The next record, `Ok(None)` at the end of the input.
    ///
    /// # Errors
    ///
    /// [`PcapError`] naming the record and its byte offset; the reader then stops.
    pub fn next_record(&mut self) -> Result<Option<Record>, PcapError> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_record();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    fn read_record(&mut self) -> Result<Option<Record>, PcapError> {
        let (fmt, at) = (self.fmt, self.offset);
        let index = self.records + 1;
        let mut head = [0u8; RECORD_HEADER_LEN];
        match fill(&mut self.input, &mut head, at)? {
            0 => return Ok(None),
            RECORD_HEADER_LEN => {}
            _ => return Err(PcapError::RecordHeader { index, offset: at }),
        }
        let field = |n: usize| fmt.u32_at(&head, 4 * n).unwrap_or(0);
        let (sec, frac, incl_len, orig_len) = (field(0), field(1), field(2), field(3));
        if u64::from(frac) * fmt.frac_ns >= 1_000_000_000 {
            let unit = if fmt.frac_ns == 1 {
                "nanoseconds"
            } else {
                "microseconds"
            };
            return Err(PcapError::Timestamp {
                index,
                offset: at,
                frac,
                unit,
            });
        }
        if incl_len > fmt.snaplen {
            return Err(PcapError::CapLen {
                index,
                offset: at,
                incl_len,
                snaplen: fmt.snaplen,
            });
        }
        // CAST: incl_len <= MAX_SNAPLEN, far below usize::MAX.
        let mut data = vec![0u8; incl_len as usize];
        let body_at = at + RECORD_HEADER_LEN as u64;
        let got = fill(&mut self.input, &mut data, body_at)?;
        if got < data.len() {
            return Err(PcapError::RecordData {
                index,
                offset: at,
                incl_len,
                left: got,
            });
        }
        self.records = index;
        self.offset = body_at + u64::from(incl_len);
        let ts = Duration::from_secs(u64::from(sec)) + Duration::from_nanos(u64::from(frac) * fmt.frac_ns);
        Ok(Some(Record { ts, data, orig_len }))
    }
}

/// Parses a whole capture held in memory (through the same [`Reader`]).
///
/// # Errors
///
/// [`PcapError`] for anything the rules above refuse; nothing is returned for a file that is not
/// read in full.
pub fn parse(data: &[u8]) -> Result<Vec<Record>, PcapError> {
    let mut r = Reader::new(data)?;
    let mut records = Vec::new();
    while let Some(rec) = r.next_record()? {
        records.push(rec);
    }
    Ok(records)
}

/// A capture file opened for reading one record at a time; errors name the file.
pub struct FileReader {
    path: PathBuf,
    inner: Reader<BufReader<File>>,
}

impl FileReader {
    /// Opens `path` and checks its file header (nothing more is read).
    ///
    /// # Errors
    ///
    /// `PATH: <what went wrong>`.
    pub fn open(path: &Path) -> Result<Self, String> {
        let fail = |e: &dyn fmt::Display| format!("{}: {e}", path.display());
        let file = File::open(path).map_err(|e| fail(&format_args!("cannot read: {e}")))?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(fail(&"is a directory, not a capture"));
        }
        let inner = Reader::new(BufReader::new(file)).map_err(|e| fail(&e))?;
        Ok(Self {
            path: path.to_path_buf(),
            inner,
        })
    }

    /// The next record, `Ok(None)` at the end.
    ///
    /// # Errors
    ///
    /// `PATH: record N at byte B: ...`.
    pub fn next_record(&mut self) -> Result<Option<Record>, String> {
        self.inner
            .next_record()
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

/// The file header of [`encode`] and [`Writer`].
fn header_bytes() -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&WRITE_SNAPLEN.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    h
}

/// Appends one record in the writer's layout.
fn encode_record(out: &mut Vec<u8>, ts: Duration, data: &[u8]) {
    // Seconds past 2106 do not fit the field; such timestamps are not produced here.
    let sec = u32::try_from(ts.as_secs()).unwrap_or(u32::MAX);
    // A frame longer than the snapshot length is cut to it, as a capture would be.
    let len = u32::try_from(data.len().min(WRITE_SNAPLEN as usize)).unwrap_or(WRITE_SNAPLEN);
    out.extend_from_slice(&sec.to_le_bytes());
    out.extend_from_slice(&ts.subsec_micros().to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&data[..len as usize]);
}

/// Encodes records as a little-endian microsecond pcap file, version 2.4, snapshot length
/// [`WRITE_SNAPLEN`], link type Ethernet (the layout most writers produce).
#[must_use]
pub fn encode(frames: &[(Duration, Vec<u8>)]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(FILE_HEADER_LEN + frames.iter().map(|(_, d)| 16 + d.len()).sum::<usize>());
    out.extend_from_slice(&header_bytes());
    for (ts, data) in frames {
        encode_record(&mut out, *ts, data);
    }
    out
}

/// A capture written one record at a time into an [`OutputFile`] (a temporary name until
/// [`Writer::finish`]); errors name the file and say it was writing.
pub struct Writer {
    file: OutputFile,
    buf: Vec<u8>,
    /// Records written.
    pub records: u64,
}

impl Writer {
    /// Starts the capture `path` (see [`OutputFile::create`]) and writes its file header.
    ///
    /// # Errors
    ///
    /// `PATH: cannot write: <error>`.
    pub fn create(path: &Path) -> Result<Self, String> {
        let mut file = OutputFile::create(path)?;
        file.write_bytes(&header_bytes())?;
        Ok(Self {
            file,
            buf: Vec::new(),
            records: 0,
        })
    }

    /// Appends a record.
    ///
    /// # Errors
    ///
    /// `PATH: cannot write: <error>`.
    pub fn record(&mut self, ts: Duration, data: &[u8]) -> Result<(), String> {
        self.buf.clear();
        encode_record(&mut self.buf, ts, data);
        self.records += 1;
        self.file.write_bytes(&self.buf)
    }

    /// Completes the capture: it appears under its name only now.
    ///
    /// # Errors
    ///
    /// `PATH: cannot write: <error>`; the partial file is removed.
    pub fn finish(self) -> Result<(), String> {
        self.file.commit()
    }
}

/// Writes records to a capture file, complete or not at all (see [`OutputFile`]).
///
/// # Errors
///
/// `PATH: cannot write: <error>`.
pub fn write(path: &Path, frames: &[(Duration, Vec<u8>)]) -> Result<(), String> {
    let mut w = Writer::create(path)?;
    for (ts, data) in frames {
        w.record(*ts, data)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(magic: [u8; 4], major: u16, snaplen: u32, linktype: u32) -> Vec<u8> {
        let mut f = magic.to_vec();
        f.extend_from_slice(&major.to_le_bytes());
        f.extend_from_slice(&4u16.to_le_bytes());
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&snaplen.to_le_bytes());
        f.extend_from_slice(&linktype.to_le_bytes());
        f
    }

    fn record(f: &mut Vec<u8>, sec: u32, frac: u32, body: &[u8]) {
        f.extend_from_slice(&sec.to_le_bytes());
        f.extend_from_slice(&frac.to_le_bytes());
        f.extend_from_slice(&(body.len() as u32).to_le_bytes());
        f.extend_from_slice(&(body.len() as u32).to_le_bytes());
        f.extend_from_slice(body);
    }

    const LE_US: [u8; 4] = [0xd4, 0xc3, 0xb2, 0xa1];
    const LE_NS: [u8; 4] = [0x4d, 0x3c, 0xb2, 0xa1];

    #[test]
    fn records_and_timestamps() {
        let mut f = header(LE_US, 2, 65535, 1);
        record(&mut f, 5, 250_000, &[1, 2, 3]);
        record(&mut f, 6, 0, &[4, 5]);
        let r = parse(&f).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].ts, r[0].data.as_slice()),
            (Duration::from_millis(5250), &[1u8, 2, 3][..])
        );
        assert_eq!(r[1].data, [4, 5]);
        let mut f = header(LE_NS, 2, 65535, 1);
        record(&mut f, 1, 7, &[9]);
        assert_eq!(parse(&f).unwrap()[0].ts, Duration::new(1, 7));
    }

    #[test]
    fn big_endian_files_are_read() {
        let mut f = vec![0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4];
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&100u32.to_be_bytes());
        f.extend_from_slice(&1u32.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0xAA, 0xBB]);
        let r = parse(&f).unwrap();
        assert_eq!(
            (r[0].data.clone(), r[0].ts),
            (vec![0xAA, 0xBB], Duration::new(1, 2000))
        );
    }

    #[test]
    fn what_is_refused_and_how_it_is_said() {
        assert_eq!(parse(&[0; 10]), Err(PcapError::TooShort { len: 10 }));
        let ng = header([0x0a, 0x0d, 0x0d, 0x0a], 2, 0, 1);
        assert_eq!(parse(&ng), Err(PcapError::Pcapng));
        assert!(PcapError::Pcapng.to_string().contains("editcap -F pcap"));
        assert!(matches!(
            parse(&header(*b"GIF8", 2, 0, 1)),
            Err(PcapError::Magic { .. })
        ));
        assert_eq!(
            parse(&header(LE_US, 1, 0, 1)),
            Err(PcapError::Version { major: 1, minor: 4 })
        );
        assert_eq!(
            parse(&header(LE_US, 2, 0, 101)),
            Err(PcapError::LinkType { linktype: 101 })
        );
        // The FCS bits above the link type are ignored.
        assert_eq!(parse(&header(LE_US, 2, 0, 1 | 0x1000_0000)), Ok(vec![]));
        let mut f = header(LE_US, 2, 64, 1);
        record(&mut f, 0, 0, &[0; 65]);
        assert_eq!(
            parse(&f),
            Err(PcapError::CapLen {
                index: 1,
                offset: 24,
                incl_len: 65,
                snaplen: 64
            })
        );
        let mut f = header(LE_US, 2, 0, 1);
        record(&mut f, 0, 0, &[1, 2, 3]);
        let whole = f.len();
        f.truncate(whole - 1);
        assert_eq!(
            parse(&f),
            Err(PcapError::RecordData {
                index: 1,
                offset: 24,
                incl_len: 3,
                left: 2
            })
        );
        f.truncate(30);
        assert_eq!(parse(&f), Err(PcapError::RecordHeader { index: 1, offset: 24 }));
        let mut f = header(LE_US, 2, 0, 1);
        record(&mut f, 0, 1_000_000, &[1]);
        assert!(matches!(
            parse(&f),
            Err(PcapError::Timestamp { frac: 1_000_000, .. })
        ));
    }

    #[test]
    fn snaplen_zero_or_huge_means_the_largest() {
        for snaplen in [0, u32::MAX] {
            let mut f = header(LE_US, 2, snaplen, 1);
            record(&mut f, 0, 0, &[7; 9000]);
            assert_eq!(parse(&f).unwrap()[0].data.len(), 9000);
        }
        let mut f = header(LE_US, 2, 0, 1);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&(MAX_SNAPLEN + 1).to_le_bytes());
        f.extend_from_slice(&(MAX_SNAPLEN + 1).to_le_bytes());
        assert!(matches!(parse(&f), Err(PcapError::CapLen { .. })));
    }

    #[test]
    fn what_is_written_reads_back() {
        let frames = vec![
            (Duration::new(1_700_000_000, 123_000), vec![1u8; 60]),
            (Duration::new(1_700_000_001, 0), vec![2u8; 1514]),
        ];
        let r = parse(&encode(&frames)).unwrap();
        let back: Vec<(Duration, Vec<u8>)> = r.into_iter().map(|r| (r.ts, r.data)).collect();
        assert_eq!(back, frames);
    }

    #[test]
    fn a_write_failure_says_so() {
        let full = Path::new("/dev/full");
        if full.exists() {
            let e = write(full, &[(Duration::ZERO, vec![0; 100])]).unwrap_err();
            assert!(e.starts_with("/dev/full: cannot write:"), "{e}");
            assert!(!e.contains("reading"), "{e}");
        }
    }
}
