//! Per-API-key request rate limiting: one token bucket per authenticated key, kept in memory in
//! a sharded map. It owns the bucket arithmetic (pure, with time passed in as a value so tests
//! need no clock) and the map's eviction of idle buckets; it knows nothing of HTTP, which
//! `http/charge.rs` adds (the 429 and its `Retry-After`). Buckets are not persisted: a restart
//! gives every key a full bucket, which errs on the side of serving.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use runledger_config::RateLimit;

/// Float rounding can leave a bucket a hair under one token at exactly the moment a client was
/// told to come back; that client must not be refused a second time.
const EPSILON: f64 = 1e-9;

/// Enough shards that concurrent requests of different keys rarely meet on one lock.
const SHARDS: usize = 32;

/// How often a shard drops its full buckets.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// One key's bucket: its level at the instant `at` (time since the limiter's epoch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    tokens: f64,
    at: Duration,
}

impl Bucket {
    /// A bucket as a key that was never seen has it: full.
    pub fn full(rate: RateLimit, now: Duration) -> Bucket {
        Bucket {
            tokens: f64::from(rate.burst),
            at: now,
        }
    }

    /// The level at `now`: refilled at `per_sec`, never above `burst`. A `now` earlier than the
    /// last update counts as no time passed.
    fn level(&self, rate: RateLimit, now: Duration) -> f64 {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        (self.tokens + elapsed * rate.per_sec).min(f64::from(rate.burst))
    }

    /// Takes one token, or answers how long until one is there (and takes nothing).
    pub fn take(&mut self, rate: RateLimit, now: Duration) -> Result<(), Duration> {
        let level = self.level(rate, now);
        if level + EPSILON >= 1.0 {
            self.tokens = (level - 1.0).max(0.0);
            self.at = self.at.max(now);
            return Ok(());
        }
        let wait = (1.0 - level) / rate.per_sec;
        Err(Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX))
    }

    /// A full bucket behaves exactly like a missing one, so it can be dropped.
    pub fn is_full(&self, rate: RateLimit, now: Duration) -> bool {
        self.level(rate, now) >= f64::from(rate.burst)
    }
}

/// Whole seconds for `Retry-After`: rounded up, so a client that waits that long finds a token,
/// and at least 1, because `Retry-After: 0` invites an immediate retry that would fail again.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait
        .as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0));
    secs.max(1)
}

#[derive(Debug, Default)]
struct Shard {
    buckets: HashMap<Box<str>, Bucket>,
    swept_at: Duration,
}

/// The buckets of every key, sharded by key id.
#[derive(Debug)]
pub struct RateLimiter {
    rate: RateLimit,
    epoch: Instant,
    hasher: std::collections::hash_map::RandomState,
    shards: Box<[Mutex<Shard>]>,
    refused: AtomicU64,
}

impl RateLimiter {
    pub fn new(rate: RateLimit) -> RateLimiter {
        RateLimiter {
            rate,
            epoch: Instant::now(),
            hasher: Default::default(),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            refused: AtomicU64::new(0),
        }
    }

    pub fn rate(&self) -> RateLimit {
        self.rate
    }

    /// Requests refused since start, for `/metrics`.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Charges one request to `key`; on refusal, how long until it would be accepted.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        self.check_at(key, self.epoch.elapsed())
    }

    /// `check` at a given time since the limiter's epoch.
    pub fn check_at(&self, key: &str, now: Duration) -> Result<(), Duration> {
        let index = (self.hasher.hash_one(key) % SHARDS as u64) as usize;
        let mut shard = self.shards[index].lock();
        if now.saturating_sub(shard.swept_at) >= SWEEP_EVERY {
            // Dropping a full bucket changes no answer, and keeps the map from holding every
            // key that ever made a request (revoked ones included).
            let rate = self.rate;
            shard.buckets.retain(|_, b| !b.is_full(rate, now));
            shard.swept_at = now;
        }
        let result = match shard.buckets.get_mut(key) {
            Some(bucket) => bucket.take(self.rate, now),
            None => {
                let mut bucket = Bucket::full(self.rate, now);
                let result = bucket.take(self.rate, now);
                shard.buckets.insert(key.into(), bucket);
                result
            }
        };
        drop(shard);
        if result.is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Buckets held, for tests of eviction.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().buckets.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: RateLimit = RateLimit {
        per_sec: 2.0,
        burst: 3,
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_full_bucket_serves_a_burst_then_refuses_with_the_wait_for_one_token() {
        let mut b = Bucket::full(RATE, ms(0));
        for _ in 0..3 {
            assert_eq!(b.take(RATE, ms(0)), Ok(()));
        }
        // Empty: one token comes after 1 / 2 s.
        assert_eq!(b.take(RATE, ms(0)), Err(ms(500)));
        // A refusal takes nothing: 250 ms later the wait is 250 ms shorter.
        assert_eq!(b.take(RATE, ms(250)), Err(ms(250)));
    }

    #[test]
    fn tokens_come_back_at_the_rate_and_never_beyond_the_burst() {
        let mut b = Bucket::full(RATE, ms(0));
        for _ in 0..3 {
            assert!(b.take(RATE, ms(0)).is_ok());
        }
        // After exactly the announced wait, a token is there.
        assert_eq!(b.take(RATE, ms(500)), Ok(()));
        assert!(b.take(RATE, ms(500)).is_err());
        // An hour idle refills to the burst, not to 7200 tokens.
        let later = ms(3_600_500);
        assert!(b.is_full(RATE, later));
        for _ in 0..3 {
            assert!(b.take(RATE, later).is_ok());
        }
        assert!(b.take(RATE, later).is_err());
    }

    #[test]
    fn time_going_backwards_refills_nothing() {
        let mut b = Bucket::full(RATE, ms(1000));
        for _ in 0..3 {
            assert!(b.take(RATE, ms(1000)).is_ok());
        }
        assert_eq!(b.take(RATE, ms(10)), Err(ms(500)));
    }

    #[test]
    fn waiting_the_rounded_up_retry_after_always_finds_a_token() {
        // Rates whose token interval is not a whole number of seconds or of nanoseconds.
        for per_sec in [0.3, 0.7, 1.0, 3.0, 7.0, 1000.0] {
            let rate = RateLimit { per_sec, burst: 1 };
            let mut b = Bucket::full(rate, ms(0));
            let mut now = ms(0);
            for _ in 0..50 {
                match b.take(rate, now) {
                    Ok(()) => now += ms(1),
                    Err(wait) => {
                        now += Duration::from_secs(retry_after_secs(wait));
                        assert_eq!(b.take(rate, now), Ok(()), "rate {per_sec} at {now:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(ms(1)), 1);
        assert_eq!(retry_after_secs(ms(1000)), 1);
        assert_eq!(retry_after_secs(ms(1001)), 2);
        assert_eq!(retry_after_secs(Duration::MAX), u64::MAX);
    }

    #[test]
    fn tiny_rates_give_long_waits_without_overflow() {
        let rate = RateLimit {
            per_sec: 1e-300,
            burst: 1,
        };
        let mut b = Bucket::full(rate, ms(0));
        assert!(b.take(rate, ms(0)).is_ok());
        assert_eq!(b.take(rate, ms(0)), Err(Duration::MAX));
    }

    #[test]
    fn keys_have_their_own_buckets() {
        let limiter = RateLimiter::new(RATE);
        for _ in 0..3 {
            assert!(limiter.check_at("a", ms(0)).is_ok());
        }
        assert!(limiter.check_at("a", ms(0)).is_err());
        assert!(limiter.check_at("b", ms(0)).is_ok());
        assert_eq!(limiter.refused(), 1);
    }

    #[test]
    fn idle_keys_are_evicted_and_busy_ones_kept() {
        let limiter = RateLimiter::new(RATE);
        for i in 0..1000 {
            assert!(limiter.check_at(&format!("idle-{i}"), ms(0)).is_ok());
        }
        assert_eq!(limiter.len(), 1000);
        // Drain "busy" so its bucket is far from full at the sweep.
        let sweep = SWEEP_EVERY;
        for _ in 0..3 {
            assert!(limiter.check_at("busy", sweep).is_ok());
        }
        // Every shard sweeps on its next use after SWEEP_EVERY; touch them all.
        for i in 0..1000 {
            let _ = limiter.check_at(&format!("probe-{i}"), sweep + ms(1));
        }
        // The idle keys (full again for a minute) are gone; the probes' own buckets (just
        // used, so not full) and "busy" remain.
        assert_eq!(limiter.len(), 1001);
        assert!(limiter.check_at("busy", sweep + ms(1)).is_err());
    }
}
