//! How the default classifier learns the enabled drivers: each adapter crate submits its
//! code extractor to a registry that `inventory` collects before `main`, so enabling a
//! driver feature is all the setup there is.
//!
//! The registry is keyed by this crate's own [`Extractor`] type, so two copies of
//! txretry-core in one binary (two semver-incompatible versions) each keep their own list
//! instead of colliding; and every runner also passes its own driver's extractor straight
//! to the classifier, so runners never depend on the registry at all.

use std::error::Error;

use crate::Code;

/// Reads the typed code from one error value, if that value is a type the extractor knows.
/// Extractors look at one link only; the classifier walks the chain.
#[doc(hidden)]
pub type CodeExtractor = fn(&(dyn Error + 'static)) -> Option<Code>;

/// One registered extractor.
#[doc(hidden)]
pub struct Extractor(pub CodeExtractor);

inventory::collect!(Extractor);

/// Registers a [`CodeExtractor`] with the default classifier (for adapter crates).
///
/// ```
/// use std::error::Error;
/// use txretry_core::{Code, SqlState};
///
/// #[derive(Debug)]
/// struct MyDriverError { sqlstate: &'static str }
/// impl std::fmt::Display for MyDriverError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("db error") }
/// }
/// impl Error for MyDriverError {}
///
/// fn extract(error: &(dyn Error + 'static)) -> Option<Code> {
///     let e = error.downcast_ref::<MyDriverError>()?;
///     SqlState::new(e.sqlstate).map(Code::SqlState)
/// }
/// txretry_core::register_extractor!(extract);
///
/// let err = MyDriverError { sqlstate: "40P01" };
/// assert!(txretry_core::classify(&err).verdict.kind().is_some());
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! register_extractor {
    ($extractor:path) => {
        // inventory's constructor is `unsafe extern "C"` in a link section; the workspace
        // forbids unsafe code everywhere else.
        #[allow(unsafe_code)]
        const _: () = {
            $crate::__private::inventory::submit! {
                $crate::__private::Extractor($extractor)
            }
        };
    };
}

/// `Code::Driver("io")` when an I/O error means the connection broke or could not be made
/// (reset, aborted, refused, not connected, broken pipe, unexpected EOF, timed out; no
/// route to the host or its network, the network down: a primary whose machine is gone);
/// `None` for other I/O errors. Adapters whose driver buries the `io::Error` deeper than the classifier's
/// default depth use it to read that link themselves.
#[doc(hidden)]
pub fn io_code(io: &std::io::Error) -> Option<Code> {
    use std::io::ErrorKind::*;
    match io.kind() {
        ConnectionReset | ConnectionAborted | ConnectionRefused | NotConnected | BrokenPipe
        | UnexpectedEof | TimedOut | HostUnreachable | NetworkUnreachable | NetworkDown => {
            Some(Code::Driver("io"))
        }
        _ => None,
    }
}

/// The first `std::io::Error` among `error`'s causes (its `source()` chain, `error` itself
/// left out): where a driver that wraps its I/O keeps why a connection broke or could not
/// be made, however deep.
#[doc(hidden)]
pub fn io_cause<'a>(error: &'a (dyn Error + 'static)) -> Option<&'a std::io::Error> {
    std::iter::successors(error.source(), |&cause| cause.source())
        .find_map(|cause| cause.downcast_ref::<std::io::Error>())
}

/// Whether an I/O failure is one no retry mends, though the connection may look broken:
/// `InvalidData`, what rustls reports for a server certificate that fails its check.
/// Retried, such a connect fails the same way until the failover budget runs out.
#[doc(hidden)]
pub fn io_unmendable(io: &std::io::Error) -> bool {
    io.kind() == std::io::ErrorKind::InvalidData
}

/// The first code any registered extractor (or core's own `std::io::Error` reading) finds
/// in this one error value.
pub(crate) fn extract(error: &(dyn Error + 'static)) -> Option<Code> {
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        return io_code(io);
    }
    inventory::iter::<Extractor>
        .into_iter()
        .find_map(|extractor| (extractor.0)(error))
}
