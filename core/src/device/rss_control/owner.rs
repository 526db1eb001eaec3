//! [`Rss`]: the one value that holds a function's RSS state as its shell holds it, and the only way
//! to change that state.

use onic_hal::grace::GracePeriod;
use onic_hal::{FunctionId, RegisterWindow};

use super::{HashFunction, RssConfig, RssParts};
use crate::device::settings::{check_channels, Channels, ChannelsRequest, EthtoolError};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::rss::{PublishedHasher, RssError};

/// The RSS state of one brought-up PCI function (indirection table, key, RX queues in use): what
/// the shell's registers hold, and the control half of the function beside the shared
/// [`Device`].
///
/// [`Device::init`] and [`Device::init_shared`] hand out exactly one, together with the device;
/// nothing else makes one, and it cannot be cloned, so it is the only state that claims to be
/// what the shell holds. (An [`RssConfig`] alone is a value to try requests on; it claims
/// nothing.)
///
/// Its changing methods take `&mut self`: whoever owns it (the OS's control path: ethtool under
/// RTNL in the Linux module) is the one context that changes RSS, and the compiler checks it. They
/// also take the [`Device`] the state came with, for the shell's registers and the function's
/// queue pairs; a device of another function is refused. Each change is checked on a copy first,
/// then written to the shell, then kept: a refused change writes nothing and changes nothing.
///
/// The core's datapath does not read it: the shell steers each frame by its own registers
/// (hardware.md §9.4). Datapaths that hash frames in software (the packet's hash, XDP's RX-hash
/// metadata) read the function's [`PublishedHasher`], which [`Rss::set`] keeps on the key the
/// shell holds.
///
/// ```
/// use onic_core::config::DeviceConfig;
/// use onic_core::device::rss_control::HashFunction;
/// use onic_core::device::settings::ChannelsRequest;
/// use onic_core::rss::{PublishedHasher, RssKey};
/// use onic_core::Device;
/// use onic_hal::grace::TakingTurns;
/// use onic_sim::{Card, CardConfig};
///
/// let card = Card::new(CardConfig::default());
/// let cfg = DeviceConfig::new(0, 4)?;
/// let (dev, mut rss) = Device::init(card.qdma(0), card.shell(), &mut card.delay(), cfg)?;
/// // ethtool -X eth0 equal 2, then ethtool -L eth0 combined 2.
/// rss.equal(&dev, 2)?;
/// rss.set_channels(&dev, ChannelsRequest { combined: 2, ..Default::default() })?;
/// assert_eq!(rss.channels(&dev).combined, 2);
/// // A refused request leaves the shell and the state as they were.
/// let mut soft = Box::new(PublishedHasher::new(rss.config().key()));
/// assert!(rss.set(&dev, &soft, &TakingTurns, Some(&[3; 128]), None, HashFunction::NoChange).is_err());
/// assert_eq!(dev.rss_read_back().0, *rss.config().table());
/// // ethtool -X eth0 hkey ...: the shell and the datapaths' hasher get the new key.
/// rss.set(&dev, &soft, &TakingTurns, None, Some(RssKey::MICROSOFT.as_bytes()), HashFunction::NoChange)?;
/// assert_eq!(dev.rss_read_back().1, RssKey::MICROSOFT);
/// assert_eq!(soft.current_key(), RssKey::MICROSOFT);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Rss {
    func: FunctionId,
    state: RssConfig,
}

impl Rss {
    /// The owner of `state`, which has just been written to function `func`'s shell registers
    /// (bring-up's default table).
    pub(crate) const fn programmed(func: FunctionId, state: RssConfig) -> Self {
        Self { func, state }
    }

    /// The function whose RSS state this is.
    #[must_use]
    pub const fn function(&self) -> FunctionId {
        self.func
    }

    /// The state as last programmed: table, key and RX queue count.
    #[must_use]
    pub const fn config(&self) -> &RssConfig {
        &self.state
    }

    /// `ethtool -l`: the queue pairs the function owns (from `dev`) and the pairs in use.
    #[must_use]
    pub fn channels<Q, S, L>(&self, dev: &Device<Q, S, L>) -> Channels {
        Channels {
            max_combined: dev.config().queues,
            combined: self.state.rx_queues(),
        }
    }

    /// `ethtool -X`: checks every part first, then writes what was given (table entries, then key
    /// words, hardware.md §9.2). A new key is also published to the datapaths: `hasher` (the
    /// function's [`PublishedHasher`], which starts out for [`Rss::config`]'s key) is rebuilt
    /// for it and `grace` waited out before this returns, so from then on every frame a datapath
    /// hashes is hashed with the key the shell holds. Returns the parts written.
    ///
    /// # Errors
    ///
    /// [`Error::Rss`] for a bad table, key or hash function, or a `dev` of another function
    /// (nothing is written and the state is unchanged); [`RssError::HasherBusy`] when another
    /// writer was rebuilding `hasher` (the shell holds the new key, the state says so, and the
    /// datapaths still hash with the old one until a later `set` of the key succeeds).
    pub fn set<Q, S: RegisterWindow, L, G: GracePeriod + ?Sized>(
        &mut self,
        dev: &Device<Q, S, L>,
        hasher: &PublishedHasher,
        grace: &G,
        indir: Option<&[u16]>,
        key: Option<&[u8]>,
        hfunc: HashFunction,
    ) -> Result<RssParts> {
        let parts = self.apply(dev, |next| next.set(indir, key, hfunc))?;
        if key.is_some() {
            hasher
                .rekey(grace, self.state.key())
                .map_err(|_| Error::Rss(RssError::HasherBusy))?;
        }
        Ok(parts)
    }

    /// `ethtool -X equal n`.
    ///
    /// # Errors
    ///
    /// As [`Rss::set`].
    pub fn equal<Q, S: RegisterWindow, L>(&mut self, dev: &Device<Q, S, L>, n: u16) -> Result<RssParts> {
        self.apply(dev, |next| next.equal(n))
    }

    /// `ethtool -X weight w0 w1 ...`.
    ///
    /// # Errors
    ///
    /// As [`Rss::set`].
    pub fn weights<Q, S: RegisterWindow, L>(
        &mut self,
        dev: &Device<Q, S, L>,
        weights: &[u32],
    ) -> Result<RssParts> {
        self.apply(dev, |next| next.weights(weights))
    }

    /// `ethtool -X default`: back to the default table (entry `k` = `k % queues in use`), which
    /// follows later channel changes again.
    ///
    /// # Errors
    ///
    /// As [`Rss::set`] (only a `dev` of another function is refused).
    pub fn reset<Q, S: RegisterWindow, L>(&mut self, dev: &Device<Q, S, L>) -> Result<RssParts> {
        self.apply(dev, |next| Ok(next.reset_table()))
    }

    /// `ethtool -L combined n`: checks the request against the function's queue pairs and the
    /// table (a table the user set must not name a queue that would go away), then spreads a
    /// default table over the `n` pairs. The OS starts or stops queue pairs to match. Returns the
    /// parts written.
    ///
    /// # Errors
    ///
    /// [`EthtoolError::ChannelsNotCombined`], [`EthtoolError::Channels`],
    /// [`EthtoolError::Rss`]; nothing is written and the state is unchanged.
    pub fn set_channels<Q, S: RegisterWindow, L>(
        &mut self,
        dev: &Device<Q, S, L>,
        req: ChannelsRequest,
    ) -> Result<RssParts, EthtoolError> {
        let next = self.channels_change(dev, req)?;
        Ok(self.keep(dev, next))
    }

    /// Checks an `ethtool -L` request as [`Rss::set_channels`] would, without applying it: an OS
    /// that must stop the interface to apply a layout asks first, so that a refused request
    /// never takes the interface down.
    ///
    /// # Errors
    ///
    /// As [`Rss::set_channels`].
    pub fn check_set_channels<Q, S, L>(
        &self,
        dev: &Device<Q, S, L>,
        req: ChannelsRequest,
    ) -> Result<(), EthtoolError> {
        self.channels_change(dev, req).map(|_| ())
    }

    /// The state `req` would leave (the one check of [`Rss::set_channels`] and
    /// [`Rss::check_set_channels`]).
    fn channels_change<Q, S, L>(
        &self,
        dev: &Device<Q, S, L>,
        req: ChannelsRequest,
    ) -> Result<RssConfig, EthtoolError> {
        let mut next = self.copy_for(dev)?;
        let n = check_channels(req, dev.config().queues)?;
        next.set_rx_queues(n)?;
        Ok(next)
    }

    /// Makes a change on a copy of the state; only if it is accepted, programs the copy and keeps
    /// it.
    fn apply<Q, S: RegisterWindow, L>(
        &mut self,
        dev: &Device<Q, S, L>,
        change: impl FnOnce(&mut RssConfig) -> Result<RssParts, RssError>,
    ) -> Result<RssParts> {
        let mut next = self.copy_for(dev).map_err(Error::Rss)?;
        change(&mut next).map_err(Error::Rss)?;
        Ok(self.keep(dev, next))
    }

    /// A copy of the state to try a change on, if `dev` is the function this state belongs to.
    fn copy_for<Q, S, L>(&self, dev: &Device<Q, S, L>) -> Result<RssConfig, RssError> {
        let given = dev.function();
        if given != self.func {
            return Err(RssError::OtherFunction {
                owner: self.func,
                given,
            });
        }
        Ok(self.state)
    }

    /// Writes what `next` has pending to the shell and keeps it as the state.
    fn keep<Q, S: RegisterWindow, L>(&mut self, dev: &Device<Q, S, L>, mut next: RssConfig) -> RssParts {
        let parts = next.program(dev.shell(), self.func);
        next.mark_programmed();
        self.state = next;
        parts
    }
}
