//! The typed code of a mysql_async error: the server's error number, or how the connection
//! broke.

use std::error::Error as StdError;

use mysql_async::{DriverError, Error, IoError, ServerError};
use txretry_core::Code;

/// Reads the typed code from one mysql_async error value; the default classifier calls it
/// for each link of an error's chain. Use it when you write your own classifier closure.
///
/// ```
/// use mysql_async::{Error, ServerError};
/// use txretry_core::Code;
///
/// let err = Error::Server(ServerError {
///     code: 1213,
///     message: "Deadlock found when trying to get lock; try restarting transaction".into(),
///     state: "40001".into(),
/// });
/// assert_eq!(txretry_mysql_async::extract(&err), Some(Code::MySql(1213)));
/// ```
pub fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
    if let Some(e) = error.downcast_ref::<Error>() {
        return match e {
            Error::Server(server) => Some(Code::MySql(server.code)),
            Error::Io(io) => io_code(io),
            Error::Driver(driver) => driver_code(driver),
            Error::Other(_) | Error::Url(_) => None,
        };
    }
    if let Some(server) = error.downcast_ref::<ServerError>() {
        return Some(Code::MySql(server.code));
    }
    if let Some(io) = error.downcast_ref::<IoError>() {
        return io_code(io);
    }
    error.downcast_ref::<DriverError>().and_then(driver_code)
}

/// An I/O failure is the connection breaking, except a TLS failure no retry mends: a
/// certificate that fails its check ([`io_unmendable`](txretry_core::io_unmendable)), or
/// a TLS library's own error that no I/O error caused.
fn io_code(error: &IoError) -> Option<Code> {
    match txretry_core::io_cause(error) {
        Some(io) if txretry_core::io_unmendable(io) => None,
        Some(_) => Some(Code::Driver("io")),
        None => None,
    }
}

/// The driver errors that mean the connection is gone or cannot be had. Not
/// `PoolDisconnected`: the application disconnected the pool, and no retry reopens it.
fn driver_code(error: &DriverError) -> Option<Code> {
    match error {
        DriverError::ConnectionClosed => Some(Code::Driver("connection closed")),
        DriverError::PacketOutOfOrder => Some(Code::Driver("packet out of order")),
        _ => None,
    }
}

txretry_core::register_extractor!(extract);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use txretry_core::{TransientKind, Verdict};

    fn server(code: u16, state: &str) -> Error {
        Error::Server(ServerError {
            code,
            message: "hand-built".into(),
            state: state.into(),
        })
    }

    #[test]
    fn server_errors_carry_their_number() {
        assert_eq!(extract(&server(1213, "40001")), Some(Code::MySql(1213)));
        assert_eq!(extract(&server(1205, "HY000")), Some(Code::MySql(1205)));
        assert_eq!(extract(&server(1062, "23000")), Some(Code::MySql(1062)));
    }

    #[test]
    fn a_server_error_link_carries_its_number() {
        let err = ServerError {
            code: 1213,
            message: String::new(),
            state: "40001".into(),
        };
        assert_eq!(extract(&err), Some(Code::MySql(1213)));
    }

    #[test]
    fn io_errors_are_driver_detected() {
        let err = Error::from(io::Error::from(io::ErrorKind::ConnectionReset));
        assert_eq!(extract(&err), Some(Code::Driver("io")));
        let link = IoError::from(io::Error::other("packets out of sync"));
        assert_eq!(extract(&link), Some(Code::Driver("io")));
    }

    /// What mysql_async's rustls gives for a server certificate that fails its check
    /// (`Io(Io(Custom { kind: InvalidData, .. }))`, seen against a MariaDB with a
    /// self-signed certificate): no code, so permanent, not a connection to retry.
    #[test]
    fn a_certificate_that_fails_its_check_is_not_a_broken_connection() {
        let err = Error::from(io::Error::new(
            io::ErrorKind::InvalidData,
            "invalid peer certificate: UnknownIssuer",
        ));
        assert_eq!(extract(&err), None);
        assert_eq!(txretry_core::classify(&err).verdict, Verdict::Permanent);
    }

    #[test]
    fn connection_ish_driver_errors_are_driver_detected() {
        assert_eq!(
            extract(&Error::Driver(DriverError::ConnectionClosed)),
            Some(Code::Driver("connection closed"))
        );
        assert_eq!(
            extract(&DriverError::PacketOutOfOrder),
            Some(Code::Driver("packet out of order"))
        );
    }

    #[test]
    fn other_driver_errors_have_no_code() {
        let err = Error::Driver(DriverError::StmtParamsMismatch {
            required: 2,
            supplied: 1,
        });
        assert_eq!(extract(&err), None);
        assert_eq!(extract(&Error::Driver(DriverError::PoolDisconnected)), None);
        assert_eq!(
            extract(&Error::Driver(DriverError::NestedTransaction)),
            None
        );
        assert_eq!(extract(&Error::Other("deadlock".into())), None);
        assert_eq!(extract(&io::Error::other("not a mysql_async error")), None);
    }

    #[test]
    fn the_default_classifier_sees_mysql_async_errors() {
        let c = txretry_core::classify(&server(1213, "40001"));
        assert_eq!(c.verdict, Verdict::Transient(TransientKind::Deadlock));
        let c = txretry_core::classify(&Error::Driver(DriverError::ConnectionClosed));
        assert_eq!(c.verdict, Verdict::Transient(TransientKind::Connection));
        // A typed code wins over the message: 1062 mentioning "deadlock" stays permanent.
        let err = Error::Server(ServerError {
            code: 1062,
            message: "Duplicate entry 'deadlock' for key 'PRIMARY'".into(),
            state: "23000".into(),
        });
        assert_eq!(txretry_core::classify(&err).verdict, Verdict::Permanent);
    }
}
