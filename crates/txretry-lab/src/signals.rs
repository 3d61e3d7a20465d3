//! Ctrl-C as the lab takes it.
//!
//! The first one asks the runs to finish the transactions in flight and report. Signals
//! that follow it within [`BURST`] are the same Ctrl-C: `timeout -s INT` sends one to the
//! lab and one to its process group a few milliseconds later, and a terminal sends one to
//! every process of the foreground group. Only a separate, later one means "quit now", and
//! even then the lab aborts the transactions in flight, drops its tables and removes its
//! temp dir before it exits (see [`quitting`]).

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

/// Interrupt signals, in the order they came. On Unix one signal stream lives as long as
/// this value, so a signal that arrives while nobody waits is still seen by the next wait.
pub struct CtrlC {
    #[cfg(unix)]
    stream: tokio::signal::unix::Signal,
}

impl CtrlC {
    /// Starts listening (SIGINT on Unix: from now on it no longer ends the process by
    /// itself). Call it inside the runtime.
    pub fn listen() -> std::io::Result<CtrlC> {
        Ok(CtrlC {
            #[cfg(unix)]
            stream: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?,
        })
    }

    /// Waits for the next signal; `false` when no more can come.
    pub async fn recv(&mut self) -> bool {
        #[cfg(unix)]
        {
            self.stream.recv().await.is_some()
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.is_ok()
        }
    }

    /// Waits for a signal that is not part of the burst that began at `first`; `false`
    /// when no more can come.
    pub async fn recv_after_burst(&mut self, first: Instant) -> bool {
        loop {
            if !self.recv().await {
                return false;
            }
            if first.elapsed() >= BURST {
                return true;
            }
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
        if !self.recv_after_burst(first).await {
            return;
        }
        eprintln!(
            "interrupted again: aborting the transactions in flight and cleaning up, then quitting"
        );
        QUIT_NOW.store(true, Ordering::Relaxed);
        quit();
    }
}
