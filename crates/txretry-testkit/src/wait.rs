//! Bounds on waiting, so that a broken setup fails a coordinated test instead of hanging
//! it. These are guards, never timing assertions.

use std::fmt::Display;
use std::time::Duration;

/// Awaits `fut`, panicking with "test hung" if it takes more than 60 s.
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("test hung")
}

/// Calls `check` every 10 ms until it returns `true`; panics with `what` (what never
/// happened) after 3000 tries (about 30 s).
pub async fn poll_until(what: impl Display, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..3000 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}");
}
