//! The durable records of webhooks, in three sled trees of the store's database:
//!
//! - `webhook_outbox`: one entry per owed delivery, `at(8, BE) ‖ run_id(16) ‖ seq(8, BE) ‖
//!   subscription` → topic code. Written before the events that owe it, removed when the
//!   delivery ends. Keys sort by the event's time, so a scan finds the oldest debt first.
//! - `webhook_attempts`: one record per attempt, `run_id(16) ‖ seq(8, BE) ‖ subscription ‖ 0 ‖
//!   attempt(4, BE)` → postcard `Attempt`; a run's records are one key range. A delivery keeps
//!   its first attempt and its latest `KEPT_PER_DELIVERY − 1`, and a run at most
//!   `KEPT_PER_RUN` records (its oldest deliveries' records go first).
//! - `webhook_disabled`: subscription → the fingerprint of the configuration a 410 Gone
//!   disabled; a different configuration under the same name is enabled again.

use serde::{Deserialize, Serialize};

use runledger_domain::{RunId, Timestamp, Topic};

pub const OUTBOX: &str = "webhook_outbox";
pub const ATTEMPTS: &str = "webhook_attempts";
pub const DISABLED: &str = "webhook_disabled";

/// Attempt records kept per delivery: its first and its latest ones.
pub const KEPT_PER_DELIVERY: u32 = 10;
/// Attempt records kept per run, across its deliveries.
pub const KEPT_PER_RUN: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt record in tree {tree}: {detail}")]
    Corrupt { tree: &'static str, detail: String },
}

/// One delivery owed: an event of a run, the topic it announces, to one subscription.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owed {
    /// The event's time.
    pub at: Timestamp,
    pub run_id: RunId,
    pub seq: u64,
    pub subscription: String,
    pub topic: Topic,
}

impl Owed {
    /// The outbox key.
    pub fn key(&self) -> Vec<u8> {
        let mut key = Vec::with_capacity(32 + self.subscription.len());
        key.extend_from_slice(&self.at.0.to_be_bytes());
        key.extend_from_slice(&self.run_id.to_bytes());
        key.extend_from_slice(&self.seq.to_be_bytes());
        key.extend_from_slice(self.subscription.as_bytes());
        key
    }

    /// The outbox entry's value.
    pub fn value(&self) -> [u8; 1] {
        [self.topic.code()]
    }

    pub fn from_entry(key: &[u8], value: &[u8]) -> Result<Owed, Error> {
        let corrupt = |detail: String| Error::Corrupt {
            tree: OUTBOX,
            detail,
        };
        let fixed = |range: std::ops::Range<usize>| {
            key.get(range)
                .ok_or_else(|| corrupt(format!("key of {} bytes", key.len())))
        };
        let at: [u8; 8] = fixed(0..8)?
            .try_into()
            .map_err(|_| corrupt("time".into()))?;
        let id: [u8; 16] = fixed(8..24)?
            .try_into()
            .map_err(|_| corrupt("run id".into()))?;
        let seq: [u8; 8] = fixed(24..32)?
            .try_into()
            .map_err(|_| corrupt("seq".into()))?;
        let subscription = std::str::from_utf8(&key[32..])
            .map_err(|_| corrupt("subscription name not UTF-8".into()))?
            .to_string();
        let topic = value
            .first()
            .and_then(|c| Topic::from_code(*c))
            .ok_or_else(|| corrupt(format!("topic {value:?}")))?;
        Ok(Owed {
            at: Timestamp(u64::from_be_bytes(at)),
            run_id: RunId::from_bytes(id),
            seq: u64::from_be_bytes(seq),
            subscription,
            topic,
        })
    }

    /// The delivery's `webhook-id`: the same on every attempt and after a restart.
    pub fn webhook_id(&self) -> String {
        webhook_id(self.run_id, self.seq, &self.subscription)
    }

    /// The prefix of this delivery's attempt records.
    fn attempts_prefix(&self) -> Vec<u8> {
        let mut key = Vec::with_capacity(26 + self.subscription.len());
        key.extend_from_slice(&self.run_id.to_bytes());
        key.extend_from_slice(&self.seq.to_be_bytes());
        key.extend_from_slice(self.subscription.as_bytes());
        key.push(0);
        key
    }
}

/// `msg_<run id>_<seq>_<subscription>`.
pub fn webhook_id(run_id: RunId, seq: u64, subscription: &str) -> String {
    format!("msg_{run_id}_{seq}_{subscription}")
}

/// How an attempt ended for its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ending {
    /// Another attempt follows at `next_retry_at`.
    Retrying,
    /// 2xx: the delivery is over.
    Delivered,
    /// 410 Gone: the subscription is disabled and the delivery over.
    Disabled,
    /// The last attempt of the schedule failed: the delivery is given up.
    GaveUp,
    /// The subscription was disabled (or removed) before this attempt; nothing was sent.
    Dropped,
}

impl Ending {
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Retrying => "retrying",
            Ending::Delivered => "delivered",
            Ending::Disabled => "disabled",
            Ending::GaveUp => "gave_up",
            Ending::Dropped => "dropped",
        }
    }
}

/// One attempt as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub topic: u8,
    /// From 1.
    pub attempt: u32,
    /// When it began.
    pub at: Timestamp,
    /// The receiver's HTTP status, if it answered.
    pub status: Option<u16>,
    /// Why it failed without an answer (or why the answer was a failure).
    pub error: Option<String>,
    pub latency_ms: u64,
    pub next_retry_at: Option<Timestamp>,
    pub ending: Ending,
}

/// One delivery with its recorded attempts, oldest first.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub webhook_id: String,
    pub subscription: String,
    pub seq: u64,
    pub topic: Option<Topic>,
    pub attempts: Vec<Attempt>,
}

/// The webhook trees.
#[derive(Clone)]
pub struct Trees {
    pub outbox: sled::Tree,
    attempts: sled::Tree,
    disabled: sled::Tree,
}

impl Trees {
    pub fn open(db: &sled::Db) -> Result<Trees, Error> {
        Ok(Trees {
            outbox: db.open_tree(OUTBOX)?,
            attempts: db.open_tree(ATTEMPTS)?,
            disabled: db.open_tree(DISABLED)?,
        })
    }

    pub fn insert(&self, owed: &Owed) -> Result<(), Error> {
        self.outbox.insert(owed.key(), &owed.value())?;
        Ok(())
    }

    pub fn remove(&self, owed: &Owed) -> Result<(), Error> {
        self.outbox.remove(owed.key())?;
        Ok(())
    }

    /// Every owed delivery from `from` (a key) on, in key order.
    pub fn scan(&self, from: &[u8]) -> impl Iterator<Item = Result<(Vec<u8>, Owed), Error>> + '_ {
        self.outbox.range(from.to_vec()..).map(|item| {
            let (k, v) = item?;
            let owed = Owed::from_entry(&k, &v)?;
            Ok((k.to_vec(), owed))
        })
    }

    pub fn owed_count(&self) -> usize {
        self.outbox.len()
    }

    /// Records an attempt, keeping the delivery's and the run's records within their bounds.
    pub fn record(&self, owed: &Owed, attempt: &Attempt) -> Result<(), Error> {
        let prefix = owed.attempts_prefix();
        let mut key = prefix.clone();
        key.extend_from_slice(&attempt.attempt.to_be_bytes());
        let value = postcard::to_allocvec(attempt).map_err(|e| Error::Corrupt {
            tree: ATTEMPTS,
            detail: e.to_string(),
        })?;
        self.attempts.insert(key, value)?;
        // The first attempt stays; of the rest, the latest ones.
        let old = attempt.attempt.saturating_sub(KEPT_PER_DELIVERY - 1);
        if old > 1 {
            let mut stale = prefix;
            stale.extend_from_slice(&old.to_be_bytes());
            self.attempts.remove(stale)?;
        }
        let run = owed.run_id.to_bytes();
        let kept = self.attempts.scan_prefix(run).keys().count();
        if kept > KEPT_PER_RUN {
            let excess: Vec<sled::IVec> = self
                .attempts
                .scan_prefix(run)
                .keys()
                .take(kept - KEPT_PER_RUN)
                .collect::<Result<_, _>>()?;
            for k in excess {
                self.attempts.remove(k)?;
            }
        }
        Ok(())
    }

    /// The last recorded attempt number of a delivery (0 if none), so that a restart goes on
    /// counting.
    pub fn last_attempt(&self, owed: &Owed) -> Result<u32, Error> {
        Ok(
            match self
                .attempts
                .scan_prefix(owed.attempts_prefix())
                .keys()
                .next_back()
            {
                Some(k) => {
                    let k = k?;
                    let tail: [u8; 4] =
                        k[k.len().saturating_sub(4)..]
                            .try_into()
                            .map_err(|_| Error::Corrupt {
                                tree: ATTEMPTS,
                                detail: format!("key of {} bytes", k.len()),
                            })?;
                    u32::from_be_bytes(tail)
                }
                None => 0,
            },
        )
    }

    /// A run's deliveries with their recorded attempts, in the order of the run's events.
    pub fn deliveries(&self, run_id: RunId) -> Result<Vec<Delivery>, Error> {
        let corrupt = |detail: String| Error::Corrupt {
            tree: ATTEMPTS,
            detail,
        };
        let mut out: Vec<Delivery> = Vec::new();
        for item in self.attempts.scan_prefix(run_id.to_bytes()) {
            let (k, v) = item?;
            let seq: [u8; 8] = k
                .get(16..24)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| corrupt(format!("key of {} bytes", k.len())))?;
            let seq = u64::from_be_bytes(seq);
            let name = k
                .get(24..k.len().saturating_sub(5))
                .and_then(|n| std::str::from_utf8(n).ok())
                .ok_or_else(|| corrupt("subscription name".into()))?;
            let attempt: Attempt = postcard::from_bytes(&v).map_err(|e| corrupt(e.to_string()))?;
            match out.last_mut() {
                Some(d) if d.seq == seq && d.subscription == name => d.attempts.push(attempt),
                _ => out.push(Delivery {
                    webhook_id: webhook_id(run_id, seq, name),
                    subscription: name.to_string(),
                    seq,
                    topic: Topic::from_code(attempt.topic),
                    attempts: vec![attempt],
                }),
            }
        }
        Ok(out)
    }

    /// Whether the subscription was disabled by a 410 under this configuration.
    pub fn is_disabled(&self, name: &str, fingerprint: &[u8; 32]) -> Result<bool, Error> {
        Ok(self
            .disabled
            .get(name)?
            .is_some_and(|v| v.as_ref() == fingerprint))
    }

    pub fn disable(&self, name: &str, fingerprint: &[u8; 32]) -> Result<(), Error> {
        self.disabled.insert(name, &fingerprint[..])?;
        Ok(())
    }

    /// Forgets a disabling made under another configuration.
    pub fn enable(&self, name: &str) -> Result<(), Error> {
        self.disabled.remove(name)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owed(seq: u64, name: &str) -> Owed {
        Owed {
            at: Timestamp(1_700_000_000_000 + seq),
            run_id: RunId::new(Timestamp(1_700_000_000_000), 7),
            seq,
            subscription: name.into(),
            topic: Topic::Succeeded,
        }
    }

    fn attempt(n: u32) -> Attempt {
        Attempt {
            topic: Topic::Succeeded.code(),
            attempt: n,
            at: Timestamp(n.into()),
            status: Some(500),
            error: None,
            latency_ms: 1,
            next_retry_at: None,
            ending: Ending::Retrying,
        }
    }

    #[test]
    fn outbox_keys_round_trip_and_sort_by_time() {
        let a = owed(3, "ci-hook");
        assert_eq!(Owed::from_entry(&a.key(), &a.value()).expect("decodes"), a);
        let mut later = owed(1, "a");
        later.at = Timestamp(a.at.0 + 1);
        assert!(a.key() < later.key());
        assert!(Owed::from_entry(&a.key()[..20], &a.value()).is_err());
        assert!(Owed::from_entry(&a.key(), &[99]).is_err());
    }

    #[test]
    fn attempts_are_bounded_per_delivery_keeping_the_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .temporary(true)
            .path(dir.path())
            .open()
            .expect("sled");
        let trees = Trees::open(&db).expect("trees");
        let d = owed(2, "ci");
        for n in 1..=25 {
            trees.record(&d, &attempt(n)).expect("record");
        }
        assert_eq!(trees.last_attempt(&d).expect("last"), 25);
        let listed = trees.deliveries(d.run_id).expect("list");
        assert_eq!(listed.len(), 1);
        let numbers: Vec<u32> = listed[0].attempts.iter().map(|a| a.attempt).collect();
        assert_eq!(numbers, [1, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
        assert_eq!(listed[0].webhook_id, d.webhook_id());
        assert_eq!(listed[0].subscription, "ci");
    }

    #[test]
    fn attempts_are_bounded_per_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .temporary(true)
            .path(dir.path())
            .open()
            .expect("sled");
        let trees = Trees::open(&db).expect("trees");
        for seq in 0..(KEPT_PER_RUN as u64 + 20) {
            trees.record(&owed(seq, "ci"), &attempt(1)).expect("record");
        }
        let listed = trees.deliveries(owed(0, "ci").run_id).expect("list");
        assert_eq!(listed.len(), KEPT_PER_RUN);
        // The oldest deliveries' records went first.
        assert_eq!(listed[0].seq, 20);
    }

    #[test]
    fn a_disabling_holds_for_its_configuration_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .temporary(true)
            .path(dir.path())
            .open()
            .expect("sled");
        let trees = Trees::open(&db).expect("trees");
        trees.disable("ci", &[1; 32]).expect("disable");
        assert!(trees.is_disabled("ci", &[1; 32]).expect("read"));
        assert!(!trees.is_disabled("ci", &[2; 32]).expect("read"));
        trees.enable("ci").expect("enable");
        assert!(!trees.is_disabled("ci", &[1; 32]).expect("read"));
    }
}
