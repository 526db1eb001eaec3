//! Logging facade: one set of macros that maps to `defmt` (feature `defmt`), to `log` (feature
//! `log`) or to nothing. The choice is made here, where the macros are defined, so every crate that
//! logs through `onic_hal::info!` and friends follows the HAL's feature selection. With no backend
//! the arguments are still type-checked (and evaluated by reference) so that nothing becomes unused.
//!
//! Format strings must use the subset both backends understand: `{}`, `{:?}`, `{:x}`, `{:#x}`.
//! Crates that enable the `defmt` feature must also depend on `defmt` themselves (its macros expand
//! to paths in the caller's crate).

#[cfg(all(feature = "defmt", feature = "log"))]
compile_error!("the `defmt` and `log` features of onic-hal are mutually exclusive");

#[cfg(feature = "defmt")]
#[doc(hidden)]
#[macro_export]
macro_rules! __onic_log {
    ($level:ident, $($arg:tt)+) => { $crate::__private::defmt::$level!($($arg)+) };
}

#[cfg(feature = "log")]
#[doc(hidden)]
#[macro_export]
macro_rules! __onic_log {
    ($level:ident, $($arg:tt)+) => { $crate::__private::log::$level!($($arg)+) };
}

#[cfg(not(any(feature = "defmt", feature = "log")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __onic_log {
    ($level:ident, $($arg:tt)+) => {{
        let _ = ::core::format_args!($($arg)+);
    }};
}

/// Logs at trace level through the configured backend.
#[macro_export]
macro_rules! trace { ($($arg:tt)+) => { $crate::__onic_log!(trace, $($arg)+) }; }
/// Logs at debug level through the configured backend.
#[macro_export]
macro_rules! debug { ($($arg:tt)+) => { $crate::__onic_log!(debug, $($arg)+) }; }
/// Logs at info level through the configured backend.
#[macro_export]
macro_rules! info { ($($arg:tt)+) => { $crate::__onic_log!(info, $($arg)+) }; }
/// Logs at warn level through the configured backend.
#[macro_export]
macro_rules! warn { ($($arg:tt)+) => { $crate::__onic_log!(warn, $($arg)+) }; }
/// Logs at error level through the configured backend.
#[macro_export]
macro_rules! error { ($($arg:tt)+) => { $crate::__onic_log!(error, $($arg)+) }; }
