//! Shared fixtures for the integration tests: an expected-trace builder that spells out register
//! sequences from the hardware spec's tables, independent of the driver's own constants, and the
//! datapath harness over the model. The driver-only rigs and workloads of the benchmarks live in
//! `onic-testkit`; the `onic` tool runs them as `onic bench`, and `cargo bench -p onic-tests` times
//! the same workloads with criterion.

pub mod datapath;

use onic_hal::recording::{Access, AccessKind};
use onic_hal::Bar;

/// Builds an expected access list.
#[derive(Default)]
pub struct Expect {
    /// The accesses so far.
    pub accesses: Vec<Access>,
}

impl Expect {
    /// An empty list.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A write to BAR0.
    pub fn w0(&mut self, offset: u32, value: u32) -> &mut Self {
        self.accesses.push(Access::write(Bar::Qdma, offset, value));
        self
    }

    /// A read of BAR0 returning `value`.
    pub fn r0(&mut self, offset: u32, value: u32) -> &mut Self {
        self.accesses.push(Access::read(Bar::Qdma, offset, value));
        self
    }

    /// A write to BAR2.
    pub fn w2(&mut self, offset: u32, value: u32) -> &mut Self {
        self.accesses.push(Access::write(Bar::Shell, offset, value));
        self
    }

    /// A read of BAR2 returning `value`.
    pub fn r2(&mut self, offset: u32, value: u32) -> &mut Self {
        self.accesses.push(Access::read(Bar::Shell, offset, value));
        self
    }

    /// An indirect context command that completes at once: the command write and one read of
    /// IND_CTXT_CMD (hardware.md §5.1 step 3). `data` = `Some(words)` for a WRITE, preceded by the
    /// 16 interleaved DATA/MASK writes.
    pub fn ctxt(&mut self, cmd: u32, data: Option<&[u32]>) -> &mut Self {
        if let Some(words) = data {
            for i in 0..8u32 {
                let w = words.get(i as usize).copied().unwrap_or(0);
                self.w0(0x804 + 4 * i, w);
                self.w0(0x824 + 4 * i, 0xFFFF_FFFF);
            }
        }
        self.w0(0x844, cmd);
        self.r0(0x844, cmd & !1)
    }
}

/// Compares two access lists and describes the first difference with context.
///
/// # Panics
///
/// When the lists differ.
pub fn assert_trace_eq(actual: &[Access], expected: &[Access]) {
    let n = actual.len().min(expected.len());
    for i in 0..n {
        if actual[i] != expected[i] {
            let lo = i.saturating_sub(3);
            let show = |l: &[Access]| {
                l[lo..(i + 4).min(l.len())]
                    .iter()
                    .map(|a| format!("  {a}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!(
                "traces differ at access {i}:\nactual:\n{}\nexpected:\n{}",
                show(actual),
                show(expected)
            );
        }
    }
    assert_eq!(
        actual.len(),
        expected.len(),
        "trace lengths differ; first extra access: {:?}",
        if actual.len() > n {
            actual.get(n)
        } else {
            expected.get(n)
        }
    );
}

/// Count of accesses of one kind.
#[must_use]
pub fn count(log: &[Access], kind: AccessKind, bar: Bar) -> usize {
    log.iter().filter(|a| a.kind == kind && a.bar == bar).count()
}
