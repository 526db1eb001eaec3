//! `onic rss`: the shell's RSS hash of a frame, standard Toeplitz of any bytes, and how a set of
//! flows spreads over the RX queues for a given indirection table.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use crate::rng::Rng;
use onic_core::device::rss_control::{HashFunction, RssConfig};
use onic_core::rss::{RssKey, RxHash, ShellHasher, ShellTuple, Toeplitz, KEY_LEN, TABLE_LEN};

/// Arguments of `onic rss`.
#[derive(clap::Args)]
pub struct RssArgs {
    #[command(subcommand)]
    command: RssCommand,
}

#[derive(clap::Subcommand)]
enum RssCommand {
    /// The shell's hash of one Ethernet frame: prints `hash=0x... index=<hash & 0x7F> type=<l4|l3|none>`.
    Hash {
        /// The frame in hex, from the first destination-MAC byte on (`:`, `-`, `_`, spaces allowed).
        #[arg(long)]
        frame: String,
        /// The 40-byte key in ethtool byte order, 80 hex digits [default: the RTL reset key].
        #[arg(long)]
        key: Option<String>,
    },
    /// Standard (Microsoft) Toeplitz of arbitrary input bytes: prints `0x...`.
    Toeplitz {
        /// The key in hex, 4 to 52 bytes [default: the 40-byte Microsoft key 6d5a56da...].
        #[arg(long)]
        key: Option<String>,
        /// The input in hex (e.g. source address, destination address, source port, destination port).
        #[arg(long)]
        input: String,
    },
    /// How flows spread over the RX queues for an indirection table built like `ethtool -X`.
    Spread(SpreadArgs),
}

/// Arguments of `onic rss spread`.
#[derive(clap::Args)]
struct SpreadArgs {
    /// Number of RX queues of the function (1..=64); the table defaults to entry k = k % queues.
    #[arg(long, default_value_t = 4)]
    queues: u16,
    /// Table as `ethtool -X equal N`.
    #[arg(long, conflicts_with_all = ["weights", "indir"])]
    equal: Option<u16>,
    /// Table as `ethtool -X weight W0 W1 ...`, comma-separated.
    #[arg(long, value_delimiter = ',', conflicts_with = "indir")]
    weights: Option<Vec<u32>>,
    /// The 128 table entries, comma-separated.
    #[arg(long, value_delimiter = ',')]
    indir: Option<Vec<u16>>,
    /// The 40-byte key, 80 hex digits [default: the RTL reset key].
    #[arg(long)]
    key: Option<String>,
    /// Read frames from a classic pcap file (Ethernet) instead of generating flows.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Number of flows to generate (random IPv4 TCP and UDP 4-tuples, one frame each;
    /// 1..=10000000).
    #[arg(long, default_value_t = 10_000)]
    flows: u32,
    /// Seed of the flow generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Protocol of the generated flows.
    #[arg(long, value_enum, default_value_t = Proto::Mixed)]
    proto: Proto,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Proto {
    Tcp,
    Udp,
    /// Half TCP, half UDP.
    Mixed,
}

pub fn run(args: &RssArgs) -> Result<(), String> {
    match &args.command {
        RssCommand::Hash { frame, key } => {
            let frame = parse_hex(frame).map_err(|e| format!("--frame: {e}"))?;
            let key = shell_key(key.as_deref())?;
            let rx = ShellHasher::new(&key).hash_frame(&frame);
            outln!(
                "hash=0x{:08x} index={} type={}",
                rx.value,
                rx.table_index(),
                rx.kind
            );
            Ok(())
        }
        RssCommand::Toeplitz { key, input } => {
            let key = match key {
                Some(k) => parse_hex(k).map_err(|e| format!("--key: {e}"))?,
                None => RssKey::MICROSOFT.as_bytes().to_vec(),
            };
            let input = parse_hex(input).map_err(|e| format!("--input: {e}"))?;
            let t = Toeplitz::new(&key).map_err(|e| format!("--key: {e}"))?;
            outln!("0x{:08x}", t.hash(&input));
            Ok(())
        }
        RssCommand::Spread(a) => spread(a),
    }
}

/// Hex digits to bytes; separators `:`, `-`, `_`, whitespace and a leading `0x` are ignored.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    let digits: Vec<u8> = s
        .chars()
        .filter(|c| !matches!(c, ':' | '-' | '_') && !c.is_whitespace())
        .map(|c| {
            c.to_digit(16)
                .map(|d| d as u8)
                .ok_or(format!("'{c}' is not a hex digit"))
        })
        .collect::<Result<_, _>>()?;
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    Ok(digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect())
}

fn shell_key(hex: Option<&str>) -> Result<RssKey, String> {
    match hex {
        None => Ok(RssKey::DEFAULT),
        Some(h) => {
            let bytes = parse_hex(h).map_err(|e| format!("--key: {e}"))?;
            RssKey::from_slice(&bytes).map_err(|e| {
                format!(
                    "--key: {e} ({} hex digits, expected {})",
                    2 * bytes.len(),
                    2 * KEY_LEN
                )
            })
        }
    }
}

/// Most flows `onic rss spread` generates (each is kept in a set to count distinct flows).
const MAX_FLOWS: u32 = 10_000_000;

fn spread(a: &SpreadArgs) -> Result<(), String> {
    use onic_cli::limits::in_range;
    let max_q = onic_core::config::MAX_QUEUES_PER_FUNCTION;
    in_range("--queues", a.queues, 1, max_q, "RX queues of a function")?;
    if a.pcap.is_none() {
        in_range("--flows", a.flows, 1, MAX_FLOWS, "flows to generate")?;
    }
    let (cfg, key, table_desc) = table(a)?;
    let hasher = ShellHasher::new(&key);
    let key_desc = if key == RssKey::DEFAULT {
        "RTL reset key".to_string()
    } else {
        format!("{key:?}")
    };
    let mut counts = Counts::new(usize::from(a.queues));
    let mut count = |t: ShellTuple| counts.add(&t, hasher.hash_tuple(&t), &cfg);
    let source = if let Some(path) = &a.pcap {
        // One record at a time: the capture is never held whole.
        let mut reader = onic_cli::pcap::FileReader::open(path)?;
        let mut n = 0u64;
        while let Some(r) = reader.next_record()? {
            count(ShellTuple::parse(&r.data));
            n += 1;
        }
        format!("{n} frames from {}", path.display())
    } else {
        generate(a, count)
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "table: {TABLE_LEN} entries over {} RX queues ({table_desc})",
        a.queues
    );
    let _ = writeln!(out, "key:   {key_desc}");
    let _ = writeln!(out, "input: {source}");
    let _ = writeln!(out);
    counts.write(&mut out, &cfg);
    out!("{out}");
    Ok(())
}

/// The RSS configuration the options describe (queues, key, and the table built like
/// `ethtool -X`), with the key and the table's description.
fn table(a: &SpreadArgs) -> Result<(RssConfig, RssKey, String), String> {
    let mut cfg = RssConfig::new(a.queues).map_err(|e| format!("--queues: {e}"))?;
    let key = shell_key(a.key.as_deref())?;
    cfg.set(None, Some(key.as_bytes()), HashFunction::NoChange)
        .map_err(|e| e.to_string())?;
    let table_desc = if let Some(n) = a.equal {
        cfg.equal(n).map_err(|e| format!("--equal: {e}"))?;
        format!("equal {n}")
    } else if let Some(w) = &a.weights {
        cfg.weights(w).map_err(|e| format!("--weights: {e}"))?;
        format!(
            "weight {}",
            w.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
        )
    } else if let Some(e) = &a.indir {
        cfg.set(Some(e), None, HashFunction::NoChange)
            .map_err(|e| format!("--indir: {e}"))?;
        "given entries".to_string()
    } else {
        format!("default, entry k = k % {}", a.queues)
    };
    Ok((cfg, key, table_desc))
}

/// Hands `count` the generated flows (`--flows` random IPv4 4-tuples of `--proto`); returns
/// what they were.
fn generate(a: &SpreadArgs, mut count: impl FnMut(ShellTuple)) -> String {
    let mut rng = Rng::new(a.seed);
    let (label, mix) = match a.proto {
        Proto::Tcp => ("TCP", [6u8, 6]),
        Proto::Udp => ("UDP", [17, 17]),
        Proto::Mixed => ("TCP and UDP", [6, 17]),
    };
    for i in 0..a.flows {
        let r = rng.next();
        let s = rng.next();
        let protocol = mix[(i % 2) as usize];
        count(ShellTuple::ipv4(
            protocol,
            Ipv4Addr::from((r >> 32) as u32),
            Ipv4Addr::from(r as u32),
            (s >> 48) as u16,
            (s >> 32) as u16,
        ));
    }
    format!("{} generated IPv4 {label} flows (seed {})", a.flows, a.seed)
}

/// What the spread counts: per queue, packets and distinct flows; per hash type, packets.
struct Counts {
    packets: Vec<u64>,
    flows: Vec<HashSet<[u8; 13]>>,
    kinds: BTreeMap<&'static str, u64>,
    /// Inputs that hashed to 0.
    zero_hash: u64,
}

impl Counts {
    fn new(queues: usize) -> Self {
        Self {
            packets: vec![0; queues],
            flows: vec![HashSet::new(); queues],
            kinds: BTreeMap::new(),
            zero_hash: 0,
        }
    }

    /// Counts tuple `t`, whose hash is `rx`, on the queue `cfg` sends it to.
    fn add(&mut self, t: &ShellTuple, rx: RxHash, cfg: &RssConfig) {
        let queue = cfg.queue_for(rx.value).index();
        self.packets[queue] += 1;
        self.flows[queue].insert(*t.as_bytes());
        *self.kinds.entry(rx.kind.name()).or_default() += 1;
        self.zero_hash += u64::from(rx.value == 0);
    }

    /// The per-queue table against what the table's entries lead to expect, the balance, and
    /// the hash types.
    fn write(&self, out: &mut String, cfg: &RssConfig) {
        let q = self.packets.len();
        let packets = &self.packets;
        let mut entries = vec![0usize; q];
        for &e in cfg.table().entries() {
            entries[usize::from(e)] += 1;
        }
        let total: u64 = packets.iter().sum();
        let _ = writeln!(
            out,
            "{:>5} {:>7} {:>9} {:>9} {:>8} {:>9} {:>9}  ",
            "queue", "entries", "expected", "packets", "flows", "share", "vs expect"
        );
        let mut chi2 = 0.0;
        let mut dof = 0u32;
        for i in 0..q {
            let expected = entries[i] as f64 / TABLE_LEN as f64;
            let share = if total > 0 {
                packets[i] as f64 / total as f64
            } else {
                0.0
            };
            let dev = if total == 0 {
                // Nothing to compare: no frame at all.
                "-".to_string()
            } else if expected > 0.0 {
                format!("{:+.1}%", 100.0 * (share - expected) / expected)
            } else if packets[i] > 0 {
                "unexpected".to_string()
            } else {
                "-".to_string()
            };
            if expected > 0.0 && total > 0 {
                let e = expected * total as f64;
                chi2 += (packets[i] as f64 - e).powi(2) / e;
                dof += 1;
            }
            let bar = "#".repeat((share * 50.0).round() as usize);
            let _ = writeln!(
                out,
                "{:>5} {:>7} {:>8.2}% {:>9} {:>8} {:>8.2}% {:>9}  {bar}",
                i,
                entries[i],
                100.0 * expected,
                packets[i],
                self.flows[i].len(),
                100.0 * share,
                dev
            );
        }
        let _ = writeln!(out);
        if total > 0 && dof > 1 {
            let used: Vec<f64> = (0..q)
                .filter(|&i| entries[i] > 0)
                .map(|i| packets[i] as f64 / (entries[i] as f64 / TABLE_LEN as f64 * total as f64))
                .collect();
            let max = used.iter().copied().fold(f64::MIN, f64::max);
            let min = used.iter().copied().fold(f64::MAX, f64::min);
            let _ = writeln!(
                out,
                "balance: busiest queue {max:.3}x its expected load, idlest {min:.3}x; chi-square {chi2:.1} on {} degrees of freedom",
                dof - 1
            );
        }
        if total == 0 {
            let _ = writeln!(out, "no frames: nothing was hashed");
        }
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(out, "hash types: {}", kinds.join(", "));
        if self.zero_hash > 0 {
            let _ = writeln!(
                out,
                "{} frames hashed to 0 (non-IPv4: IPv6, ARP, ...) and all went to entry 0, queue {}",
                self.zero_hash,
                cfg.table().entries()[0]
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_parsing() {
        assert_eq!(parse_hex("0x6d:5a-56 da"), Ok(vec![0x6d, 0x5a, 0x56, 0xda]));
        assert!(parse_hex("abc").is_err());
        assert!(parse_hex("zz").is_err());
        assert_eq!(parse_hex(""), Ok(vec![]));
    }

    #[test]
    fn key_must_be_40_bytes() {
        assert_eq!(shell_key(None), Ok(RssKey::DEFAULT));
        assert!(shell_key(Some("00")).is_err());
        let hex: String = RssKey::MICROSOFT
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(shell_key(Some(&hex)), Ok(RssKey::MICROSOFT));
    }
}
