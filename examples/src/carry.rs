//! What the OS does with a program's redirects after a poll, the same in replay and in traffic
//! mode: out of the other port or back out of the ingress port (the port's redirect-in ring,
//! `ndo_xdp_xmit`), a copy to the user sink (an xskmap entry), a pass to the OS on the CPU a
//! cpumap entry names, a copy out of every port of a broadcast. The caller is told what became
//! of each frame that does not leave through a redirect-in ring ([`Event`]), and records it as
//! its mode does (a capture, a counter).

use onic_core::xdp::RawXdpProgram;
use onic_embed::model::CardHost;
use onic_embed::port::{Host as _, SoloPort, TxLock, XmitLock, XmitResult};

use crate::xdp_obj::Target;

/// What became of a redirected frame that did not leave through a redirect-in ring, and the
/// metadata of those that did.
pub enum Event<'d> {
    /// Copied to the user sink (xskmap): the frame and the metadata the program left in front
    /// of it (the kernel copies both into the socket's UMEM, the metadata just before the
    /// frame).
    Xsk {
        /// The frame.
        data: &'d [u8],
        /// Its metadata (empty when none).
        meta: &'d [u8],
    },
    /// Passed to the OS on CPU `cpu` (a cpumap entry): the frame, from RX queue `queue`, and its
    /// metadata (the kernel's cpumap builds the socket buffer with it, as XDP_PASS does).
    Cpu {
        /// The CPU.
        cpu: u32,
        /// The queue index it arrived on.
        queue: u16,
        /// The frame.
        data: &'d [u8],
        /// Its metadata (empty when none).
        meta: &'d [u8],
    },
    /// A broadcast's copy out of port `p` through its stack TX ring: taken by the ring (true)
    /// or lost (false: no packet buffer, or a full ring).
    Copy(usize, bool),
    /// A broadcast's frame left through the redirect-in ring of port `p` (its last port).
    Broadcast(usize),
    /// A broadcast that had no port to go to (an empty devmap, or only the ingress port with
    /// `BPF_F_EXCLUDE_INGRESS`): the frame is gone.
    Nowhere,
    /// A frame (or broadcast copy) sent out of port `port` had metadata in front of it: the
    /// frame as sent and the metadata, which the wire does not carry (only told when there is
    /// some).
    Meta {
        /// The port it leaves through.
        port: usize,
        /// The frame.
        data: &'d [u8],
        /// Its metadata.
        meta: &'d [u8],
    },
}

/// The ports of a run and their hosts (port `p` at index `p`).
pub struct Ports<'p, 'c, P: RawXdpProgram> {
    /// Each port's host.
    pub hosts: &'p [CardHost<'c, P>],
    /// Each port.
    pub ports: Vec<&'p mut SoloPort<CardHost<'c, P>>>,
    /// Queue indices per port.
    pub queues: u16,
}

impl<P: RawXdpProgram> Ports<'_, '_, P> {
    /// Carries out the redirects port `f`'s program made since the last call: the frames that
    /// leave through a redirect-in ring go out in one batch per ring (what a ring does not take
    /// goes back to its pool, as the kernel frees what `ndo_xdp_xmit` refused); everything else
    /// is told to `seen`. Returns whether anything was sent out of a redirect-in ring.
    pub fn carry_out(&mut self, f: usize, seen: &mut dyn FnMut(Event<'_>)) -> bool {
        let host = self.hosts[f].clone();
        // Frames to send, by port and queue index.
        let mut out_of: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); usize::from(self.queues)]; 2];
        for r in host.take_redirects() {
            let q = r.qid % self.queues;
            if let Some(p) = self.redirect(f, (q, r.frame), Target::of(r.target), seen) {
                out_of[p][usize::from(q)].push(r.frame);
            }
        }
        let mut moved = false;
        for (port, queues) in self.ports.iter_mut().zip(&out_of) {
            for (q, frames) in (0..).zip(queues) {
                if frames.is_empty() {
                    continue;
                }
                moved = true;
                let sent = port
                    .queue::<XmitLock, _>(q, |p, t| p.xdp_xmit(t, frames, true))
                    .unwrap_or(0);
                frames.iter().skip(sent).for_each(|&id| host.return_frame(id));
            }
        }
        moved
    }

    /// Carries out one redirect of port `f`'s frame `frame` (from queue `q`): returns the port
    /// it leaves through (the other port, the ingress port for a hairpin, the last port of a
    /// broadcast), or `None` when it is done with here: a copy to the user sink, a cpumap
    /// redirect (the OS receives it on that CPU, as the kernel's cpumap passes it to the stack
    /// there), a broadcast's copies for the other ports (out of their stack TX rings: the model
    /// host cannot clone an XDP frame), a target the driver refused.
    fn redirect(
        &mut self,
        f: usize,
        (q, frame): (u16, u32),
        to: Target,
        seen: &mut dyn FnMut(Event<'_>),
    ) -> Option<usize> {
        let host = self.hosts[f].clone();
        let done = || {
            host.return_frame(frame);
            None
        };
        let meta = host.frame_meta(frame);
        // Frames leaving a port: their metadata is told when there is some.
        let leaving = |port: usize, seen: &mut dyn FnMut(Event<'_>)| {
            if !meta.is_empty() {
                let data = host.frame_data(frame);
                seen(Event::Meta {
                    port,
                    data: &data,
                    meta: &meta,
                });
            }
        };
        match to {
            Target::OtherPort | Target::Hairpin => {
                let p = if to == Target::Hairpin { f } else { 1 - f };
                leaving(p, seen);
                Some(p)
            }
            Target::Xsk => {
                let data = host.frame_data(frame);
                seen(Event::Xsk {
                    data: &data,
                    meta: &meta,
                });
                done()
            }
            Target::Cpu(c) => {
                let data = host.frame_data(frame);
                seen(Event::Cpu {
                    cpu: c,
                    queue: q,
                    data: &data,
                    meta: &meta,
                });
                done()
            }
            Target::Broadcast(mask) => {
                let ports: Vec<usize> = (0..2).filter(|p| mask & (1 << p) != 0).collect();
                let Some((&last, copies)) = ports.split_last() else {
                    seen(Event::Nowhere);
                    return done();
                };
                let data = host.frame_data(frame);
                for &p in copies {
                    let taken = self.send_copy(p, q, &data);
                    seen(Event::Copy(p, taken));
                    if taken {
                        leaving(p, seen);
                    }
                }
                seen(Event::Broadcast(last));
                leaving(last, seen);
                Some(last)
            }
            // Refused at the redirect (the host knows only the targets above).
            Target::Unknown => done(),
        }
    }

    /// Sends `data` out of port `p` through its stack TX ring `q`; whether it was taken.
    fn send_copy(&mut self, p: usize, q: u16, data: &[u8]) -> bool {
        let host = &self.hosts[p];
        let Some(skb) = host.packet(data) else {
            return false;
        };
        let mut done = Default::default();
        let r = self.ports[p].queue::<TxLock, _>(q, |port, t| {
            let r = port.xmit(t, skb, &mut done);
            port.tx_flush(t);
            r
        });
        match r {
            XmitResult::Ok | XmitResult::OkStop => true,
            XmitResult::Busy | XmitResult::Dropped => {
                host.skb_done(skb, None);
                false
            }
        }
    }
}
