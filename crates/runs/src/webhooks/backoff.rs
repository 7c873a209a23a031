//! The retry schedule of a delivery: exponential backoff with jitter, over more than 24 hours.
//!
//! The delay after attempt `n` (from 1) is `min(initial × 2^(n−1), MAX_DELAY)` stretched by a
//! random factor in `[1, 1.25)`. Jitter only lengthens a delay, so the schedule's floor (the
//! sum without jitter) is what the 24 hours are measured against: with the default 5 s start,
//! the delays are 5 s, 10 s, 20 s … 85 min (attempts 1–11), then 2 h each, and attempt
//! `MAX_ATTEMPTS` (23) comes at least 24 h 50 min after the first. After it the delivery ends
//! as failed.

use std::time::Duration;

/// The longest delay between two attempts (before jitter).
pub const MAX_DELAY: Duration = Duration::from_secs(2 * 3600);

/// Attempts of one delivery before it is given up.
pub const MAX_ATTEMPTS: u32 = 23;

/// The delay before the attempt after attempt `attempt` (from 1), without jitter.
pub fn base_delay(initial: Duration, attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(30);
    initial
        .checked_mul(1u32 << doublings)
        .unwrap_or(MAX_DELAY)
        .min(MAX_DELAY)
}

/// The delay before the next attempt, `jitter` in `[0, 1)` choosing the stretch.
pub fn delay(initial: Duration, attempt: u32, jitter: f64) -> Duration {
    base_delay(initial, attempt).mul_f64(1.0 + 0.25 * jitter.clamp(0.0, 1.0))
}

/// The delay before the next attempt, with a random jitter.
pub fn next_delay(initial: Duration, attempt: u32) -> Duration {
    delay(initial, attempt, rand::random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Duration =
        Duration::from_millis(runledger_config::DEFAULT_WEBHOOK_RETRY_INITIAL_MS);

    #[test]
    fn the_default_schedule_covers_more_than_a_day_even_at_its_shortest() {
        let floor: Duration = (1..MAX_ATTEMPTS).map(|n| base_delay(DEFAULT, n)).sum();
        assert!(floor >= Duration::from_secs(24 * 3600), "{floor:?}");
        // … and not absurdly more: the last attempt within about 31 hours.
        let ceiling: Duration = (1..MAX_ATTEMPTS).map(|n| delay(DEFAULT, n, 1.0)).sum();
        assert!(ceiling <= Duration::from_secs(32 * 3600), "{ceiling:?}");
    }

    #[test]
    fn delays_double_up_to_the_cap() {
        assert_eq!(base_delay(DEFAULT, 1), Duration::from_secs(5));
        assert_eq!(base_delay(DEFAULT, 2), Duration::from_secs(10));
        assert_eq!(base_delay(DEFAULT, 11), Duration::from_secs(5 * 1024));
        assert_eq!(base_delay(DEFAULT, 12), MAX_DELAY);
        assert_eq!(base_delay(DEFAULT, 1000), MAX_DELAY);
        assert_eq!(base_delay(Duration::from_secs(3600), 40), MAX_DELAY);
    }

    #[test]
    fn jitter_stays_within_a_quarter_above_the_base() {
        for attempt in 1..=MAX_ATTEMPTS {
            let base = base_delay(DEFAULT, attempt);
            for _ in 0..200 {
                let d = next_delay(DEFAULT, attempt);
                assert!(d >= base && d < base.mul_f64(1.25) + Duration::from_nanos(1));
            }
            assert_eq!(delay(DEFAULT, attempt, 0.0), base);
        }
    }

    #[test]
    fn a_short_test_schedule_keeps_its_shape() {
        let fast = Duration::from_millis(50);
        assert_eq!(base_delay(fast, 1), Duration::from_millis(50));
        assert_eq!(base_delay(fast, 3), Duration::from_millis(200));
    }
}
