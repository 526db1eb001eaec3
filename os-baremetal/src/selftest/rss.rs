//! RSS through the driver: the state each function's `Rss` holds read back from the shell (`ethtool -x`),
//! changes in the middle of a run (`ethtool -X equal 2`, a new key) that steer the frames sent
//! after them, and refused requests that change nothing. Every frame's queue is checked against
//! `IndirectionTable::queue_for(ShellHasher::hash_frame(frame).value)` of the receiving PF's
//! current state.

use onic_core::device::rss_control::{HashFunction, IndirectionTable, Rss};
use onic_core::rss::{PublishedHasher, RssKey, ShellHasher};
use onic_hal::grace::TakingTurns;

use super::datapath::{self, PAIRS};
use super::frames::{self, MAX_BUILD};
use super::xdp::Program;
use super::{Bench, Runner, SimDevice};

/// Frames per traffic round of this group.
const FRAMES: u32 = 64;
/// The key set in the middle of the run: the Microsoft RSS verification key.
const NEW_KEY: RssKey = RssKey::MICROSOFT;

/// Whether the shell holds what the driver thinks it holds.
fn read_back_matches(dev: &SimDevice<'_>, rss: &Rss) -> bool {
    let (t, k) = dev.rss_read_back();
    t == *rss.config().table() && k == *rss.config().key()
}

/// Function `f`'s device and its RSS state, to change it.
fn control<'b, 'c>(b: &'b mut Bench<'c, '_>, f: usize) -> Option<Control<'b, 'c>> {
    Some((b.devices[f].as_ref()?, b.rss[f].as_mut()?, b.dp.hashers.get(f)?))
}

/// What changing a function's RSS takes: its device, its `Rss` and the hasher its polls read.
type Control<'b, 'c> = (&'b SimDevice<'c>, &'b mut Rss, &'b PublishedHasher);

/// Whether function `f`'s shell holds what its RSS state says.
fn shell_matches(b: &Bench<'_, '_>, f: usize) -> bool {
    match (&b.devices[f], &b.rss[f]) {
        (Some(dev), Some(rss)) => read_back_matches(dev, rss),
        _ => false,
    }
}

/// Sends a round of small frames (so that they fit every queue's buffer) from PF0 to PF1; returns
/// (settled, frames per PF1 queue, misrouted, corrupt).
fn round(b: &mut Bench<'_, '_>, seed: u32) -> (bool, [u32; PAIRS], u32, u32) {
    b.dp.tally.reset();
    let ok = datapath::spread(b, 0, FRAMES, |i| (seed + i * 3, 60 + (i as usize * 37) % 400));
    let t = &b.dp.tally;
    (ok && t.received == FRAMES, t.per_queue[1], t.misrouted, t.corrupt)
}

pub fn run(r: &mut Runner, b: &mut Bench<'_, '_>) {
    r.group("RSS (ethtool -x/-X through Device and Rss, software shell hash)");
    if !datapath::ready(r, b, "rss") {
        return;
    }
    b.dp.set_programs([Program::Drop, Program::Drop]);
    initial_state(r, b);
    equal_2(r, b);
    new_key(r, b);
    refused(r, b);
    restore(r, b);
}

/// Both PFs start with the round-robin table and the RTL reset key, and the shell holds them.
fn initial_state(r: &mut Runner, b: &Bench<'_, '_>) {
    let initial = (0..2).all(|f| {
        b.rss[f].as_ref().is_some_and(|rss| {
            shell_matches(b, f)
                && *rss.config().table() == IndirectionTable::round_robin(PAIRS as u16)
                && *rss.config().key() == RssKey::DEFAULT
        })
    });
    r.check(
        "rss-read-back",
        initial,
        format_args!(
            "both PFs: the shell holds the table (entry k = k mod {PAIRS}) and the RTL reset key the driver \
             reports"
        ),
    );
}

/// ethtool -X equal 2 on PF1: later frames use queues 0 and 1 only.
fn equal_2(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let changed = control(b, 1).map(|(d, rss, _)| rss.equal(d, 2));
    refresh(b, 1);
    let (ok, per_queue, misrouted, corrupt) = round(b, 100);
    let back = shell_matches(b, 1);
    r.check(
        "rss-equal-2",
        matches!(changed, Some(Ok(p)) if p.table && !p.key)
            && back
            && ok
            && misrouted == 0
            && corrupt == 0
            && per_queue[0] > 0
            && per_queue[1] > 0
            && per_queue[2..].iter().all(|&n| n == 0),
        format_args!(
            "equal(2) on PF1's Rss wrote the table only; the next {FRAMES} frames went to queues {per_queue:?} \
             ({misrouted} off the prediction)"
        ),
    );
}

/// A new key on PF1: the hash changes with it.
fn new_key(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let old = ShellHasher::new(&RssKey::DEFAULT);
    let changed = control(b, 1).map(|(d, rss, h)| {
        rss.set(
            d,
            h,
            &TakingTurns,
            None,
            Some(NEW_KEY.as_bytes()),
            HashFunction::NoChange,
        )
    });
    refresh(b, 1);
    let moved = flows_moved(&old, &b.dp.steer[1].hasher, &b.dp.steer[1].table);
    let (ok, per_queue, misrouted, corrupt) = round(b, 200);
    let back = shell_matches(b, 1)
        && b.rss[1]
            .as_ref()
            .is_some_and(|rss| *rss.config().key() == NEW_KEY);
    let published = b.dp.hashers[1].current_key() == NEW_KEY;
    r.check(
        "rss-new-key",
        matches!(changed, Some(Ok(p)) if p.key && !p.table)
            && back
            && published
            && ok
            && misrouted == 0
            && corrupt == 0
            && moved > 0,
        format_args!(
            "set(key) on PF1's Rss wrote the key only and published it to PF1's polls ({published}); {moved} of 64 flows change queue under it; the next \
             {FRAMES} frames went to queues {per_queue:?} ({misrouted} off the prediction)"
        ),
    );
}

/// Refused requests change nothing, in the driver or in the shell.
fn refused(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let before = b.rss[1].as_ref().map(|rss| *rss.config());
    let refused = control(b, 1).map(|(d, rss, h)| {
        let short_key = [0x11u8; 39];
        let bad_table = [PAIRS as u16; 128];
        [
            rss.equal(d, 0).is_err(),
            rss.equal(d, PAIRS as u16 + 1).is_err(),
            rss.set(d, h, &TakingTurns, None, Some(&short_key), HashFunction::NoChange)
                .is_err(),
            rss.set(d, h, &TakingTurns, Some(&bad_table), None, HashFunction::NoChange)
                .is_err(),
        ]
    });
    let after = b.rss[1].as_ref().map(|rss| *rss.config());
    let back = shell_matches(b, 1);
    let (ok, per_queue, misrouted, _) = round(b, 300);
    r.check(
        "rss-refused",
        refused.is_some_and(|r| r.iter().all(|&e| e))
            && before.is_some()
            && before == after
            && back
            && ok
            && misrouted == 0
            && per_queue[2..].iter().all(|&n| n == 0),
        format_args!(
            "equal 0, equal {}, a 39-byte key and a table naming queue {PAIRS} refused; table, key and \
             shell unchanged, frames still follow them ({per_queue:?})",
            PAIRS + 1
        ),
    );
}

/// Back to the defaults for the groups that follow.
fn restore(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let restored = control(b, 1).map(|(d, rss, h)| {
        rss.equal(d, PAIRS as u16).is_ok()
            && rss
                .set(
                    d,
                    h,
                    &TakingTurns,
                    None,
                    Some(RssKey::DEFAULT.as_bytes()),
                    HashFunction::Toeplitz,
                )
                .is_ok()
    });
    refresh(b, 1);
    let (ok, per_queue, misrouted, _) = round(b, 400);
    r.check(
        "rss-restore",
        restored == Some(true)
            && shell_matches(b, 1)
            && ok
            && misrouted == 0
            && per_queue.iter().all(|&n| n > 0),
        format_args!(
            "equal {PAIRS} and the reset key back on PF1: frames on all queues again ({per_queue:?})"
        ),
    );
}

fn refresh(b: &mut Bench<'_, '_>, f: usize) {
    if let Some(rss) = b.rss[f].as_ref() {
        b.dp.steer[f].refresh(rss);
    }
}

/// Of flows 0..64, how many the two hashers send to different queues of `table`.
fn flows_moved(a: &ShellHasher, bh: &ShellHasher, table: &IndirectionTable) -> u32 {
    let mut buf = [0u8; MAX_BUILD];
    (0..64)
        .filter(|&i| {
            let f = frames::build(&frames::flow(i), 60, 0, &mut buf);
            table.queue_for(a.hash_frame(f).value) != table.queue_for(bh.hash_frame(f).value)
        })
        .count() as u32
}
