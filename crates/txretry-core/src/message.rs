//! The message fallback: used only when no typed code exists anywhere in the chain.
//!
//! The message is rendered into a fixed stack buffer and rendering stops once it is full,
//! so a 1 MB message costs the same as a 1 KB one and nothing is allocated.

use std::fmt::{self, Write};
use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::TransientKind;

/// How much of each message is inspected. Driver messages name the reason first.
pub(crate) const SCANNED_BYTES: usize = 1024;

const PHRASES: [(&str, TransientKind); 3] = [
    ("deadlock", TransientKind::Deadlock),
    ("lock wait timeout", TransientKind::LockTimeout),
    ("serialization failure", TransientKind::SerializationFailure),
];

/// The phrase found in the first [`SCANNED_BYTES`] of `message`'s `Display`, if any.
pub(crate) fn match_message(message: &dyn fmt::Display) -> Option<(&'static str, TransientKind)> {
    let mut buf = Prefix {
        bytes: [0; SCANNED_BYTES],
        len: 0,
    };
    // A full buffer reports `fmt::Error` to stop the rendering early; that is expected.
    let _ = write!(buf, "{message}");
    let text = &mut buf.bytes[..buf.len];
    text.make_ascii_lowercase();
    // memmem's vectorised search, with the searchers built once: a byte-by-byte window
    // compare, or building a searcher per call, cost more than rendering the message.
    static FINDERS: LazyLock<[Finder<'static>; 3]> =
        LazyLock::new(|| PHRASES.map(|(phrase, _)| Finder::new(phrase)));
    PHRASES
        .into_iter()
        .zip(FINDERS.iter())
        .find(|(_, finder)| finder.find(text).is_some())
        .map(|(found, _)| found)
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

    #[test]
    fn deadlock_matches_in_any_case() {
        assert_eq!(
            match_message(&"Deadlock found when trying to get lock"),
            Some(("deadlock", TransientKind::Deadlock))
        );
        assert_eq!(
            match_message(&"DEADLOCK"),
            Some(("deadlock", TransientKind::Deadlock))
        );
    }

    #[test]
    fn lock_wait_timeout_matches() {
        assert_eq!(
            match_message(&"Lock wait timeout exceeded; try restarting transaction"),
            Some(("lock wait timeout", TransientKind::LockTimeout))
        );
    }

    #[test]
    fn serialization_failure_matches() {
        assert_eq!(
            match_message(&"upstream reported a Serialization Failure"),
            Some(("serialization failure", TransientKind::SerializationFailure))
        );
    }

    #[test]
    fn unrelated_messages_do_not_match() {
        assert_eq!(match_message(&"order 17 not found"), None);
        assert_eq!(match_message(&"could not serialize access"), None);
        assert_eq!(match_message(&""), None);
    }

    #[test]
    fn only_the_prefix_of_a_huge_message_is_scanned() {
        let early = format!("deadlock {}", "x".repeat(1 << 20));
        assert_eq!(
            match_message(&early).map(|m| m.1),
            Some(TransientKind::Deadlock)
        );
        let late = format!("{} deadlock", "x".repeat(1 << 20));
        assert_eq!(match_message(&late), None);
    }

    #[test]
    fn a_phrase_cut_by_the_buffer_end_does_not_match() {
        let cut = format!("{}dead", "x".repeat(SCANNED_BYTES - 4));
        let text = format!("{cut}lock");
        assert_eq!(match_message(&text), None);
    }

    #[test]
    fn multibyte_text_does_not_break_the_scan() {
        let text = format!("{}é deadlock", "é".repeat(300));
        assert_eq!(
            match_message(&text).map(|m| m.1),
            Some(TransientKind::Deadlock)
        );
    }
}
