//! The dispatcher: its own thread's loop over due deliveries, each attempt a task bounded by
//! its subscription's slots and an overall limit; what an attempt's outcome means (delivered,
//! retried on the `backoff` schedule, given up, or the subscription disabled by a 410), and
//! its record. Sending is `client`'s; what is held in memory is `tracking`'s.

use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backoff;
use super::client::{send, Failure};
use super::outbox::{Attempt, Ending};
use super::payload::Render;
use super::tracking::{now, Inner, Job};
use runledger_base::metrics::METRICS;
use runledger_domain::Timestamp;

/// Attempts in flight together, across subscriptions.
const MAX_IN_FLIGHT: usize = 64;
/// How often the dispatcher looks for owed deliveries it let go of.
const RESCAN_EVERY: Duration = Duration::from_secs(1);

impl Inner {
    /// One attempt of a delivery; returns the job again when another attempt follows.
    async fn attempt(&self, mut job: Job, render: &Render) -> Option<Job> {
        let owed = &job.owed;
        let Some(sub) = self
            .subscription(&owed.subscription)
            .filter(|s| !s.disabled.load(Ordering::Relaxed))
        else {
            self.end(owed);
            return None;
        };
        let number = job.attempts + 1;
        let started_at = now();
        let started = Instant::now();
        let id = owed.webhook_id();
        let result = match self.body(owed, render) {
            Ok(body) => send(sub, &id, body).await,
            Err(why) => Err(Failure::Payload(why)),
        };
        let took = started.elapsed();
        let (status, error, outcome) = match &result {
            Ok(status) if (200..300).contains(status) => (Some(*status), None, "delivered"),
            Ok(410) => (
                Some(410),
                Some("410 Gone: the subscription is disabled".to_string()),
                "gone",
            ),
            Ok(status) => (Some(*status), Some(format!("HTTP {status}")), "http_error"),
            Err(Failure::Refused(why)) => (None, Some(why.clone()), "refused"),
            Err(Failure::Transport(why)) => (None, Some(why.clone()), "error"),
            Err(Failure::Payload(why)) => (None, Some(why.clone()), "payload_error"),
        };
        METRICS.webhook_attempt(&sub.config.name, outcome, took);
        let retry = backoff::next_delay(sub.config.retry_initial, number);
        let ending = ending(outcome, number);
        let next_retry_at = (ending == Ending::Retrying)
            .then(|| Timestamp(now().0 + u64::try_from(retry.as_millis()).unwrap_or(u64::MAX)));
        if ending != Ending::Delivered {
            tracing::warn!(
                subscription = %sub.config.name,
                run_id = %owed.run_id,
                webhook_id = %id,
                r#type = owed.topic.as_str(),
                attempt = number,
                status = ?status,
                reason = error.as_deref().unwrap_or(""),
                ending = ending.as_str(),
                "webhook delivery attempt failed"
            );
        }
        let record = Attempt {
            topic: owed.topic.code(),
            attempt: number,
            at: started_at,
            status,
            error,
            latency_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            next_retry_at,
            ending,
        };
        if let Err(e) = self.trees.record(owed, &record) {
            tracing::error!(error = %e, "cannot record a webhook delivery attempt");
        }
        if ending == Ending::Disabled {
            sub.disabled.store(true, Ordering::Relaxed);
            if let Err(e) = self.trees.disable(&sub.config.name, &sub.fingerprint) {
                tracing::error!(error = %e, "cannot record that a webhook is disabled");
            }
            tracing::warn!(
                subscription = %sub.config.name,
                "webhook disabled: its receiver answered 410 Gone; its owed deliveries are \
                 dropped, and it stays disabled until its configuration changes"
            );
        }
        match ending {
            Ending::Retrying => {
                job.attempts = number;
                job.due = Instant::now() + retry;
                Some(job)
            }
            _ => {
                self.end(&job.owed);
                // A disabling must outlive a crash: the next start would call the receiver
                // that asked to hear no more. (Other endings may be lost to a crash: the
                // delivery is then repeated, which at least once allows.)
                if ending == Ending::Disabled {
                    if let Err(e) = self.store.sync().await {
                        tracing::error!(error = %e, "cannot make a webhook's disabling durable");
                    }
                }
                None
            }
        }
    }
}

/// How attempt `number` (from 1) with this outcome ends its delivery: a 2xx delivers, a 410
/// disables, a payload that cannot be made now never can, the schedule's last attempt gives up,
/// anything else is retried.
fn ending(outcome: &str, number: u32) -> Ending {
    match outcome {
        "delivered" => Ending::Delivered,
        "gone" => Ending::Disabled,
        "payload_error" => Ending::GaveUp,
        _ if number >= backoff::MAX_ATTEMPTS => Ending::GaveUp,
        _ => Ending::Retrying,
    }
}

/// The dispatcher: a schedule of due deliveries, each attempt a task bounded by the
/// subscription's slots and the overall limit.
pub(super) async fn dispatch(
    inner: Arc<Inner>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Job>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    render: Render,
) {
    let everything = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let mut schedule: BinaryHeap<std::cmp::Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut jobs: HashMap<u64, Job> = HashMap::new();
    let mut counter = 0u64;
    let mut rescan = tokio::time::interval(RESCAN_EVERY);
    let tasks = tokio::task::LocalSet::new();
    tasks
        .run_until(async move {
            loop {
                let next = schedule.peek().map(|std::cmp::Reverse((due, _))| *due);
                let due = async move {
                    match next {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = stop.changed() => return,
                    job = rx.recv() => {
                        let Some(job) = job else { return };
                        counter += 1;
                        schedule.push(std::cmp::Reverse((job.due, counter)));
                        jobs.insert(counter, job);
                    }
                    _ = due => {
                        let now = Instant::now();
                        while let Some(std::cmp::Reverse((at, n))) = schedule.peek().copied() {
                            if at > now {
                                break;
                            }
                            schedule.pop();
                            let Some(job) = jobs.remove(&n) else { continue };
                            let inner = inner.clone();
                            let render = render.clone();
                            let everything = everything.clone();
                            tokio::task::spawn_local(async move {
                                let slots = inner
                                    .subscription(&job.owed.subscription)
                                    .map(|s| s.slots.clone());
                                let _one = match slots {
                                    Some(slots) => slots.acquire_owned().await.ok(),
                                    None => None,
                                };
                                let _all = everything.acquire_owned().await.ok();
                                if let Some(again) = inner.attempt(job, &render).await {
                                    let _ = inner.tx.send(again);
                                }
                            });
                        }
                    }
                    _ = rescan.tick() => {
                        if inner.overflow.load(Ordering::Relaxed) != 0 {
                            let pass = inner.clone();
                            // A walk of the outbox reads sled; off this thread's loop.
                            let _ = tokio::task::spawn_blocking(move || pass.rescan()).await;
                        }
                    }
                }
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_attempt_of_the_schedule_gives_up_and_2xx_and_410_end_at_once() {
        for outcome in ["http_error", "refused", "error"] {
            for n in 1..backoff::MAX_ATTEMPTS {
                assert_eq!(ending(outcome, n), Ending::Retrying, "{outcome} {n}");
            }
            assert_eq!(ending(outcome, backoff::MAX_ATTEMPTS), Ending::GaveUp);
        }
        assert_eq!(ending("delivered", 1), Ending::Delivered);
        assert_eq!(
            ending("delivered", backoff::MAX_ATTEMPTS),
            Ending::Delivered
        );
        assert_eq!(ending("gone", 3), Ending::Disabled);
        assert_eq!(ending("payload_error", 1), Ending::GaveUp);
    }
}
