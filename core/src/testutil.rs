//! Shared fixtures of the unit tests: a model card with one function brought up.

use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow};

use crate::config::DeviceConfig;
use crate::device::Device;

/// A card whose PF0 is brought up by the driver with `queues` queues.
pub(crate) fn card() -> Card {
    Card::new(CardConfig::default())
}

/// The device of a model card's function.
pub(crate) type SimDevice<'c> = Device<QdmaWindow<'c>, ShellWindow<'c>>;

/// Brings up PF0 with `queues` queue pairs.
pub(crate) fn device(card: &Card, queues: u16) -> SimDevice<'_> {
    let cfg = DeviceConfig::new(0, queues).unwrap();
    let dev = Device::init(card.qdma(0), card.shell(), &mut card.delay(), cfg).unwrap();
    assert_eq!(card.violations(), []);
    dev
}
