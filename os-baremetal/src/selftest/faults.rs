//! The model's fault knobs, seen through the image's HAL backend and the receive path.

use onic_core::stats::read_hw_counters;
use onic_hal::{DmaError, DmaMemory};
use onic_sim::Corruption;

use super::traffic::{counter, flow_for_queue, inject, run_until, Steering, Tally};
use super::{Bench, Runner};

/// How long a fault check waits for its frames.
const WAIT_NS: u64 = 1_000_000_000;

pub fn run(r: &mut Runner, b: &mut Bench<'_>) {
    r.group("fault knobs of the model");
    page_alloc(r, b);
    if b.devices.iter().any(Option::is_none) || b.rx.len() == 0 {
        r.skipped("fault-traffic", "queues or functions missing");
        return;
    }
    let shell = b.model.shell();
    let steer = [Steering::read(&shell, 0), Steering::read(&shell, 1)];
    completion(r, b, &steer, Corruption::ErrBit, "fault-completion-error");
    completion(r, b, &steer, Corruption::LengthZero, "fault-completion-length");

    // Frames lost on the wire never arrive.
    let lost_before = b.model.with(|c| c.stats().wire_dropped);
    b.model.with(|c| c.faults().drop_next_frames(3));
    let mut t = Tally::default();
    let flow = flow_for_queue(&steer[1], 2).map_or(0, |(f, _)| f);
    for _ in 0..5 {
        inject(b, &mut t, &steer, 1, flow, 128);
    }
    run_until(b, &mut t, WAIT_NS, |t| t.received == 2);
    run_until(b, &mut t, 5_000_000, |_| false);
    let lost = b.model.with(|c| c.stats().wire_dropped) - lost_before;
    b.model.with(|c| c.faults().clear());
    r.check(
        "fault-wire-drop",
        t.received == 2 && lost == 3,
        format_args!(
            "drop_next_frames(3) of 5: {} received, {lost} lost on the wire",
            t.received
        ),
    );

    // A bad FCS is counted by the MAC and the frame goes no further.
    let fcs_before = counter(&read_hw_counters(&shell, 0), "stat_rx_bad_fcs");
    b.model.with(|c| c.faults().bad_fcs_next_frames(1));
    let mut t = Tally::default();
    let flow = flow_for_queue(&steer[0], 1).map_or(0, |(f, _)| f);
    inject(b, &mut t, &steer, 0, flow, 300);
    inject(b, &mut t, &steer, 0, flow, 300);
    run_until(b, &mut t, WAIT_NS, |t| t.received == 1);
    run_until(b, &mut t, 5_000_000, |_| false);
    let fcs = counter(&read_hw_counters(&shell, 0), "stat_rx_bad_fcs") - fcs_before;
    b.model.with(|c| c.faults().clear());
    r.check(
        "fault-bad-fcs",
        t.received == 1 && fcs == 1,
        format_args!(
            "bad_fcs_next_frames(1) of 2: {} received, stat_rx_bad_fcs +{fcs}",
            t.received
        ),
    );
}

fn page_alloc(r: &mut Runner, b: &mut Bench<'_>) {
    let dma = b.model.dma();
    let failures_before = b.model.with(|c| c.dma_stats().page_alloc_failures);
    b.model.with(|c| c.faults().fail_next_page_allocs(2));
    let first = dma.alloc_page();
    let second = dma.alloc_page();
    let third = dma.alloc_page();
    let refused = matches!(first, Err(DmaError::OutOfMemory)) && matches!(second, Err(DmaError::OutOfMemory));
    let served = third.is_ok();
    for page in [first, second, third].into_iter().flatten() {
        dma.free_page(page);
    }
    let failures = b.model.with(|c| c.dma_stats().page_alloc_failures) - failures_before;
    b.model.with(|c| c.faults().clear());
    r.check(
        "fault-page-alloc",
        refused && served && failures == 2,
        format_args!("fail_next_page_allocs(2): two allocations refused with OutOfMemory, the third served"),
    );
}

fn completion(r: &mut Runner, b: &mut Bench<'_>, steer: &[Steering; 2], how: Corruption, name: &'static str) {
    let target = 3;
    let Some((flow, _)) = flow_for_queue(&steer[1], target) else {
        r.check(name, false, format_args!("no flow reaches PF1 queue {target}"));
        return;
    };
    let errors_before =
        b.rx.rows()
            .find(|row| row.0 == 1 && row.1 == target)
            .map_or(0, |row| row.4.errors);
    b.model.with(|c| c.faults().corrupt_next_completions(1, how));
    let mut t = Tally::default();
    inject(b, &mut t, steer, 1, flow, 100);
    inject(b, &mut t, steer, 1, flow, 100);
    let done = run_until(b, &mut t, WAIT_NS, |t| t.received == 1 && t.bad_completions == 1);
    b.model.with(|c| c.faults().clear());
    let errors =
        b.rx.rows()
            .find(|row| row.0 == 1 && row.1 == target)
            .map_or(0, |row| row.4.errors)
            - errors_before;
    r.check(
        name,
        done && errors == 1 && t.corrupt == 0,
        format_args!(
            "corrupt_next_completions(1, {how:?}): PF1 queue {target} counted {errors} bad completion, \
             the next frame arrived intact"
        ),
    );
}
