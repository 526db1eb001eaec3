//! Model-based property tests of the datapath: random setups (ring sizes from the QDMA table,
//! queue counts, one or two ports, completion entry sizes, jumbo frames) driven by random
//! operation sequences (bursts of random-size frames, polls with random budgets, OS transmits, OS
//! page returns). After every step the page census must hold; at the end every injected frame must
//! have been delivered exactly once or counted as dropped with a reason, and the driver's
//! statistics must agree with the model's and the CMACs'.
//!
//! `PROPTEST_CASES` sets the number of cases (default 24).

use onic_hal::layout::desc::CmptEntrySize;
use onic_tests::datapath::{drop_all, mixed, pass_all, Harness, Policy, Setup};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// `count` frames of random sizes at `port` on random flows.
    Inject { port: u8, sizes: Vec<usize>, flow: u16 },
    /// Let the model deliver and fire timers.
    Settle,
    /// One poll of one pair.
    Poll { func: usize, q: usize, budget: usize },
    /// One poll of every pair.
    PollAll { budget: usize },
    /// An OS transmit batch.
    Transmit {
        func: usize,
        q: usize,
        sizes: Vec<usize>,
    },
    /// The OS gives pages back.
    ReturnOs(usize),
}

fn op(max_frame: usize) -> impl Strategy<Value = Op> {
    let size = 60..=max_frame;
    // OS transmit buffers are single pages in the model host.
    let tx_size = 60..=max_frame.min(4096);
    prop_oneof![
        4 => (0u8..2, prop::collection::vec(size.clone(), 1..90), any::<u16>())
            .prop_map(|(port, sizes, flow)| Op::Inject { port, sizes, flow }),
        2 => Just(Op::Settle),
        3 => (0usize..2, 0usize..4, 1usize..130).prop_map(|(func, q, budget)| Op::Poll { func, q, budget }),
        2 => (1usize..130).prop_map(|budget| Op::PollAll { budget }),
        1 => (0usize..2, 0usize..4, prop::collection::vec(tx_size, 1..40))
            .prop_map(|(func, q, sizes)| Op::Transmit { func, q, sizes }),
        1 => (0usize..20).prop_map(Op::ReturnOs),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    ring_size_idx: u8,
    queues: u16,
    functions: u8,
    cmpt_entry: CmptEntrySize,
    jumbo: bool,
    bulk: usize,
    policy: u8,
    ops: Vec<Op>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        // Ring sizes 64..1024 from the QDMA table; small ones weighted up for many wraps.
        prop_oneof![3 => 1u8..=3, 2 => 4u8..=6, 1 => 7u8..=8],
        1u16..=4,
        1u8..=2,
        prop_oneof![
            Just(CmptEntrySize::B8),
            Just(CmptEntrySize::B16),
            Just(CmptEntrySize::B32),
            Just(CmptEntrySize::B64)
        ],
        prop::bool::weighted(0.25),
        prop_oneof![Just(1usize), Just(8), Just(64)],
        0u8..3,
    )
        .prop_flat_map(
            |(ring_size_idx, queues, functions, cmpt_entry, jumbo, bulk, policy)| {
                let max = if jumbo { 9000 } else { 1514 };
                prop::collection::vec(op(max), 10..60).prop_map(move |ops| Case {
                    ring_size_idx,
                    queues,
                    functions,
                    cmpt_entry,
                    jumbo,
                    bulk,
                    policy,
                    ops,
                })
            },
        )
}

fn run(c: &Case) {
    let policy: Policy = match c.policy {
        0 => drop_all,
        1 => pass_all,
        _ => mixed,
    };
    let setup = Setup::new()
        .ring_size_idx(c.ring_size_idx)
        .queues(c.queues)
        .functions(c.functions)
        .cmpt_entry(c.cmpt_entry)
        .max_frame_len(if c.jumbo { 9000 } else { 1514 })
        .bulk(c.bulk)
        .policy(policy);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    h.check_pages();
    let funcs = usize::from(c.functions);
    let queues = usize::from(c.queues);
    for op in &c.ops {
        match op {
            Op::Inject { port, sizes, flow } => {
                let port = *port % c.functions;
                for (i, &len) in sizes.iter().enumerate() {
                    h.inject(port, flow.wrapping_add((i as u16).wrapping_mul(7919)), len);
                }
            }
            Op::Settle => h.settle(),
            Op::Poll { func, q, budget } => {
                let out = h.poll(func % funcs, q % queues, *budget);
                assert!(out.rx.done <= *budget);
                assert_eq!(out.rx.error, None);
            }
            Op::PollAll { budget } => {
                for f in 0..funcs {
                    for q in 0..queues {
                        h.poll(f, q, *budget);
                    }
                }
            }
            Op::Transmit { func, q, sizes } => {
                let frames: Vec<_> = sizes.iter().map(|&len| h.frame(0, len)).collect();
                h.transmit(func % funcs, q % queues, &frames);
            }
            Op::ReturnOs(n) => h.return_os_pages(*n),
        }
        h.check_pages();
    }
    h.drain();
    h.check_delivery();
    h.check_stats();
    let multi: u64 = h.queues().iter().map(|v| v.pair.rx.stats().rx_multi_buffer).sum();
    if !c.jumbo {
        assert_eq!(multi, 0);
    }
    h.teardown();
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn datapath_against_the_model(c in case()) {
        run(&c);
    }
}

/// A long deterministic run on the smallest ring: dozens of wraps of every ring and color flip.
#[test]
fn many_wraps_on_the_smallest_rings() {
    let setup = Setup::new().functions(2).queues(2).ring_size_idx(1).policy(mixed);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for round in 0..60u16 {
        for i in 0..50u16 {
            h.inject(
                (i % 2) as u8,
                round.wrapping_mul(131).wrapping_add(i),
                60 + usize::from((i * 37) % 1400),
            );
        }
        h.settle();
        for f in 0..2 {
            for q in 0..2 {
                h.poll(f, q, 1 + usize::from(round % 64));
                h.check_pages();
            }
        }
        h.return_os_pages(25);
        h.check_pages();
    }
    h.drain();
    h.check_delivery();
    h.check_stats();
    // 3000 frames over 4 completion rings of 63 entries: every ring wrapped many times.
    assert!(h.delivered.len() > 2000, "{}", h.delivered.len());
    h.teardown();
}
