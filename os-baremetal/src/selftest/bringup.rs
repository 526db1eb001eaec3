//! Device bring-up of both PFs with `onic-core` against the model, link and statistics.

use onic_core::stats::{link_up, read_hw_counters};
use onic_core::Device;

use super::{device_config, platform::wait_ticks, Bench, Runner, PFS};
use crate::irq;
use crate::time::TscDelay;

pub fn run(r: &mut Runner, b: &mut Bench<'_, '_>) {
    r.group("bring-up (onic-core Device::init on the model)");
    let model = b.model;
    for ((slot, rss_slot), &func) in b.devices.iter_mut().zip(&mut b.rss).zip(PFS.iter()) {
        let name = if func == 0 { "init-pf0" } else { "init-pf1" };
        let Some(cfg) = device_config(func) else {
            r.check(name, false, format_args!("no valid configuration for PF{func}"));
            continue;
        };
        match Device::init(model.qdma(func), model.shell(), &mut TscDelay, cfg) {
            Ok((dev, rss)) => {
                let cmacs = dev.cmacs();
                r.check(
                    name,
                    cmacs == 2,
                    format_args!(
                        "PF{func}: {} queue pairs, {cmacs} CMAC(s) found (2 expected), port {}",
                        cfg.queues,
                        cfg.func.port()
                    ),
                );
                *slot = Some(dev);
                *rss_slot = Some(rss);
            }
            Err(e) => {
                r.check(name, false, format_args!("PF{func}: Device::init failed: {e}"));
            }
        }
    }

    let shell = model.shell();
    let up = [link_up(&shell, 0), link_up(&shell, 1)];
    r.check(
        "link-up",
        up == [true, true],
        format_args!(
            "STAT_RX_STATUS: port 0 {}, port 1 {}",
            updown(up[0]),
            updown(up[1])
        ),
    );

    // A flap: down reads down; once up again, the latched-low first read is discarded.
    model.with(|c| c.set_link(1, false));
    let down = link_up(&shell, 1);
    model.with(|c| c.set_link(1, true));
    let again = link_up(&shell, 1);
    r.check(
        "link-flap",
        !down && again,
        format_args!(
            "port 1 taken down reads {}, back up reads {}",
            updown(down),
            updown(again)
        ),
    );

    let zero = (0..2u8).all(|p| read_hw_counters(&shell, p).iter().all(|&c| c == 0));
    r.check(
        "hw-stats-read",
        zero,
        format_args!("TICK + 64 counters per port read through onic-core, all zero before traffic"),
    );

    irq::latch_statistics(true);
    let before = irq::STATS_LATCHES.load(core::sync::atomic::Ordering::Relaxed);
    let waited = wait_ticks(2 * irq::STATS_LATCH_TICKS, 10_000_000_000);
    let latches = irq::STATS_LATCHES.load(core::sync::atomic::Ordering::Relaxed) - before;
    r.check(
        "tick-stats-latch",
        waited && latches >= 1,
        format_args!(
            "the timer handler latched both ports' counters {latches} time(s) in {} ticks",
            2 * irq::STATS_LATCH_TICKS
        ),
    );

    let violations = model.with(|c| c.violations().len());
    r.check(
        "bring-up-clean",
        violations == 0,
        format_args!("the model recorded {violations} violation(s) during bring-up"),
    );
}

fn updown(up: bool) -> &'static str {
    if up {
        "up"
    } else {
        "down"
    }
}
