//! The progress bar on stderr while a run goes on. indicatif draws nothing when stderr is
//! not a terminal, so pipes and tests see no bar.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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

    /// Shows the time `elapsed` into the run and `note`: the live counts, in the words and
    /// order of the report (business refusals apart from failures, which alone are
    /// transactions lost), or what other processes have reported.
    pub fn update(&self, elapsed: Duration, note: &str) {
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
