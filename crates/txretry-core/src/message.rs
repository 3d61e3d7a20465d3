//! The message fallback: used only when no typed code exists anywhere in the chain.
//!
//! By default it matches only what the drivers themselves print for a transient failure
//! (the servers' own phrasings, case included), so user text that merely mentions a
//! deadlock ("customer reports a deadlock at checkout", a product called "Deadlock Deluxe")
//! is never retried. The loose, seed-style patterns are an explicit opt-in.
//!
//! The message is rendered into a fixed stack buffer and rendering stops once it is full,
//! so a 1 MB message costs the same as a 1 KB one and nothing is allocated.

use std::fmt::{self, Write};
use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::TransientKind;
use TransientKind::*;

/// How much of each message is inspected. Driver messages name the reason first.
pub(crate) const SCANNED_BYTES: usize = 1024;

/// Which messages the fallback recognises. See [`Classifier::message_fallback`](crate::Classifier::message_fallback).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MessageFallback {
    /// No message is ever matched.
    Off,
    /// Only the phrases the servers and drivers print, matched exactly (case included),
    /// anywhere in the message:
    ///
    /// | phrase | printed by | kind |
    /// |---|---|---|
    /// | `deadlock detected` | Postgres 40P01 | deadlock |
    /// | `Deadlock found when trying to get lock` | MySQL / MariaDB 1213 | deadlock |
    /// | `Lock wait timeout exceeded` | MySQL / MariaDB 1205 | lock timeout |
    /// | `canceling statement due to lock timeout` | Postgres 55P03 (`lock_timeout`) | lock timeout |
    /// | `could not obtain lock on` | Postgres 55P03 (`NOWAIT`) | lock timeout |
    /// | `could not serialize access` | Postgres 40001 | serialization failure |
    /// | `database is locked` | SQLite 5 (`SQLITE_BUSY`) | busy |
    /// | `database table is locked` | SQLite 6 (`SQLITE_LOCKED`) | locked |
    #[default]
    DriverPhrases,
    /// The driver phrases, plus the loose patterns some frameworks use: `deadlock`,
    /// `lock wait timeout` and `serialization failure` anywhere, in any case. Opt in only
    /// for errors whose text you control: user text that mentions a deadlock is retried.
    Loose,
}

const DRIVER_PHRASES: [(&str, TransientKind); 8] = [
    ("deadlock detected", Deadlock),
    ("Deadlock found when trying to get lock", Deadlock),
    ("Lock wait timeout exceeded", LockTimeout),
    ("canceling statement due to lock timeout", LockTimeout),
    ("could not obtain lock on", LockTimeout),
    ("could not serialize access", SerializationFailure),
    ("database table is locked", Locked),
    ("database is locked", Busy),
];

/// Matched against the lower-cased message.
const LOOSE_PATTERNS: [(&str, TransientKind); 3] = [
    ("deadlock", Deadlock),
    ("lock wait timeout", LockTimeout),
    ("serialization failure", SerializationFailure),
];

/// The phrase found in the first [`SCANNED_BYTES`] of `message`'s `Display`, if any.
pub(crate) fn match_message(
    message: &dyn fmt::Display,
    mode: MessageFallback,
) -> Option<(&'static str, TransientKind)> {
    if mode == MessageFallback::Off {
        return None;
    }
    let mut buf = Prefix {
        bytes: [0; SCANNED_BYTES],
        len: 0,
    };
    // A full buffer reports `fmt::Error` to stop the rendering early; that is expected.
    let _ = write!(buf, "{message}");
    let text = &mut buf.bytes[..buf.len];
    // memmem's vectorised search, with the searchers built once: a byte-by-byte window
    // compare, or building a searcher per call, cost more than rendering the message.
    static DRIVER: LazyLock<[Finder<'static>; 8]> =
        LazyLock::new(|| DRIVER_PHRASES.map(|(phrase, _)| Finder::new(phrase)));
    if let Some(found) = find(&DRIVER_PHRASES, &DRIVER, text) {
        return Some(found);
    }
    if mode != MessageFallback::Loose {
        return None;
    }
    static LOOSE: LazyLock<[Finder<'static>; 3]> =
        LazyLock::new(|| LOOSE_PATTERNS.map(|(phrase, _)| Finder::new(phrase)));
    text.make_ascii_lowercase();
    find(&LOOSE_PATTERNS, &LOOSE, text)
}

/// The kind `mode` gives a phrase it matches (as [`Code::Message`](crate::Code::Message)
/// names it), if any.
pub(crate) fn phrase_kind(phrase: &str, mode: MessageFallback) -> Option<TransientKind> {
    if mode == MessageFallback::Off {
        return None;
    }
    let loose: &[(&str, TransientKind)] = match mode {
        MessageFallback::Loose => &LOOSE_PATTERNS,
        _ => &[],
    };
    DRIVER_PHRASES
        .iter()
        .chain(loose)
        .find(|(p, _)| *p == phrase)
        .map(|(_, kind)| *kind)
}

fn find<const N: usize>(
    phrases: &[(&'static str, TransientKind); N],
    finders: &[Finder<'static>; N],
    text: &[u8],
) -> Option<(&'static str, TransientKind)> {
    phrases
        .iter()
        .zip(finders)
        .find(|(_, finder)| finder.find(text).is_some())
        .map(|(found, _)| *found)
}

struct Prefix {
    bytes: [u8; SCANNED_BYTES],
    len: usize,
}

impl Write for Prefix {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = SCANNED_BYTES - self.len;
        let take = s.len().min(room);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        if take < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXACT: MessageFallback = MessageFallback::DriverPhrases;
    const LOOSE: MessageFallback = MessageFallback::Loose;

    fn kind(text: &str, mode: MessageFallback) -> Option<TransientKind> {
        match_message(&text, mode).map(|m| m.1)
    }

    #[test]
    fn postgres_deadlock_detected_matches() {
        assert_eq!(
            kind("error returned from database: deadlock detected", EXACT),
            Some(Deadlock)
        );
    }

    #[test]
    fn mysql_deadlock_found_matches() {
        assert_eq!(
            kind(
                "Deadlock found when trying to get lock; try restarting transaction",
                EXACT
            ),
            Some(Deadlock)
        );
    }

    #[test]
    fn mysql_lock_wait_timeout_matches() {
        assert_eq!(
            kind(
                "Lock wait timeout exceeded; try restarting transaction",
                EXACT
            ),
            Some(LockTimeout)
        );
    }

    #[test]
    fn postgres_lock_timeout_phrases_match() {
        assert_eq!(
            kind("canceling statement due to lock timeout", EXACT),
            Some(LockTimeout)
        );
        assert_eq!(
            kind(
                "could not obtain lock on row in relation \"account\"",
                EXACT
            ),
            Some(LockTimeout)
        );
    }

    #[test]
    fn postgres_could_not_serialize_matches() {
        assert_eq!(
            kind("could not serialize access due to concurrent update", EXACT),
            Some(SerializationFailure)
        );
    }

    #[test]
    fn sqlite_busy_and_locked_match() {
        assert_eq!(kind("database is locked", EXACT), Some(Busy));
        assert_eq!(
            kind("database table is locked: account", EXACT),
            Some(Locked)
        );
    }

    #[test]
    fn user_text_mentioning_a_deadlock_does_not_match() {
        for text in [
            "refund 17 refused: customer reports a deadlock at checkout",
            "product \"Deadlock Deluxe\" is out of stock",
            "DEADLOCK DETECTED", // not how any server prints it
            "upstream reported a Serialization Failure",
            "lock wait timeout",
        ] {
            assert_eq!(kind(text, EXACT), None, "{text}");
        }
    }

    #[test]
    fn loose_matches_the_seed_patterns_in_any_case() {
        assert_eq!(kind("customer reports a DEADLOCK", LOOSE), Some(Deadlock));
        assert_eq!(
            kind("a Lock Wait Timeout upstream", LOOSE),
            Some(LockTimeout)
        );
        assert_eq!(
            kind("Serialization Failure", LOOSE),
            Some(SerializationFailure)
        );
        assert_eq!(kind("order 17 not found", LOOSE), None);
    }

    #[test]
    fn off_matches_nothing() {
        assert_eq!(kind("deadlock detected", MessageFallback::Off), None);
    }

    #[test]
    fn only_the_prefix_of_a_huge_message_is_scanned() {
        let early = format!("deadlock detected {}", "x".repeat(1 << 20));
        assert_eq!(kind(&early, EXACT), Some(Deadlock));
        let late = format!("{} deadlock detected", "x".repeat(1 << 20));
        assert_eq!(kind(&late, EXACT), None);
    }

    #[test]
    fn a_phrase_cut_by_the_buffer_end_does_not_match() {
        let cut = format!("{}deadlock det", "x".repeat(SCANNED_BYTES - 12));
        let text = format!("{cut}ected");
        assert_eq!(kind(&text, EXACT), None);
    }

    #[test]
    fn multibyte_text_does_not_break_the_scan() {
        let text = format!("{}é deadlock detected", "é".repeat(300));
        assert_eq!(kind(&text, EXACT), Some(Deadlock));
        assert_eq!(kind(&text, LOOSE), Some(Deadlock));
    }
}
