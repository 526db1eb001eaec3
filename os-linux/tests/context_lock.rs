//! The card's context-command lock: the two functions of one model card program queue contexts
//! from two threads at once, each through its own BAR0 (the model checks that every context
//! WRITE runs with its own function's data words). With the shared lock the core takes around
//! each command, no command interleaves; without it, they do. One function's device shared by
//! two threads programs its queues the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use onic_core::{Device, DeviceConfig, QueueControl, RingSizeIdx, TxQueueConfig};
use onic_hal::{DmaAddr, SharedLock, Unshared};
use onic_linux::simcard::{sim_config, SharedSpinLock, SimBar, SimCard, SimDelay, SimRegs, SpinLock};
use onic_sim::Violation;

type Card = Arc<SimCard<SpinLock>>;

/// Function `func` brings itself up, waits at `start` for the other function, then programs and
/// tears down TX queue contexts until `stop` is set or `rounds` are done.
fn program<L: SharedLock>(card: &Card, func: u8, lock: L, rounds: u32, start: &Barrier, stop: &AtomicBool) {
    let mut delay = SimDelay::new(card);
    let cfg = DeviceConfig::new(func, 4).unwrap();
    let (dev, _) = Device::init_shared(
        SimRegs::new(card, SimBar::Qdma(func)),
        SimRegs::new(card, SimBar::Shell),
        lock,
        &mut delay,
        cfg,
    )
    .expect("function comes up");
    // Both functions enter the loop together: on a loaded machine one thread could otherwise
    // finish every round before the other is scheduled at all.
    start.wait();
    let ring = DmaAddr::new(0x1000_0000 + u64::from(func) * 0x10_0000);
    for i in 0..rounds {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let q = TxQueueConfig {
            ring: RingSizeIdx::new(1).unwrap(),
            ..TxQueueConfig::new(onic_core::QueueId::new((i % 4) as u16))
        };
        dev.init_tx_queue(&mut delay, &q, ring).unwrap();
        dev.teardown_tx_queue(&mut delay, q.qid).unwrap();
    }
    let _ = dev.teardown(&mut delay);
}

fn interleaved(v: &[Violation]) -> usize {
    v.iter()
        .filter(|v| matches!(v, Violation::Register { reason, .. } if reason.contains("interleaved")))
        .count()
}

/// Both functions at once, each with its own handle of `lock`, for `rounds` each or until
/// `budget` has passed; returns the interleaved commands the model saw. Stops early once one was
/// seen.
fn race<L: SharedLock + Clone + Send + 'static>(lock: L, rounds: u32, budget: Duration) -> usize {
    let card: Card = SimCard::new(SpinLock::default(), {
        let mut c = sim_config();
        // The test's ring addresses are not allocated: only the contexts are checked.
        c.dma.rings_below_4g = false;
        c
    });
    let stop = Arc::new(AtomicBool::new(false));
    let together = Arc::new(Barrier::new(2));
    let start = Instant::now();
    let workers: Vec<_> = (0..2u8)
        .map(|func| {
            let (card, lock, stop) = (Arc::clone(&card), lock.clone(), Arc::clone(&stop));
            let together = Arc::clone(&together);
            thread::spawn(move || program(&card, func, lock, rounds, &together, &stop))
        })
        .collect();
    let mut seen = 0;
    while start.elapsed() < budget && workers.iter().any(|w| !w.is_finished()) {
        seen = card.with(|c| interleaved(&c.violations()));
        if seen > 0 && !stop.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
        }
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    card.with(|c| interleaved(&c.violations())).max(seen)
}

#[test]
#[cfg_attr(miri, ignore = "a wall-clock race of 20000 commands")]
fn two_functions_program_contexts_concurrently_without_interleaving() {
    assert_eq!(
        race(SharedSpinLock::default(), 20_000, Duration::from_secs(60)),
        0
    );
}

#[test]
#[cfg_attr(miri, ignore = "a wall-clock race of 20000 commands")]
fn without_the_lock_the_commands_of_two_functions_interleave() {
    // The control: the same race with no lock shows what the lock prevents (on a machine with
    // one core, preemption inside a command sequence is what interleaves them, so the functions
    // go on until one is seen or the time is up).
    assert!(race(Unshared::NEW, u32::MAX, Duration::from_secs(60)) > 0);
}

#[test]
#[cfg_attr(miri, ignore = "a wall-clock race of 4000 commands")]
fn one_device_shared_by_two_threads_programs_contexts_without_interleaving() {
    // `Device` has no `Cell` in it: over windows and a lock that are `Sync`, two threads share
    // one by reference (no wrapper, no `unsafe`), each programming its own queues of PF0.
    let card: Card = SimCard::new(SpinLock::default(), {
        let mut c = sim_config();
        c.dma.rings_below_4g = false;
        c
    });
    let mut delay = SimDelay::new(&card);
    let (dev, _) = Device::init_shared(
        SimRegs::new(&card, SimBar::Qdma(0)),
        SimRegs::new(&card, SimBar::Shell),
        SharedSpinLock::default(),
        &mut delay,
        DeviceConfig::new(0, 4).unwrap(),
    )
    .expect("function comes up");
    thread::scope(|s| {
        for half in 0..2u16 {
            let (dev, card) = (&dev, &card);
            s.spawn(move || {
                let mut delay = SimDelay::new(card);
                for i in 0..1000u16 {
                    let q = TxQueueConfig {
                        ring: RingSizeIdx::new(1).unwrap(),
                        ..TxQueueConfig::new(onic_core::QueueId::new(2 * half + i % 2))
                    };
                    let ring = DmaAddr::new(0x1000_0000 + u64::from(q.qid.get()) * 0x10_0000);
                    dev.init_tx_queue(&mut delay, &q, ring).unwrap();
                    dev.teardown_tx_queue(&mut delay, q.qid).unwrap();
                }
            });
        }
    });
    let (r, _, _) = dev.teardown(&mut delay);
    r.unwrap();
    assert_eq!(card.with(|c| interleaved(&c.violations())), 0);
}
