//! How the default classifier learns the enabled drivers: each adapter crate adds a code
//! extractor to a link-time list, so enabling a driver feature is all the setup there is.

use std::error::Error;

use crate::Code;

/// Reads the typed code from one error value, if that value is a type the extractor knows.
/// Extractors look at one link only; the classifier walks the chain.
pub type CodeExtractor = fn(&(dyn Error + 'static)) -> Option<Code>;

/// Every registered extractor. Adapter crates add theirs with [`register_extractor!`](crate::register_extractor).
#[allow(unsafe_code)] // linkme's link_section static; see Cargo.toml
#[linkme::distributed_slice]
pub static CODE_EXTRACTORS: [CodeExtractor];

/// Registers a [`CodeExtractor`] with the default classifier.
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
/// txretry_core::register_extractor!(MY_DRIVER = extract);
///
/// let err = MyDriverError { sqlstate: "40P01" };
/// assert!(txretry_core::classify(&err).verdict.kind().is_some());
/// ```
#[macro_export]
macro_rules! register_extractor {
    ($name:ident = $extractor:path) => {
        #[allow(unsafe_code)] // linkme's link_section static
        #[$crate::__private::linkme::distributed_slice($crate::CODE_EXTRACTORS)]
        #[linkme(crate = $crate::__private::linkme)]
        static $name: $crate::CodeExtractor = $extractor;
    };
}

/// `Code::Driver("io")` when an I/O error means the connection broke (reset, aborted,
/// refused, not connected, broken pipe, unexpected EOF, timed out); `None` for other I/O
/// errors. Adapters whose driver buries the `io::Error` deeper than the classifier's
/// default depth use it to read that link themselves.
pub fn io_code(io: &std::io::Error) -> Option<Code> {
    use std::io::ErrorKind::*;
    match io.kind() {
        ConnectionReset | ConnectionAborted | ConnectionRefused | NotConnected | BrokenPipe
        | UnexpectedEof | TimedOut => Some(Code::Driver("io")),
        _ => None,
    }
}

/// Broken connections surface as `std::io::Error` in every driver's chain.
fn io_extractor(error: &(dyn Error + 'static)) -> Option<Code> {
    io_code(error.downcast_ref::<std::io::Error>()?)
}

crate::register_extractor!(STD_IO = io_extractor);

/// The first code any registered extractor finds in this one error value.
pub(crate) fn extract(error: &(dyn Error + 'static)) -> Option<Code> {
    CODE_EXTRACTORS.iter().find_map(|extract| extract(error))
}
