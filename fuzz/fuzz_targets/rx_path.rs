//! The RX path, driven through onic-embed's port as every host drives it (the datapath
//! harness), against a device that does anything: frames of any length, completions whose
//! error bit, length or count lie, a frozen color or status record, arbitrary completion
//! entries and status records (completion ring and C2H ring) written by the device at any time,
//! page allocations that fail, polls of any budget, restarts. After every step the page census
//! must hold (every page the pools took is in a pool, a ring, TX flight, with the stack or
//! redirected, and the model agrees); a poll must never report more work or an armed interrupt from an error state;
//! once the device stops sending, polling must come to rest (no `more` forever); at the end a
//! restart and a full teardown must leave no page, mapping or ring, and the model must have seen
//! no device access outside the driver's memory and no completion-ring overflow unless the device
//! invented completions or lengths (then the driver hands descriptors back for frames that never
//! took them, and the device may overrun its own ring: the device's doing).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use onic_hal::layout::desc::CmptEntrySize;
use onic_hal::DmaAddr;
use onic_sim::{Card, Corruption, Violation};
use onic_testkit::device::{DeviceMemory, DeviceRing};
use onic_tests::datapath::{drop_all, mixed, pass_all, Harness, Setup};

/// Polls a queue may keep asking for more once the device is quiet and has no lie left to tell.
const REST_POLLS: usize = 4096;

#[derive(Arbitrary, Debug)]
struct Config {
    jumbo: bool,
    wide_entries: bool,
    two_queues: bool,
    bulk: u8,
    policy: u8,
    stall_polls: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Inject { flow: u16, len: u16 },
    Settle,
    Poll { queue: bool, budget: u8 },
    Corrupt { n: u8, how: u8 },
    Lengths(Vec<u16>),
    FreezeColor(bool),
    FreezeStatus(bool),
    StatusJump,
    Entry { queue: bool, index: u16, word: u64 },
    CmptStatus { queue: bool, word: u64 },
    C2hStatus { queue: bool, word: u64 },
    FailAllocs(u8),
    ReturnOsPages(u8),
    Restart { queue: bool },
}

#[derive(Arbitrary, Debug)]
struct Input {
    config: Config,
    ops: Vec<Op>,
}

fn setup(c: &Config) -> Setup {
    let mut s = Setup::new()
        .ring_size_idx(1)
        .queues(if c.two_queues { 2 } else { 1 })
        .bulk(usize::from(c.bulk % 64) + 1)
        .stall_polls(u16::from(c.stall_polls % 32) + 1)
        .policy(match c.policy % 3 {
            0 => drop_all,
            1 => pass_all,
            _ => mixed,
        });
    if c.jumbo {
        s = s.buf_idx(3).max_frame_len(9000);
    }
    if c.wide_entries {
        s = s.cmpt_entry(CmptEntrySize::B16);
    }
    s
}

/// Usable entries of the setup's rings (ring-size index 1: 64 entries).
const USABLE: u16 = 63;

fn poll(h: &mut Harness<'_>, q: usize, budget: usize) -> bool {
    let out = h.poll(0, q, budget).rx;
    assert!(out.done <= budget, "{out:?}");
    if out.error.is_some() {
        assert!(
            !out.more && !out.armed,
            "an error state asks to be polled: {out:?}"
        );
    }
    out.more
}

/// Whether a step makes the device invent completions or lengths.
fn lies_about_completions(op: &Op) -> bool {
    matches!(
        op,
        Op::Corrupt { .. } | Op::Lengths(_) | Op::Entry { .. } | Op::CmptStatus { .. }
    )
}

/// Takes the violations the model recorded: a completion-ring overflow is allowed after the
/// device invented completions, anything else is the driver's fault.
fn check_violations(card: &Card, lied: bool) {
    for v in card.take_violations() {
        assert!(
            lied && matches!(v, Violation::CmptOverflow { .. }),
            "violation: {v}"
        );
    }
}

fn step(h: &mut Harness<'_>, op: Op) {
    let queues = usize::from(h.setup.queues);
    let q = |b: bool| usize::from(b) % queues;
    let card = h.card;
    let write = |at: DmaAddr, word: u64| {
        card.write_word(at, word)
            .expect("ring memory is the device's to write");
    };
    let cmpt = |h: &mut Harness<'_>, queue: bool| {
        let entry = h.setup.cmpt_entry;
        let base = h.queue(0, q(queue)).pair.rx.cmpt_ring_dma_addr();
        DeviceRing::cmpt(base, entry, USABLE)
    };
    match op {
        Op::Inject { flow, len } => {
            h.inject(0, flow, usize::from(len % 9100));
        }
        Op::Settle => h.settle(),
        Op::Poll { queue, budget } => {
            poll(h, q(queue), usize::from(budget % 80));
        }
        Op::Corrupt { n, how } => {
            let how = [
                Corruption::ErrBit,
                Corruption::LengthZero,
                Corruption::LengthTooLarge,
            ][usize::from(how % 3)];
            card.faults().corrupt_next_completions(u32::from(n % 8), how);
        }
        Op::Lengths(lens) => card.faults().override_completion_lengths(&lens),
        Op::FreezeColor(on) => card.faults().freeze_cmpt_color(on),
        Op::FreezeStatus(on) => card.faults().freeze_cmpt_status(on),
        Op::StatusJump => card.faults().cmpt_status_pidx_jump(),
        Op::Entry { queue, index, word } => write(cmpt(h, queue).entry(index % USABLE), word),
        Op::CmptStatus { queue, word } => write(cmpt(h, queue).status(), word),
        Op::C2hStatus { queue, word } => {
            let base = h.queue(0, q(queue)).pair.rx.desc_ring_dma_addr();
            write(DeviceRing::c2h(base, USABLE).status(), word);
        }
        Op::FailAllocs(n) => card.faults().fail_next_page_allocs(u32::from(n % 16)),
        Op::ReturnOsPages(n) => h.return_os_pages(usize::from(n)),
        Op::Restart { queue } => h.restart(0, q(queue)).expect("restart"),
    }
}

fuzz_target!(|input: Input| {
    let setup = setup(&input.config);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let mut lied = false;
    for op in input.ops.into_iter().take(128) {
        lied |= lies_about_completions(&op);
        step(&mut h, op);
        h.check_census();
        check_violations(&card, lied);
    }
    // The device sends nothing more (lies still on): every queue comes to rest or stops.
    h.settle();
    for q in 0..usize::from(h.setup.queues) {
        let mut polls = 0;
        while poll(&mut h, q, 64) {
            polls += 1;
            assert!(polls < REST_POLLS, "queue {q} asks for more forever");
            h.check_census();
        }
    }
    check_violations(&card, lied);
    // Back to an honest device: restart everything, run traffic, tear down.
    card.faults().clear();
    for q in 0..usize::from(h.setup.queues) {
        h.restart(0, q).expect("restart");
    }
    h.check_pages();
    check_violations(&card, lied);
    for i in 0..8 {
        h.inject(0, i, 64 + 200 * usize::from(i));
    }
    h.drain();
    h.teardown();
});
