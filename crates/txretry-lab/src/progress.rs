//! The progress bar on stderr while a run goes on. indicatif draws nothing when stderr is
//! not a terminal, so pipes and tests see no bar.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The live counts a bar shows.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    /// Transactions committed.
    pub committed: u64,
    /// Transactions refused for a business reason (insufficient funds).
    pub refused: u64,
    /// Transactions whose database error surfaced.
    pub failed: u64,
    /// Retries.
    pub retries: u64,
}

/// One run's bar: time elapsed out of the run's duration, with live counts.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    total: Duration,
}

impl Progress {
    /// A bar labelled `label` for a run of `total`.
    pub fn new(label: &str, total: Duration) -> Progress {
        let millis = u64::try_from(total.as_millis()).unwrap_or(u64::MAX);
        let bar = ProgressBar::with_draw_target(Some(millis), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{prefix:>12} [{bar:30.cyan/blue}] {msg}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_owned());
        Progress { bar, total }
    }

    /// Shows the state `elapsed` into the run, in the words and order of the report:
    /// business refusals apart from failures, which alone are transactions lost.
    pub fn update(&self, elapsed: Duration, counts: Counts) {
        let shown = elapsed.min(self.total);
        self.bar
            .set_position(u64::try_from(shown.as_millis()).unwrap_or(u64::MAX));
        let Counts {
            committed,
            refused,
            failed,
            retries,
        } = counts;
        self.bar.set_message(format!(
            "{:.1}s/{:.1}s  {committed} committed  {refused} refused  {failed} failed  {retries} retries",
            shown.as_secs_f64(),
            self.total.as_secs_f64()
        ));
    }

    /// Shows the time `elapsed` into the run and a free-form note (for a run whose counts
    /// live in other processes).
    pub fn update_time(&self, elapsed: Duration, note: &str) {
        let shown = elapsed.min(self.total);
        self.bar
            .set_position(u64::try_from(shown.as_millis()).unwrap_or(u64::MAX));
        self.bar.set_message(format!(
            "{:.1}s/{:.1}s  {note}",
            shown.as_secs_f64(),
            self.total.as_secs_f64()
        ));
    }

    /// Removes the bar, leaving the terminal for the report.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
