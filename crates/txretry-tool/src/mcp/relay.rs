//! The toolbox's retry events, carried to the MCP calls they belong to.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;
use txretry_core::RetryEvent;

use super::NEXT;
#[cfg(doc)]
use super::ToolboxServer;
use super::notice::Notice;

/// Carries the toolbox's retry events to the MCP calls they belong to.
///
/// Install [`hook`](RetryRelay::hook) as the toolbox's `on_retry` (or call
/// [`forward`](RetryRelay::forward) from your own hook) and hand the relay to
/// [`ToolboxServer::with_relay`]. Every `tools/call` registers its call id here for as long as
/// it runs; an event is forwarded to the call whose id it carries, and dropped when no MCP
/// call has that id (a call made by other code). Cheap to clone; clones share the calls.
#[derive(Clone, Default)]
pub struct RetryRelay {
    calls: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Notice>>>>,
}

impl RetryRelay {
    /// A relay with no calls registered.
    pub fn new() -> Self {
        RetryRelay::default()
    }

    /// Forwards a retry event to the MCP call whose call id it carries, if one is running.
    /// Never blocks (the event is queued for the call's request handler to send).
    pub fn forward(&self, event: &RetryEvent<'_>) {
        let Some(call_id) = event.call_id else {
            return;
        };
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = calls.get(call_id) {
            // The call may have just ended: then nobody is listening, which is fine.
            let _ = sender.send(Notice::new(event));
        }
    }

    /// A hook for `ToolboxBuilder::on_retry` that forwards every event.
    pub fn hook(&self) -> impl Fn(&RetryEvent<'_>) + Send + Sync + 'static {
        let relay = self.clone();
        move |event| relay.forward(event)
    }

    /// Registers `call_id` (made unique if it is taken) until the registration is dropped.
    pub(super) fn register(
        &self,
        call_id: String,
    ) -> (Registration, mpsc::UnboundedReceiver<Notice>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let mut id = call_id;
        while calls.contains_key(&id) {
            id = format!("{id}#{}", NEXT.fetch_add(1, Ordering::Relaxed));
        }
        calls.insert(id.clone(), sender);
        let registration = Registration {
            relay: self.clone(),
            call_id: id,
        };
        (registration, receiver)
    }
}

impl fmt::Debug for RetryRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("RetryRelay")
            .field("calls", &calls.len())
            .finish()
    }
}

/// A call's place in the relay; removed when the call ends or is dropped.
pub(super) struct Registration {
    relay: RetryRelay,
    pub(super) call_id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut calls = self
            .relay
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        calls.remove(&self.call_id);
    }
}
