//! How long to wait between attempts: the base curve and the jitter applied to it.

use std::time::Duration;

/// The base wait after the N-th failed attempt (N is 1-based), before jitter and cap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backoff {
    /// Retry at once.
    None,
    /// Always the same wait.
    Constant(Duration),
    /// `step × N`: 150 ms, 300 ms, 450 ms, … for a 150 ms step.
    Linear(Duration),
    /// `initial × factor^(N-1)`.
    Exponential {
        /// The first wait.
        initial: Duration,
        /// Growth per attempt; at least 1.
        factor: f64,
    },
}

impl Backoff {
    /// The wait after failed attempt `attempt` (1-based), saturating instead of overflowing.
    pub fn delay(&self, attempt: u32) -> Duration {
        let n = attempt.max(1);
        match *self {
            Backoff::None => Duration::ZERO,
            Backoff::Constant(d) => d,
            Backoff::Linear(step) => step.saturating_mul(n),
            // Exact: through f64 seconds a large initial comes back a few ns off, and the
            // builder compares `max_delay` with it.
            Backoff::Exponential { initial, .. } if n == 1 => initial,
            Backoff::Exponential { initial, factor } => {
                let exp = i32::try_from(n - 1).unwrap_or(i32::MAX);
                seconds(initial.as_secs_f64() * factor.powi(exp))
            }
        }
    }

    /// The first wait, the one `max_delay` must not be below.
    pub(crate) fn initial(&self) -> Duration {
        self.delay(1)
    }
}

/// Randomisation applied to each wait, so that transactions that collided once do not
/// collide again in lockstep.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Jitter {
    /// The wait as computed.
    #[default]
    None,
    /// Uniform in `0..=wait`.
    Full,
    /// Uniform in `wait × (1 - f) ..= wait × (1 + f)`, `f` in `0..=1`.
    Proportional(f64),
}

impl Jitter {
    /// Applies the jitter to `delay` (already capped), never past `cap`, with `unit` a
    /// random number in `0..1`. Proportional jitter whose upper end would pass the cap is
    /// drawn from the part of its range below the cap, so waits at the cap do not all land
    /// on exactly the cap, in lockstep.
    pub(crate) fn apply(self, delay: Duration, cap: Option<Duration>, unit: f64) -> Duration {
        let d = delay.as_secs_f64();
        let jittered = match self {
            Jitter::None => delay,
            Jitter::Full => seconds(d * unit),
            Jitter::Proportional(f) => {
                let low = d * (1.0 - f);
                let high = d * (1.0 + f);
                let high = cap.map_or(high, |cap| high.min(cap.as_secs_f64()));
                seconds(low + (high - low) * unit)
            }
        };
        // The arithmetic is in f64 seconds: for caps of about 1e7 s and up, the round trip
        // back to a Duration can land a few nanoseconds above the cap.
        cap.map_or(jittered, |cap| jittered.min(cap))
    }
}

/// Seconds to a `Duration`, saturating: never panics on huge or odd values.
fn seconds(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn linear_grows_by_one_step_per_attempt() {
        let b = Backoff::Linear(150 * MS);
        assert_eq!(
            [b.delay(1), b.delay(2), b.delay(3)],
            [150 * MS, 300 * MS, 450 * MS]
        );
    }

    #[test]
    fn exponential_multiplies_by_the_factor() {
        let b = Backoff::Exponential {
            initial: 10 * MS,
            factor: 2.0,
        };
        assert_eq!(
            [b.delay(1), b.delay(2), b.delay(4)],
            [10 * MS, 20 * MS, 80 * MS]
        );
    }

    #[test]
    fn huge_values_saturate_instead_of_panicking() {
        let b = Backoff::Exponential {
            initial: Duration::from_secs(1),
            factor: 10.0,
        };
        assert_eq!(b.delay(u32::MAX), Duration::MAX);
        assert_eq!(Backoff::Linear(Duration::MAX).delay(3), Duration::MAX);
    }
}
