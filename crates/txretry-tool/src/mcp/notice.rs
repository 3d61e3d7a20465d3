//! A retry, as a client is told it: `notifications/message` and `notifications/progress`,
//! sent while the call runs.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use txretry_core::{Phase, RetryEvent, TransientKind};

use super::relay::Registration;

/// The logger name of the retry notifications (`notifications/message`).
pub const LOGGER: &str = "txretry";

/// A retry event, owned, with nothing of the error but its code: what a client is told.
#[derive(Debug)]
pub(super) struct Notice {
    tool: String,
    call_id: String,
    attempt: u32,
    max_attempts: u32,
    delay: Duration,
    kind: &'static str,
    code: Option<String>,
    phase: Phase,
}

impl Notice {
    pub(super) fn new(event: &RetryEvent<'_>) -> Notice {
        Notice {
            tool: event.tool.unwrap_or_default().to_owned(),
            call_id: event.call_id.unwrap_or_default().to_owned(),
            attempt: event.attempt,
            max_attempts: event.max_attempts,
            delay: event.delay,
            kind: event.kind().map_or("ambiguous", TransientKind::as_str),
            code: event.code.map(|code| code.to_string()),
            phase: event.phase,
        }
    }

    /// `cancel_order: attempt 1 of 5 failed (busy, SQLite code 5); retrying in 4ms`
    fn message(&self) -> String {
        let code = self
            .code
            .as_deref()
            .map(|code| format!(", {code}"))
            .unwrap_or_default();
        format!(
            "{}: attempt {} of {} failed ({}{code}); retrying in {:?}",
            self.tool, self.attempt, self.max_attempts, self.kind, self.delay
        )
    }

    fn data(&self) -> Value {
        json!({
            "message": self.message(),
            "event": "retry",
            "tool": self.tool,
            "call_id": self.call_id,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "kind": self.kind,
            "code": self.code,
            "phase": self.phase.to_string(),
            "delay_ms": u64::try_from(self.delay.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

/// Sends one call's retry notices to its client.
pub(super) struct Notifier {
    pub(super) peer: Peer<RoleServer>,
    pub(super) progress: Option<ProgressToken>,
    pub(super) level: Arc<AtomicU8>,
    pub(super) sent: u32,
}

impl Notifier {
    async fn send(&mut self, notice: Notice) {
        self.sent += 1;
        // A client that went away mid-call is not the call's problem: errors are ignored.
        if self.level.load(Ordering::Relaxed) <= rank(LoggingLevel::Warning) {
            let log = LoggingMessageNotificationParam::new(LoggingLevel::Warning, notice.data())
                .with_logger(LOGGER);
            let _ = self.peer.notify_logging_message(log).await;
        }
        if let Some(token) = &self.progress {
            let progress = ProgressNotificationParam::new(token.clone(), f64::from(self.sent))
                .with_message(notice.message());
            let _ = self.peer.notify_progress(progress).await;
        }
    }
}

/// Runs `call`, sending the notices that arrive meanwhile; the ones still queued when it
/// ends are sent before its result is returned.
pub(super) async fn relaying<T>(
    call: impl Future<Output = T>,
    relay: Option<(Registration, mpsc::UnboundedReceiver<Notice>)>,
    mut notifier: Notifier,
) -> T {
    let Some((_registration, mut notices)) = relay else {
        return call.await;
    };
    let mut call = pin!(call);
    loop {
        tokio::select! {
            biased;
            result = &mut call => {
                while let Ok(notice) = notices.try_recv() {
                    notifier.send(notice).await;
                }
                return result;
            }
            Some(notice) = notices.recv() => notifier.send(notice).await,
        }
    }
}

pub(super) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
