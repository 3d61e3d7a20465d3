//! `src/error.rs`.

use std::error::Error;
use txretry::Verdict;
use txretry_lab::error::*;

#[test]
fn a_business_refusal_is_permanent() {
    let e = TxError::InsufficientFunds {
        account: 1,
        balance: 5,
        amount: 10,
    };
    assert_eq!(txretry::classify(&e).verdict, Verdict::Permanent);
}

#[test]
fn the_driver_error_is_reachable_through_source() {
    let e = TxError::from(sqlx::Error::RowNotFound);
    assert!(e.source().is_some_and(|s| s.is::<sqlx::Error>()));
}
