//! The script every runner's `only_for_contended_keys` test follows, so the four drivers
//! check the same steps: two "processes" (pools or clients, each with its own
//! [`adaptive`] admission), two rows, and one provoked collision.

use std::time::Duration;

use txretry_core::Admission;

/// Database-backed admission that locks only contended keys; the window outlasts any test.
pub fn adaptive() -> Admission {
    Admission::per_key()
        .in_database(Duration::from_secs(5))
        .only_for_contended_keys(Duration::from_secs(600))
}

/// One transaction of the script and what it must see.
pub struct Step {
    /// Which process runs it (0 or 1).
    pub process: usize,
    /// The row it updates (its key is the row).
    pub row: i64,
    /// Whether its first attempt is made to collide with another session.
    pub collide: bool,
    /// How many database locks of admission its session held in each attempt.
    pub held: &'static [i64],
    /// What the step shows.
    pub what: &'static str,
}

/// The script: a cold key takes no lock; a collision locks the retry and the key's later
/// transactions in that process; another key and another process stay unlocked.
pub const STEPS: [Step; 5] = [
    Step {
        process: 0,
        row: 1,
        collide: false,
        held: &[0],
        what: "cold key",
    },
    Step {
        process: 0,
        row: 1,
        collide: true,
        held: &[0, 1],
        what: "the collision locks the retry",
    },
    Step {
        process: 0,
        row: 1,
        collide: false,
        held: &[1],
        what: "still contended",
    },
    Step {
        process: 0,
        row: 2,
        collide: false,
        held: &[0],
        what: "another key",
    },
    Step {
        process: 1,
        row: 1,
        collide: false,
        held: &[0],
        what: "another process",
    },
];

/// Row 1's value after the script, from 0: four transactions and the one write the
/// collision makes in another session, each once.
pub const ROW_1_AFTER: i64 = 5;
/// Row 2's value after the script, from 0.
pub const ROW_2_AFTER: i64 = 1;
