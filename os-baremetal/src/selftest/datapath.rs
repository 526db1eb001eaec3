//! Driver datapath checks: the place for what arrives with the core's RX/TX rings, page pool, RSS
//! and XDP (issue #6's list), each as one or more named checks:
//!
//! - traffic across the wire with the core's rings: PF0 TX -> cable -> PF1 RX and back, many flows,
//!   sizes 60 to 1518 and frames larger than one RX buffer (multi-buffer);
//! - RSS spread checked against the core's software shell hash, and ethtool-style changes of the
//!   indirection table and key in the middle of a run;
//! - XDP programs that pass, drop, transmit and redirect, with the expected per-verdict counters;
//! - the model's fault knobs against the datapath (page allocation failure on refill, completion
//!   errors, stuck H2C writeback) and the page pool's accounting at the end (every page in the
//!   pool, a ring slot, in flight or handed out).
//!
//! Until then the `traffic` group exercises the model's receive path with a minimal ring reader
//! (`probe`), and this group records nothing.

use super::{Bench, Runner};

pub fn run(_r: &mut Runner, _b: &mut Bench<'_>) {}
