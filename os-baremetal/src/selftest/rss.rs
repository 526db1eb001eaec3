//! RSS through the ports: the state each function's driver holds read back from the shell
//! (`ethtool -x`), changes in the middle of a run (`ethtool -X equal 2`, a new key) that steer
//! the frames sent after them, and refused requests that change nothing. Every frame's queue is
//! checked against `IndirectionTable::queue_for(ShellHasher::hash_frame(frame).value)` of the
//! receiving function's current state.
//!
//! As with the kernel module, `ethtool -X equal N` reaches the port as a table: the one the
//! core's `RssConfig::equal` makes from the driver's state (which refuses an `N` of 0 or above
//! the queue count), written with `Port::rss_set`; a key has the shell's length by type there,
//! so the 39-byte key is offered to the core's `RssConfig::set` the port's call goes through.

use onic_core::device::rss_control::{HashFunction, IndirectionTable, RssConfig, RssParts};
use onic_core::rss::{RssKey, ShellHasher};
use onic_embed::port::RSS_INDIR_SIZE;

use super::datapath::PAIRS;
use super::frames::{self, MAX_BUILD};
use super::portbench::{self, PortBench};
use super::xdp::{Code, Program};
use super::Runner;

/// Frames per traffic round of this group.
const FRAMES: u32 = 64;
/// The key set in the middle of the run: the Microsoft RSS verification key.
const NEW_KEY: RssKey = RssKey::MICROSOFT;

/// The RSS state port `f`'s driver holds.
fn config(b: &mut PortBench<'_, '_>, f: usize) -> Option<RssConfig> {
    b.ports.get_mut(f)?.control(|p, c| p.rss_config(c)).ok()
}

/// Whether port `f`'s shell holds what its driver thinks it holds.
fn shell_matches(b: &mut PortBench<'_, '_>, f: usize) -> bool {
    let Some(cfg) = config(b, f) else {
        return false;
    };
    let mut table = [0u32; RSS_INDIR_SIZE];
    let mut key = [0u8; onic_embed::port::RSS_KEY_SIZE];
    b.ports[f].port().rss_get(Some(&mut table), Some(&mut key));
    table_words(cfg.table()) == table && key == *cfg.key().as_bytes()
}

/// A table as the port takes it.
fn table_words(t: &IndirectionTable) -> [u32; RSS_INDIR_SIZE] {
    let mut words = [0u32; RSS_INDIR_SIZE];
    for (w, &e) in words.iter_mut().zip(t.entries()) {
        *w = u32::from(e);
    }
    words
}

/// `ethtool -X equal n` on port `f`; the parts written, `None` if refused.
fn equal(b: &mut PortBench<'_, '_>, f: usize, n: u16) -> Option<RssParts> {
    let mut cfg = config(b, f)?;
    cfg.equal(n).ok()?;
    let table = table_words(cfg.table());
    b.ports[f].control(|p, c| p.rss_set(c, Some(&table), None)).ok()
}

/// A new key on port `f`; the parts written, `None` if refused.
fn set_key(b: &mut PortBench<'_, '_>, f: usize, key: &RssKey) -> Option<RssParts> {
    b.ports
        .get_mut(f)?
        .control(|p, c| p.rss_set(c, None, Some(key.as_bytes())))
        .ok()
}

/// Follows port `f`'s RSS state as its driver holds it.
fn refresh(b: &mut PortBench<'_, '_>, f: usize) {
    if let Some(cfg) = config(b, f) {
        b.shared.borrow_mut().steer[f].refresh(&cfg);
    }
}

/// Sends a round of small frames (so that they fit every queue's buffer) from port 0 to port 1;
/// returns (settled, frames per port-1 queue, misrouted, corrupt).
fn round(b: &mut PortBench<'_, '_>, seed: u32) -> (bool, [u32; PAIRS], u32, u32) {
    b.shared.borrow_mut().tally.reset();
    let ok = portbench::spread(b, 0, FRAMES, 0, |i| (seed + i * 3, 60 + (i as usize * 37) % 400));
    let s = b.shared.borrow();
    let t = &s.tally;
    (ok && t.received == FRAMES, t.per_queue[1], t.misrouted, t.corrupt)
}

/// Runs the group on the ports of `b` (`None`: they did not come up).
pub fn run(r: &mut Runner, b: Option<&mut PortBench<'_, '_>>) {
    r.group("RSS (ethtool -x/-X through the port and the core's RssConfig, software shell hash)");
    let Some(b) = b else {
        r.skipped("rss", "the ports did not come up");
        return;
    };
    let drop = b.attach(Code::Native(Program::Drop));
    b.progs = [Some(drop), Some(drop)];
    initial_state(r, b);
    equal_2(r, b);
    new_key(r, b);
    refused(r, b);
    restore(r, b);
}

/// Both ports start with the round-robin table and the RTL reset key, and the shell holds them.
fn initial_state(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let initial = (0..2).all(|f| {
        shell_matches(b, f)
            && config(b, f).is_some_and(|cfg| {
                *cfg.table() == IndirectionTable::round_robin(PAIRS as u16) && *cfg.key() == RssKey::DEFAULT
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

/// ethtool -X equal 2 on port 1: later frames use queues 0 and 1 only.
fn equal_2(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let changed = equal(b, 1, 2);
    refresh(b, 1);
    let (ok, per_queue, misrouted, corrupt) = round(b, 100);
    let back = shell_matches(b, 1);
    r.check(
        "rss-equal-2",
        matches!(changed, Some(p) if p.table && !p.key)
            && back
            && ok
            && misrouted == 0
            && corrupt == 0
            && per_queue[0] > 0
            && per_queue[1] > 0
            && per_queue[2..].iter().all(|&n| n == 0),
        format_args!(
            "equal(2) on PF1's RSS state wrote the table only; the next {FRAMES} frames went to queues \
             {per_queue:?} ({misrouted} off the prediction)"
        ),
    );
}

/// A new key on port 1: the hash changes with it.
fn new_key(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let old = ShellHasher::new(&RssKey::DEFAULT);
    let changed = set_key(b, 1, &NEW_KEY);
    refresh(b, 1);
    let moved = {
        let s = b.shared.borrow();
        flows_moved(&old, &s.steer[1].hasher, &s.steer[1].table)
    };
    let (ok, per_queue, misrouted, corrupt) = round(b, 200);
    let back = shell_matches(b, 1) && config(b, 1).is_some_and(|cfg| *cfg.key() == NEW_KEY);
    let published = b.ports[1].published_key() == NEW_KEY;
    r.check(
        "rss-new-key",
        matches!(changed, Some(p) if p.key && !p.table)
            && back
            && published
            && ok
            && misrouted == 0
            && corrupt == 0
            && moved > 0,
        format_args!(
            "set(key) on PF1's RSS state wrote the key only and published it to PF1's polls ({published}); {moved} of 64 flows change queue under it; the next \
             {FRAMES} frames went to queues {per_queue:?} ({misrouted} off the prediction)"
        ),
    );
}

/// Refused requests change nothing, in the driver or in the shell.
fn refused(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let before = config(b, 1);
    let short_key = [0x11u8; 39];
    let bad_table = [PAIRS as u32; RSS_INDIR_SIZE];
    let refused = [
        equal(b, 1, 0).is_none(),
        equal(b, 1, PAIRS as u16 + 1).is_none(),
        before.is_some_and(|mut cfg| cfg.set(None, Some(&short_key), HashFunction::NoChange).is_err()),
        b.ports[1]
            .control(|p, c| p.rss_set(c, Some(&bad_table), None))
            .is_err(),
    ];
    let after = config(b, 1);
    let back = shell_matches(b, 1);
    let (ok, per_queue, misrouted, _) = round(b, 300);
    r.check(
        "rss-refused",
        refused.iter().all(|&e| e)
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

/// Back to the defaults.
fn restore(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let restored = equal(b, 1, PAIRS as u16).is_some() && set_key(b, 1, &RssKey::DEFAULT).is_some();
    refresh(b, 1);
    let (ok, per_queue, misrouted, _) = round(b, 400);
    r.check(
        "rss-restore",
        restored && shell_matches(b, 1) && ok && misrouted == 0 && per_queue.iter().all(|&n| n > 0),
        format_args!(
            "equal {PAIRS} and the reset key back on PF1: frames on all queues again ({per_queue:?})"
        ),
    );
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
