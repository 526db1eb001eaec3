//! Execution contexts as types: which context of the OS may touch which driver state, checked by
//! the compiler instead of stated in prose.
//!
//! An OS runs a driver's code in several contexts at once. In the Linux module, for one port: the
//! control path (under RTNL), one NAPI poll per queue, the holder of each netdev TX queue's lock,
//! the holder of each queue's `ndo_xdp_xmit` lock. Each ring belongs to exactly one of them. This
//! module turns that rule into types:
//!
//! - a [`Kind`] names a sort of context (defined by the embedder: "the control path", "NAPI");
//! - a [`Domain`] names one owner of state (one port): contexts of different ports never mix;
//! - a [`Token`] is the proof that the running code *is* context `(domain, kind, index)`; it is
//!   made where the OS hands control to the driver (an `extern "C"` entry point), by an `unsafe`
//!   constructor whose contract is the OS's serialization, and passed down by `&mut`;
//! - an [`Owned`] cell holds state that belongs to one context `(domain, kind, index)` and hands
//!   out `&mut` to its content only against a matching token, for as long as the token is
//!   borrowed;
//! - an [`AllContexts`] is the proof that *no* context of a kind runs in a domain (every NAPI
//!   instance disabled, say): it mints that kind's tokens, one at a time, for the control path
//!   that starts or stops rings.
//!
//! Because a token is unique for its `(domain, kind, index)` while it lives and is borrowed
//! mutably for as long as the `&mut` it opened, no two `&mut` to one cell's content can exist, and
//! a cell is `Sync` whenever its content is `Send`: the state moves between CPUs only as the OS
//! hands the context from one to another.
//!
//! A token is neither `Send` nor `Sync`: it is the running context itself, not something to hand
//! to another thread. Making one costs nothing at run time; opening a cell compares two words.
//!
//! ```
//! use onic_hal::exec::{Domain, Kind, Owned, Token};
//!
//! enum Poll {}
//! impl Kind for Poll {
//!     const NAME: &'static str = "poll";
//! }
//!
//! let port = Domain::new();
//! let ring = Owned::<u32, Poll>::new(0, port, 0);
//! // SAFETY: this thread is poll context 0 of `port`, and the only one.
//! let mut poll = unsafe { Token::<Poll>::new(port, 0) };
//! *ring.open(&mut poll).unwrap() += 1;
//! // SAFETY: as above, for queue 1.
//! let mut other = unsafe { Token::<Poll>::new(port, 1) };
//! assert!(ring.open(&mut other).is_err());
//! ```
//!
//! What the compiler refuses: two `&mut` through one token at a time,
//!
//! ```compile_fail
//! # use onic_hal::exec::{Domain, Kind, Owned, Token};
//! # enum Poll {}
//! # impl Kind for Poll { const NAME: &'static str = "poll"; }
//! let port = Domain::new();
//! let ring = Owned::<u32, Poll>::new(0, port, 0);
//! let mut poll = unsafe { Token::<Poll>::new(port, 0) };
//! let a = ring.open(&mut poll).unwrap();
//! let b = ring.open(&mut poll).unwrap();
//! *a += *b;
//! ```
//!
//! and a token handed to another thread.
//!
//! ```compile_fail
//! # use onic_hal::exec::{Domain, Kind, Token};
//! # enum Poll {}
//! # impl Kind for Poll { const NAME: &'static str = "poll"; }
//! fn send<T: Send>(_: T) {}
//! send(unsafe { Token::<Poll>::new(Domain::new(), 0) });
//! ```

use core::any::TypeId;
use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicUsize, Ordering};

/// A sort of execution context, named by the embedder (for example "the control path under
/// RTNL", "the NAPI poll of a queue"). Contexts of one kind are told apart by an index.
pub trait Kind: 'static {
    /// A name for error messages.
    const NAME: &'static str;
}

/// One owner of context-bound state (one port of the Linux module). Every domain made in a boot
/// is different from every other: a token of one port never opens a cell of another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Domain(usize);

/// The next domain number; 0 is never handed out.
static NEXT_DOMAIN: AtomicUsize = AtomicUsize::new(1);

impl Domain {
    /// A domain different from every other made before. After `usize::MAX` domains (never, on a
    /// 64-bit machine) numbers would repeat.
    #[must_use]
    pub fn new() -> Self {
        // Relaxed: only uniqueness matters, which the atomic increment gives.
        Self(NEXT_DOMAIN.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for Domain {
    fn default() -> Self {
        Self::new()
    }
}

/// The proof that the running code is context `(domain, K, index)`: see the module docs.
pub struct Token<'a, K: Kind> {
    domain: Domain,
    index: u16,
    /// Not `Send`, not `Sync`; bound to `'a`.
    _ctx: PhantomData<(&'a (), *const K)>,
}

impl<K: Kind> Token<'_, K> {
    /// The token of context `(domain, K, index)`.
    ///
    /// # Safety
    ///
    /// For as long as the token lives, the caller is context `(domain, K, index)` and no other
    /// token of it exists: the OS's serialization (a lock held, a NAPI poll running, RTNL held)
    /// guarantees that no other code runs as that context meanwhile, and the caller made no
    /// other token of it that is still alive.
    #[must_use]
    pub const unsafe fn new(domain: Domain, index: u16) -> Self {
        Self {
            domain,
            index,
            _ctx: PhantomData,
        }
    }

    /// The context's index (the queue, for per-queue kinds).
    #[must_use]
    pub const fn index(&self) -> u16 {
        self.index
    }
}

impl<K: Kind> fmt::Debug for Token<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token<{}>({:?}, {})", K::NAME, self.domain, self.index)
    }
}

/// A cell was opened with the token of another context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WrongContext {
    /// The kind's name.
    pub kind: &'static str,
    /// The index the cell belongs to.
    pub owner: u16,
    /// The index of the token offered.
    pub offered: u16,
}

impl fmt::Display for WrongContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "state of {} context {} opened by context {} (or another domain's)",
            self.kind, self.owner, self.offered
        )
    }
}

/// State that belongs to one context `(domain, K, index)`: see the module docs.
pub struct Owned<T, K: Kind> {
    value: UnsafeCell<T>,
    domain: Domain,
    index: u16,
    _kind: PhantomData<fn() -> K>,
}

// SAFETY: `&Owned` gives out `&mut T` only against the unique token of the owning context, whose
// `&mut` borrow outlives the `&mut T` (`Owned::open`); so at most one context reaches the content
// at a time, and it only moves between threads as the OS hands that context over, which needs
// `T: Send` and nothing more.
unsafe impl<T: Send, K: Kind> Sync for Owned<T, K> {}

impl<T, K: Kind> Owned<T, K> {
    /// `value`, owned by context `(domain, K, index)`.
    pub const fn new(value: T, domain: Domain, index: u16) -> Self {
        Self {
            value: UnsafeCell::new(value),
            domain,
            index,
            _kind: PhantomData,
        }
    }

    /// The content, for the owning context.
    ///
    /// # Errors
    ///
    /// [`WrongContext`] when `token` is not the owner's (another index or another domain).
    #[inline]
    pub fn open<'t>(&'t self, token: &'t mut Token<'_, K>) -> Result<&'t mut T, WrongContext> {
        if token.domain != self.domain || token.index != self.index {
            return Err(WrongContext {
                kind: K::NAME,
                owner: self.index,
                offered: token.index,
            });
        }
        // SAFETY: the token is the one live token of the owning context (its constructor's
        // contract), and it stays mutably borrowed for as long as the returned reference: no
        // other `&mut` to the content can be made meanwhile, through this token or any other,
        // and `get_mut`/`into_inner` need the cell itself, which is borrowed too.
        Ok(unsafe { &mut *self.value.get() })
    }

    /// The content, through exclusive access to the cell (no context can reach it meanwhile).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The content, giving the cell up.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T, K: Kind> fmt::Debug for Owned<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owned<{}>({:?}, {})", K::NAME, self.domain, self.index)
    }
}

/// The proof that no context of kind `K` runs in a domain, so that the holder may act as any of
/// them, one at a time: see the module docs.
pub struct AllContexts<'a, K: Kind> {
    domain: Domain,
    _ctx: PhantomData<(&'a (), *const K)>,
}

impl<K: Kind> AllContexts<'_, K> {
    /// The right to act as every context of kind `K` of `domain`.
    ///
    /// # Safety
    ///
    /// For as long as the value lives, no code runs as a context `(domain, K, _)` (the OS stopped
    /// them all: every NAPI instance disabled, every TX queue stopped under its lock, ...), and
    /// no token of one is alive.
    #[must_use]
    pub const unsafe fn new(domain: Domain) -> Self {
        Self {
            domain,
            _ctx: PhantomData,
        }
    }

    /// The token of context `(domain, K, index)`, for as long as `self` is borrowed.
    pub fn token(&mut self, index: u16) -> Token<'_, K> {
        // SAFETY: no context of this kind runs and no token of one is alive (constructor's
        // contract); the mutable borrow of `self` keeps this the only token minted here.
        unsafe { Token::new(self.domain, index) }
    }
}

impl<K: Kind> fmt::Debug for AllContexts<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AllContexts<{}>({:?})", K::NAME, self.domain)
    }
}

/// Every context of one domain, run by a single thread that makes one call at a time (a tool, a
/// test, a bare-metal main loop whose interrupts only mark work): the safe source of that
/// domain's proofs.
///
/// Its domain is fresh and it is the domain's only source of proofs (minting one elsewhere is
/// `unsafe`, and that contract forbids it here). Each proof borrows the `OneThread` mutably, so
/// at most one is alive, except the proofs one call hands out together
/// ([`OneThread::all4`]), which are of four different kinds. It is neither `Send` nor `Sync`.
///
/// ```compile_fail
/// # use onic_hal::exec::{Kind, OneThread, Owned};
/// # enum Poll {}
/// # impl Kind for Poll { const NAME: &'static str = "poll"; }
/// let mut one = OneThread::new();
/// let ring = Owned::<u32, Poll>::new(0, one.domain(), 0);
/// let mut a = one.token::<Poll>(0);
/// let mut b = one.token::<Poll>(0); // a second proof while the first lives
/// *ring.open(&mut a).unwrap() += *ring.open(&mut b).unwrap();
/// ```
pub struct OneThread {
    domain: Domain,
    _one: PhantomData<*const ()>,
}

/// [`OneThread::all4`] was asked for two proofs of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SameKind;

impl fmt::Display for SameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("two proofs of one kind of context asked for at once")
    }
}

/// Four proofs that no context of kinds `A`, `B`, `C`, `D` runs, made together.
pub type AllFour<'a, A, B, C, D> = (
    AllContexts<'a, A>,
    AllContexts<'a, B>,
    AllContexts<'a, C>,
    AllContexts<'a, D>,
);

impl OneThread {
    /// The contexts of a fresh domain.
    #[must_use]
    pub fn new() -> Self {
        Self {
            domain: Domain::new(),
            _one: PhantomData,
        }
    }

    /// The domain whose contexts these are.
    #[must_use]
    pub const fn domain(&self) -> Domain {
        self.domain
    }

    /// The token of context `(domain, K, index)`, for as long as `self` is borrowed.
    pub fn token<K: Kind>(&mut self, index: u16) -> Token<'_, K> {
        // SAFETY: this thread runs every context of the domain, one call at a time, and no other
        // proof of it is alive: the domain is fresh, only `self` makes its proofs, and the
        // mutable borrow keeps this one the only proof alive.
        unsafe { Token::new(self.domain, index) }
    }

    /// The right to act as every context of kind `K`, for as long as `self` is borrowed.
    pub fn all<K: Kind>(&mut self) -> AllContexts<'_, K> {
        // SAFETY: as in `token`: nothing else runs as a context of the domain, and no other
        // proof of it is alive while `self` is borrowed.
        unsafe { AllContexts::new(self.domain) }
    }

    /// The rights to act as every context of four kinds at once (a control call that also
    /// holds the datapath's contexts stopped).
    ///
    /// # Errors
    ///
    /// [`SameKind`] when two of the kinds are one: their proofs could mint one token twice.
    pub fn all4<A: Kind, B: Kind, C: Kind, D: Kind>(&mut self) -> Result<AllFour<'_, A, B, C, D>, SameKind> {
        let ids = [
            TypeId::of::<A>(),
            TypeId::of::<B>(),
            TypeId::of::<C>(),
            TypeId::of::<D>(),
        ];
        let distinct = ids
            .iter()
            .enumerate()
            .all(|(i, a)| ids.iter().skip(i + 1).all(|b| a != b));
        if !distinct {
            return Err(SameKind);
        }
        let d = self.domain;
        // SAFETY: as in `all`, per kind; the kinds differ, so no token can be minted twice.
        Ok(unsafe {
            (
                AllContexts::new(d),
                AllContexts::new(d),
                AllContexts::new(d),
                AllContexts::new(d),
            )
        })
    }
}

impl Default for OneThread {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for OneThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OneThread({:?})", self.domain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Poll;
    impl Kind for Poll {
        const NAME: &'static str = "poll";
    }

    #[test]
    fn a_cell_opens_for_its_own_context_only() {
        let here = Domain::new();
        let there = Domain::new();
        assert_ne!(here, there);
        let cell = Owned::<u32, Poll>::new(5, here, 3);
        // SAFETY: a single-threaded test; each token is the only one of its context.
        let (mut own, mut other_index, mut other_domain) = unsafe {
            (
                Token::<Poll>::new(here, 3),
                Token::<Poll>::new(here, 4),
                Token::<Poll>::new(there, 3),
            )
        };
        *cell.open(&mut own).unwrap() += 1;
        assert_eq!(
            cell.open(&mut other_index).unwrap_err(),
            WrongContext {
                kind: "poll",
                owner: 3,
                offered: 4
            }
        );
        assert!(cell.open(&mut other_domain).is_err());
        assert_eq!(cell.into_inner(), 6);
    }

    #[test]
    fn all_contexts_mints_each_token_in_turn() {
        let d = Domain::new();
        let cells = [Owned::<u32, Poll>::new(0, d, 0), Owned::new(0, d, 1)];
        // SAFETY: no poll context exists in this test.
        let mut all = unsafe { AllContexts::<Poll>::new(d) };
        for (i, c) in (0..).zip(&cells) {
            let mut t = all.token(i);
            *c.open(&mut t).unwrap() = u32::from(i) + 10;
        }
        let [a, b] = cells;
        assert_eq!((a.into_inner(), b.into_inner()), (10, 11));
    }

    struct Other;
    impl Kind for Other {
        const NAME: &'static str = "other";
    }

    #[test]
    fn one_thread_makes_its_proofs_one_borrow_at_a_time() {
        let mut one = OneThread::new();
        let d = one.domain();
        assert_ne!(d, OneThread::new().domain());
        let cell = Owned::<u32, Poll>::new(0, d, 2);
        *cell.open(&mut one.token(2)).unwrap() += 1;
        assert!(cell.open(&mut one.token(3)).is_err());
        *cell.open(&mut one.all().token(2)).unwrap() += 1;
        let (mut a, _b, _c, _d) = one.all4::<Poll, Other, Control4, Xmit4>().unwrap();
        *cell.open(&mut a.token(2)).unwrap() += 1;
        assert_eq!(cell.into_inner(), 3);
        assert_eq!(one.all4::<Poll, Other, Poll, Xmit4>().err(), Some(SameKind));
    }

    struct Control4;
    impl Kind for Control4 {
        const NAME: &'static str = "control";
    }
    struct Xmit4;
    impl Kind for Xmit4 {
        const NAME: &'static str = "xmit";
    }

    #[test]
    fn cells_are_sync_when_their_content_is_send() {
        fn sync<T: Sync>() {}
        sync::<Owned<core::cell::Cell<u8>, Poll>>();
    }
}
