//! The door the kernel module uses, on bare metal: both functions of a fresh model card brought
//! up as `onic_embed` ports (`SoloPort` over the model host, `onic_embed::model`, reaching the
//! model through the image's guarded windows), frames sent from one port's stack TX rings over
//! the cable to the other, an XDP program on the receiving port sending some back (XDP_TX) and
//! dropping others, the page census after each step, and the teardown with every page home.
//!
//! This group runs the queues the way the module does (four rings per queue index, pages from
//! per-queue pools, a stack the host reads); the groups before it drive the core's queue pairs
//! directly. It polls every queue (NAPI without the interrupt).

use alloc::vec::Vec;

use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::{DeviceConfig, RingSizeIdx};
use onic_embed::model::ModelHost;
use onic_embed::port::{PortConfig, SoloPort, TxClean, TxLock, XmitLock, XmitResult};
use onic_sim::Card;

use super::Runner;
use crate::model::Model;

/// The program of the XDP step.
type Prog = fn(&mut XdpBuff<'_>) -> XdpAction;
/// The model host of this group.
type Host<'m, 'c> = ModelHost<Prog, &'m Model<'c>>;
/// One port.
type Port<'m, 'c> = SoloPort<Host<'m, 'c>>;

/// Queue indices per port.
const QUEUES: u16 = 2;
/// Frames per step.
const FRAMES: u8 = 24;
/// Byte of a frame that carries its number.
const MARK: usize = 99;

/// A 100-byte IPv4/UDP frame numbered `n` (source port and last byte).
fn frame(n: u8) -> [u8; 100] {
    let mut f = [0u8; 100];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    f[34..36].copy_from_slice(&[0x10, n]);
    f[MARK] = n;
    f
}

/// XDP on the receiving port: frames with an even number back out (XDP_TX), the rest dropped.
fn even_back(x: &mut XdpBuff<'_>) -> XdpAction {
    if x.data().get(MARK).is_some_and(|n| n % 2 == 0) {
        XdpAction::Tx
    } else {
        XdpAction::Drop
    }
}

/// Runs the group on a fresh card.
pub fn run(r: &mut Runner) {
    r.group("the port (onic-embed's door, as the kernel module drives it) over the model");
    let card = Card::new(onic_sim::CardConfig::default());
    let model = Model::new(&card);
    let host: Host<'_, '_> = ModelHost::new(&model);
    let Some(mut ports) = bring_up(r, &host) else {
        return;
    };
    traffic(r, &model, &host, &mut ports);
    xdp(r, &model, &host, &mut ports);
    teardown(r, &host, ports);
    drop(model);
    let d = card.dma_stats();
    r.check(
        "port-pages-home",
        d.live_pages == 0 && d.live_regions == 0 && card.violations().is_empty(),
        format_args!(
            "after teardown: {} pages, {} rings live, {} model violations",
            d.live_pages,
            d.live_regions,
            card.violations().len()
        ),
    );
}

/// Both functions as ports, opened.
fn bring_up<'m, 'c>(r: &mut Runner, host: &Host<'m, 'c>) -> Option<[Port<'m, 'c>; 2]> {
    let ring = RingSizeIdx::new(2).ok()?;
    let port = |f: u8| -> Option<Port<'m, 'c>> {
        let cfg = PortConfig {
            func: f,
            max_queues: QUEUES,
            queues: QUEUES,
            tx_ring: ring,
            rx_ring: ring,
            rs_fec: DeviceConfig::new(f, QUEUES).ok()?.rs_fec,
        };
        let h = host.for_port(f);
        let mut p = SoloPort::new(h.regs(f), h.delay(), h, cfg).ok()?;
        p.open().ok()?;
        Some(p)
    };
    let ports = port(0).zip(port(1)).map(|(a, b)| [a, b]);
    r.check(
        "port-open",
        ports.is_some(),
        format_args!("PF0 and PF1 brought up and opened as ports, {QUEUES} queue indices each"),
    );
    ports
}

/// Lets the model work and polls every queue of both ports until nothing moves (the
/// program, if any, on port 1); returns whether it settled.
fn settle(model: &Model<'_>, ports: &mut [Port<'_, '_>; 2], prog: Option<u16>) -> bool {
    for _ in 0..100 {
        model.with(|c| {
            c.run_until_idle();
            c.advance_time(10_000);
            c.run_until_idle();
        });
        let mut busy = false;
        for (f, port) in ports.iter_mut().enumerate() {
            for q in 0..QUEUES {
                let r = port.poll(q, 64, (), prog.filter(|_| f == 1));
                let stack = port.queue::<TxLock, _>(q, |p, t| p.tx_clean(t, 64));
                let xmit = port.queue::<XmitLock, _>(q, |p, t| p.xmit_clean(t));
                busy |= r.done > 0 || r.more || r.tx_pending || stack.in_flight > 0 || xmit.in_flight > 0;
            }
        }
        if !busy {
            return true;
        }
    }
    false
}

/// Sends frames `0..FRAMES` from port 0's stack TX rings; returns how many the rings took.
fn send(host: &Host<'_, '_>, port: &mut Port<'_, '_>) -> u8 {
    let mut sent = 0;
    for n in 0..FRAMES {
        let Some(skb) = host.packet(&frame(n)) else { break };
        let mut done = TxClean::default();
        match port.queue::<TxLock, _>(u16::from(n) % QUEUES, |p, t| p.xmit(t, skb, &mut done)) {
            XmitResult::Ok | XmitResult::OkStop => sent += 1,
            XmitResult::Busy | XmitResult::Dropped => {
                onic_embed::port::Host::skb_done(host, skb, None);
                break;
            }
        }
    }
    for q in 0..QUEUES {
        port.queue::<TxLock, _>(q, |p, t| p.tx_flush(t));
    }
    sent
}

/// The page census of both ports, checked against the host's counts.
fn census(
    host: &Host<'_, '_>,
    ports: &mut [Port<'_, '_>; 2],
) -> Result<usize, onic_embed::model::CensusError> {
    let mut holdings = Vec::new();
    for p in ports.iter_mut() {
        holdings.extend(p.holdings().unwrap_or_default());
    }
    host.check_census(&holdings).map(|c| c.len())
}

/// Plain traffic: every frame reaches port 1's stack, byte for byte.
fn traffic(r: &mut Runner, model: &Model<'_>, host: &Host<'_, '_>, ports: &mut [Port<'_, '_>; 2]) {
    let sent = send(host, &mut ports[0]);
    let settled = settle(model, ports, None);
    let mut good = 0u32;
    let got = host.for_port(1).drain_received(|f| {
        let n = f.data().get(MARK).copied().unwrap_or(u8::MAX);
        good += u32::from(n < FRAMES && f.data() == frame(n).as_slice());
    });
    r.check(
        "port-traffic",
        settled && sent == FRAMES && got == usize::from(FRAMES) && good == u32::from(FRAMES),
        format_args!(
            "{sent} sent from port 0's stack TX rings, {got} reached port 1's stack, {good} byte for byte"
        ),
    );
    let c = census(host, ports);
    r.check(
        "port-census",
        c == Ok(usize::from(2 * QUEUES)),
        format_args!("every page of the {} pools somewhere: {:?}", 2 * QUEUES, c),
    );
}

/// XDP on port 1: even frames back to port 0 (XDP_TX), odd ones dropped.
fn xdp(r: &mut Runner, model: &Model<'_>, host: &Host<'_, '_>, ports: &mut [Port<'_, '_>; 2]) {
    let prog = host.attach(even_back);
    send(host, &mut ports[0]);
    let settled = settle(model, ports, Some(prog));
    let back = host.for_port(0).drain_received(|_| ());
    let at_b = host.for_port(1).drain_received(|_| ());
    let s = ports[1].port().link_stats();
    r.check(
        "port-xdp",
        settled && back == usize::from(FRAMES / 2) && at_b == 0,
        format_args!(
            "{back} even frames came back to port 0 by XDP_TX, {at_b} reached port 1's stack; port 1 received {} in all",
            s.rx_packets
        ),
    );
    let c = census(host, ports);
    r.check(
        "port-census-xdp",
        c == Ok(usize::from(2 * QUEUES)),
        format_args!("after XDP_TX and drops: {:?}", c),
    );
}

/// Stops and removes both ports.
fn teardown(r: &mut Runner, host: &Host<'_, '_>, ports: [Port<'_, '_>; 2]) {
    let mut stopped = true;
    for mut p in ports {
        stopped &= p.stop().is_ok();
        p.remove();
    }
    host.free_spare();
    let c = host.census();
    r.check(
        "port-teardown",
        stopped && c == Default::default(),
        format_args!("both ports stopped and removed; the host holds {:?}", c),
    );
}
