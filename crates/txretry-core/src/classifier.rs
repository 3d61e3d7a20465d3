//! The classifier: typed codes first, the message fallback only when there are none.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::chain::{MAX_LINKS, links};
use crate::message::{MessageFallback, match_message, phrase_kind};
use crate::registry::extract;
use crate::table::default_verdict;
use crate::{Classification, Code, CodeExtractor, Profile, Verdict};

type Hook = Arc<dyn Fn(&(dyn Error + 'static)) -> Option<Classification> + Send + Sync>;

/// Decides what an error means. Cheap to clone.
///
/// Order of decision, for the error and up to [`depth`](Classifier::depth) levels of
/// `source()`:
/// 1. closures added with [`with_fn`](Classifier::with_fn), on the top-level error; the
///    first `Some` wins;
/// 2. the first typed code in the chain (SQLSTATE, MySQL errno, SQLite code, driver-detected
///    connection failure). It is authoritative: codes added with
///    [`with_code`](Classifier::with_code), then profiles, then the default table decide,
///    and a code none of them lists is [`Verdict::Permanent`];
/// 3. only when no link of the *whole* chain has a typed code (a code deeper than `depth`
///    does not decide, but it still blocks the fallback: a Postgres `RAISE 'deadlock …'`
///    wrapped three times stays permanent): the message fallback, on the first 1 KiB of
///    each message within `depth` (see [`MessageFallback`]);
/// 4. otherwise permanent.
///
/// The classifier says what an error *is*; which kinds are retried is the policy's
/// [`retry_on`](crate::RetryPolicyBuilder::retry_on).
///
/// # Default
/// `Classifier::default()`: the default code table of every enabled driver, the message
/// fallback on the drivers' own phrases ([`MessageFallback::DriverPhrases`]), depth 1 (the
/// error and its direct `source()`), no profiles.
///
/// ```
/// use txretry_core::{Classifier, Code, TransientKind, Verdict};
///
/// // Widen: treat MySQL 1020 as a serialization failure; look two levels deep.
/// let classifier = Classifier::default()
///     .with_code(Code::MySql(1020), Verdict::Transient(TransientKind::SerializationFailure))
///     .depth(2);
/// # let _ = classifier;
/// ```
#[derive(Clone)]
pub struct Classifier {
    depth: usize,
    use_default_table: bool,
    message_fallback: MessageFallback,
    codes: Vec<(Code, Verdict)>,
    profiles: Vec<Profile>,
    hooks: Vec<Hook>,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::DEFAULT
    }
}

impl Classifier {
    /// The default classifier as a constant, so [`classify`] reads a plain static.
    const DEFAULT: Classifier = Classifier {
        depth: 1,
        use_default_table: true,
        message_fallback: MessageFallback::DriverPhrases,
        codes: Vec::new(),
        profiles: Vec::new(),
        hooks: Vec::new(),
    };

    /// A classifier that still reads typed codes but recognises none of them and has no
    /// message fallback: everything is permanent until you add codes, profiles or closures.
    /// Use it to replace the defaults rather than adjust them.
    pub fn empty() -> Self {
        Classifier {
            use_default_table: false,
            message_fallback: MessageFallback::Off,
            ..Classifier::default()
        }
    }

    /// Replaces the classifier with a closure. The closure may call
    /// [`crate::classify`] to fall back to the default; returning `None` means permanent.
    ///
    /// ```
    /// use txretry_core::{Classification, Classifier, TransientKind, Verdict};
    ///
    /// let c = Classifier::from_fn(|err| {
    ///     if err.to_string().contains("try again") {
    ///         return Some(Classification::new(Verdict::Transient(TransientKind::Busy), None));
    ///     }
    ///     Some(txretry_core::classify(err))
    /// });
    /// let err = std::io::Error::other("please try again");
    /// assert_eq!(c.classify(&err).verdict, Verdict::Transient(TransientKind::Busy));
    /// ```
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&(dyn Error + 'static)) -> Option<Classification> + Send + Sync + 'static,
    {
        Classifier::empty().with_fn(f)
    }

    /// Widens the classifier with a closure consulted first, on the top-level error.
    /// `None` falls through to the codes and the message fallback. Unlike the policy's
    /// event hooks, a panic in the closure is not caught: it ends the loop, as a panic in
    /// the operation does.
    #[must_use]
    pub fn with_fn<F>(mut self, f: F) -> Self
    where
        F: Fn(&(dyn Error + 'static)) -> Option<Classification> + Send + Sync + 'static,
    {
        self.hooks.push(Arc::new(f));
        self
    }

    /// Widens (or overrides) the table: `code` gets `verdict`. Later calls for the same
    /// code win over earlier ones; all win over profiles and the default table.
    #[must_use]
    pub fn with_code(mut self, code: Code, verdict: Verdict) -> Self {
        self.codes.insert(0, (code, verdict));
        self
    }

    /// Adds an opt-in [`Profile`] (CockroachDB, TiDB, Galera, …).
    #[must_use]
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profiles.push(profile);
        self
    }

    /// How many levels of `source()` to look through besides the error itself.
    ///
    /// # Default
    /// 1: drivers and `thiserror` / `anyhow` wrappers add one level.
    #[must_use]
    pub fn depth(mut self, depth: usize) -> Self {
        self.depth = depth;
        self
    }

    /// Which messages the fallback recognises when no typed code is in the chain.
    ///
    /// # Default
    /// [`MessageFallback::DriverPhrases`] for `Classifier::default()`,
    /// [`MessageFallback::Off`] for [`Classifier::empty`].
    #[must_use]
    pub fn message_fallback(mut self, mode: MessageFallback) -> Self {
        self.message_fallback = mode;
        self
    }

    /// Classifies one error.
    pub fn classify(&self, error: &(dyn Error + 'static)) -> Classification {
        self.classify_with(error, no_driver)
    }

    /// Classifies with a driver's own extractor consulted first on every link, so a
    /// runner recognises its driver's codes whatever the registry holds.
    pub(crate) fn classify_with(
        &self,
        error: &(dyn Error + 'static),
        driver: CodeExtractor,
    ) -> Classification {
        if let Some(found) = self.hooks.iter().find_map(|hook| hook(error)) {
            return found;
        }
        let code_of = |link: &(dyn Error + 'static)| driver(link).or_else(|| extract(link));
        if let Some(code) = links(error, self.depth).find_map(code_of) {
            return Classification::new(
                self.verdict_for(code).unwrap_or(Verdict::Permanent),
                Some(code),
            );
        }
        let deeper = links(error, MAX_LINKS)
            .enumerate()
            .skip(self.depth.saturating_add(1))
            .find_map(|(level, link)| Some((level, code_of(link)?)));
        if let Some((level, code)) = deeper {
            // Wrapped once too often (two `anyhow` contexts, a `thiserror` enum around a
            // wrapper): a code that would be retried goes unseen, and nothing else says so.
            if !matches!(self.verdict_for(code), None | Some(Verdict::Permanent)) {
                tracing::warn!(
                    target: "txretry",
                    %code,
                    level,
                    depth = self.depth,
                    "judged permanent: the error's code lies deeper in its source() chain than the classifier looks; raise Classifier::depth, or wrap the driver's error fewer times"
                );
            }
            return Classification::PERMANENT;
        }
        if self.message_fallback == MessageFallback::Off {
            return Classification::PERMANENT;
        }
        for link in links(error, self.depth) {
            if let Some((phrase, kind)) = match_message(link, self.message_fallback) {
                // `with_code(Code::Message(phrase), …)` overrides the phrase's kind.
                let code = Code::Message(phrase);
                let verdict = self.verdict_for(code).unwrap_or(Verdict::Transient(kind));
                return Classification::new(verdict, Some(code));
            }
        }
        Classification::PERMANENT
    }

    /// The verdict for a code under this classifier's tables, without looking at an error.
    pub fn verdict_for(&self, code: Code) -> Option<Verdict> {
        self.codes
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| *v)
            .or_else(|| self.profiles.iter().find_map(|p| p.verdict(code)))
            .or_else(|| {
                if self.use_default_table {
                    default_verdict(code)
                } else {
                    None
                }
            })
            .or_else(|| match code {
                // What the message fallback gives the phrase, as `classify` does.
                Code::Message(phrase) => {
                    phrase_kind(phrase, self.message_fallback).map(Verdict::Transient)
                }
                _ => None,
            })
    }
}

impl fmt::Debug for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Classifier")
            .field("depth", &self.depth)
            .field("default_table", &self.use_default_table)
            .field("message_fallback", &self.message_fallback)
            .field("codes", &self.codes)
            .field("profiles", &self.profiles)
            .field("closures", &self.hooks.len())
            .finish()
    }
}

/// Classifies `error` with the default classifier (every enabled driver's codes, the
/// drivers' own phrases as message fallback, depth 1).
///
/// ```
/// use txretry_core::{classify, Code, TransientKind, Verdict};
///
/// let err = std::io::Error::other("Deadlock found when trying to get lock");
/// let c = classify(&err);
/// assert_eq!(c.verdict, Verdict::Transient(TransientKind::Deadlock));
/// assert_eq!(c.code, Some(Code::Message("Deadlock found when trying to get lock")));
///
/// // User text that mentions a deadlock is a business error.
/// let refused = std::io::Error::other("refund refused: customer reports a deadlock at checkout");
/// assert_eq!(classify(&refused).verdict, Verdict::Permanent);
/// ```
pub fn classify(error: &(dyn Error + 'static)) -> Classification {
    static DEFAULT: Classifier = Classifier::DEFAULT;
    DEFAULT.classify(error)
}

/// The extractor of a caller that has no driver (the plain `run` loops).
pub(crate) fn no_driver(_: &(dyn Error + 'static)) -> Option<Code> {
    None
}

/// Whether the connection an error came from is unusable, judged from the driver's own
/// codes and the default table only: a connection-class or failover code (a session on a
/// server that is going away, or on a standby, is no use for the next attempt), or a
/// failure the driver detected itself. A user's classifier never changes this.
pub(crate) fn broken_connection(error: &(dyn Error + 'static), driver: CodeExtractor) -> bool {
    links(error, MAX_LINKS)
        .find_map(|link| driver(link).or_else(|| extract(link)))
        .is_some_and(|code| {
            matches!(code, Code::Driver(_))
                || match default_verdict(code) {
                    Some(Verdict::Ambiguous) => true,
                    Some(Verdict::Transient(kind)) => kind.loses_session(),
                    _ => false,
                }
        })
}
