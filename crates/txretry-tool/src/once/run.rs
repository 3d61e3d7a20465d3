//! One run of a `once` tool's handler, and what its `ToolContext::once` did.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use txretry_core::{RecordedAttempt, RetryBudget};

use super::{Once, OnceRefused};

/// How a run's `once` transaction ended, as the invocation loop reads it.
const NOTHING: u8 = 0;
const OUTPUT: u8 = 1;
const BUSINESS: u8 = 2;

/// One run of a `once` tool's handler: its key, and what its `ToolContext::once` did (read
/// by the invocation loop when the run ends).
pub(crate) struct OnceRun {
    pub(crate) once: Once,
    pub(crate) key: Arc<str>,
    scope: RetryBudget,
    /// The scope's commit count when the run began.
    successes_at_start: u32,
    began: AtomicBool,
    /// NOTHING, OUTPUT or BUSINESS: the once transaction committed with this outcome
    /// (recorded now, or replayed).
    ended: AtomicU8,
    /// The outcome was an earlier call's, read from its record: the work did not run.
    replayed: AtomicBool,
    refused: Mutex<Option<OnceRefused>>,
    /// Attempts recorded in the scope before a claim that found no table, taken out of the
    /// scope with it: the invocation lists them with the run's others.
    kept_attempts: Mutex<Vec<RecordedAttempt>>,
}

impl OnceRun {
    pub(crate) fn new(once: Once, key: Arc<str>, scope: &RetryBudget) -> Self {
        OnceRun {
            once,
            key,
            scope: scope.clone(),
            successes_at_start: scope.successes(),
            began: AtomicBool::new(false),
            ended: AtomicU8::new(NOTHING),
            replayed: AtomicBool::new(false),
            refused: Mutex::new(None),
            kept_attempts: Mutex::new(Vec::new()),
        }
    }

    /// Called when `ToolContext::once` starts: `Err` when it must not.
    #[cfg_attr(not(once_records), allow(dead_code))]
    pub(crate) fn begin(&self) -> Result<(), OnceRefused> {
        let refused = if self.began.swap(true, Ordering::AcqRel) {
            Some(OnceRefused::SecondTransaction)
        } else {
            match self.commits_so_far() {
                0 => None,
                transactions => Some(OnceRefused::CommittedOutside { transactions }),
            }
        };
        match refused {
            None => Ok(()),
            Some(refused) => {
                self.refuse(refused.clone());
                Err(refused)
            }
        }
    }

    /// Called when the once transaction committed with a recorded output (`business ==
    /// false`) or business error, recorded now or (`replayed`) by an earlier call.
    #[cfg_attr(not(once_records), allow(dead_code))]
    pub(crate) fn ended(&self, business: bool, replayed: bool) {
        self.replayed.store(replayed, Ordering::Release);
        self.ended
            .store(if business { BUSINESS } else { OUTPUT }, Ordering::Release);
    }

    /// Forgets the scope's last recorded attempt, the claim that found no table (its runner
    /// stopped on it at once: a permanent failure): the once layer's own business, not an
    /// attempt of the call. The attempts recorded before it stay the run's.
    #[cfg_attr(not(once_records), allow(dead_code))]
    pub(crate) fn forget_missing_table_claim(&self) {
        let mut attempts = self.scope.take_attempts();
        attempts.pop();
        self.kept_attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(&mut attempts);
    }

    /// The attempts [`forget_missing_table_claim`](OnceRun::forget_missing_table_claim)
    /// kept, taken.
    pub(crate) fn take_kept_attempts(&self) -> Vec<RecordedAttempt> {
        std::mem::take(
            &mut *self
                .kept_attempts
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    fn refuse(&self, refused: OnceRefused) {
        let mut slot = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(refused);
        }
    }

    fn commits_so_far(&self) -> u32 {
        self.scope
            .successes()
            .saturating_sub(self.successes_at_start)
    }

    /// After the run: the refusal it earned, if any.
    pub(crate) fn verdict(&self) -> Option<OnceRefused> {
        if let Some(refused) = self
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Some(refused);
        }
        let ours = u32::from(self.ended.load(Ordering::Acquire) != NOTHING);
        match self.commits_so_far().saturating_sub(ours) {
            0 => None,
            transactions => Some(OnceRefused::CommittedOutside { transactions }),
        }
    }

    /// Whether the run's once transaction recorded (or replayed) a business error.
    pub(crate) fn business(&self) -> bool {
        self.ended.load(Ordering::Acquire) == BUSINESS
    }

    /// Whether the run's once transaction answered with an earlier call's recorded
    /// outcome, without running the work.
    pub(crate) fn replayed(&self) -> bool {
        self.ended.load(Ordering::Acquire) != NOTHING && self.replayed.load(Ordering::Acquire)
    }
}

impl fmt::Debug for OnceRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnceRun")
            .field("table", &self.once.table_name())
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}
