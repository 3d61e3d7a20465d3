//! Ctrl-C as the lab takes it, and SIGTERM the same way.
//!
//! The first one asks the runs to finish the transactions in flight and report. Signals
//! that follow it within [`BURST`] are the same Ctrl-C: `timeout -s INT` sends one to the
//! lab and one to its process group a few milliseconds later, and a terminal sends one to
//! every process of the foreground group. Only a separate, later one means "quit now", and
//! even then the lab aborts the transactions in flight, drops its tables and removes its
//! temp dir before it exits (see [`quitting`]). SIGTERM (what `timeout`, `kill` and
//! `docker stop` send) counts as a Ctrl-C: without it the lab would die at once and leave
//! its tables and temp files behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Signals this close to the first one are part of the same Ctrl-C.
pub const BURST: Duration = Duration::from_millis(500);

/// Set once a second, separate Ctrl-C asked to quit now.
static QUIT_NOW: AtomicBool = AtomicBool::new(false);

/// Whether a second Ctrl-C asked to quit now: the runs abort their transactions in
/// flight, clean up, and print no report.
pub fn quitting() -> bool {
    QUIT_NOW.load(Ordering::Relaxed)
}

/// Interrupt signals (SIGINT, SIGTERM), in the order they came. On Unix the signal
/// streams live as long as this value, so a signal that arrives while nobody waits is still
/// seen by the next wait.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Starts listening (SIGINT and SIGTERM on Unix: from now on they no longer end the
    /// process by themselves). Call it inside the runtime.
    pub fn listen() -> std::io::Result<StopSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopSignals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(StopSignals {})
        }
    }

    /// Waits for the next signal; `false` when no more can come.
    pub async fn recv(&mut self) -> bool {
        #[cfg(unix)]
        {
            tokio::select! {
                got = self.interrupt.recv() => got.is_some(),
                got = self.terminate.recv() => got.is_some(),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.is_ok()
        }
    }

    /// The first Ctrl-C: runs `stop` at once; then a separate, later one: marks the lab as
    /// [`quitting`] and runs `quit`. Returns when both happened or no signal can come.
    pub async fn watch(mut self, stop: impl FnOnce(), quit: impl FnOnce()) {
        if !self.recv().await {
            return;
        }
        let first = Instant::now();
        eprintln!(
            "\ninterrupted: finishing the transactions in flight, then reporting (Ctrl-C again to quit now)"
        );
        stop();
        // The next signal that is not part of the first one's burst.
        loop {
            if !self.recv().await {
                return;
            }
            if first.elapsed() >= BURST {
                break;
            }
        }
        eprintln!(
            "interrupted again: aborting the transactions in flight and cleaning up, then quitting"
        );
        QUIT_NOW.store(true, Ordering::Relaxed);
        quit();
    }
}
