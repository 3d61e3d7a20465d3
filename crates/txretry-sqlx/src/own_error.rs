//! Errors of the adapter's own that stand in for a server's answer (a named lock not
//! granted, a connection on a standby): sqlx's `DatabaseError`, so that they travel as
//! `sqlx::Error::Database` like the server's own and classify by their code.

/// Implements `Display` (the message), `std::error::Error` and sqlx's `DatabaseError` for
/// `$ty`, with the message and the SQLSTATE given as expressions of `self`.
macro_rules! database_error {
    ($ty:ty, |$this:ident| message: $message:expr, code: $code:expr) => {
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $this = self;
                f.write_str($message)
            }
        }

        impl ::std::error::Error for $ty {}

        impl ::sqlx::error::DatabaseError for $ty {
            fn message(&self) -> &str {
                let $this = self;
                $message
            }

            fn code(&self) -> ::std::option::Option<::std::borrow::Cow<'_, str>> {
                let $this = self;
                ::std::option::Option::Some(::std::borrow::Cow::Borrowed($code))
            }

            fn as_error(&self) -> &(dyn ::std::error::Error + Send + Sync + 'static) {
                self
            }

            fn as_error_mut(&mut self) -> &mut (dyn ::std::error::Error + Send + Sync + 'static) {
                self
            }

            fn into_error(
                self: ::std::boxed::Box<Self>,
            ) -> ::std::boxed::Box<dyn ::std::error::Error + Send + Sync + 'static> {
                self
            }

            fn kind(&self) -> ::sqlx::error::ErrorKind {
                ::sqlx::error::ErrorKind::Other
            }
        }
    };
}

pub(crate) use database_error;
