//! What a decision owes: the deliveries its events announce to the subscriptions that want
//! them, written to the outbox before the events, withdrawn if the events were refused, and
//! handed to the dispatcher once durable. It delivers nothing itself.

use std::sync::atomic::Ordering;

use super::handle::Webhooks;
use super::outbox::{self, Owed};
use super::tracking::owed_done;
use runledger_base::metrics::METRICS;
use runledger_domain::{Event, Run, RunId, Timestamp};
use runledger_store as store;

impl Webhooks {
    /// The deliveries a decision owes: for each event of `events` (the first at `first_seq`)
    /// that announces a topic, one per subscription that wants the topic and the run's team.
    /// Empty, without allocating, when no webhook is configured.
    pub fn owed(
        &self,
        current: Option<&Run>,
        new: Option<&Run>,
        id: RunId,
        first_seq: u64,
        at: Timestamp,
        events: &[Event],
    ) -> Vec<Owed> {
        let (Some(inner), Some(new)) = (&self.inner, new) else {
            return Vec::new();
        };
        let team = new.team.as_str();
        // A decision of one event (nearly all of them) needs no fold: the states before and
        // after it are at hand.
        let topics = match events {
            [event] => {
                runledger_domain::topics::topic(current.map(|r| r.state), event, Some(new.state))
                    .map(|t| vec![(0, t)])
                    .unwrap_or_default()
            }
            _ => runledger_domain::topics::topics(current, id, events, at),
        };
        let mut owed = Vec::new();
        for (i, topic) in topics {
            for sub in &inner.subscriptions {
                let hook = &sub.config;
                if hook.events.contains(&topic)
                    && (hook.teams.is_empty() || hook.teams.iter().any(|t| t == team))
                    && !sub.disabled.load(Ordering::Relaxed)
                {
                    owed.push(Owed {
                        at,
                        run_id: id,
                        seq: first_seq + i as u64,
                        subscription: hook.name.clone(),
                        topic,
                    });
                }
            }
        }
        owed
    }

    /// Writes owed deliveries to the outbox: before the events that owe them, after the store
    /// admitted the command (`Store::admit`). Not durable until the command's sync.
    pub fn write(&self, owed: &[Owed]) -> Result<(), store::Error> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        for o in owed {
            inner.trees.insert(o).map_err(|e| match e {
                outbox::Error::Sled(e) => store::Error::Sled(e),
                outbox::Error::Corrupt { tree, detail } => {
                    store::Error::CorruptRecord { tree, detail }
                }
            })?;
        }
        METRICS
            .webhook_owed
            .fetch_add(owed.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Takes back what `write` wrote for a command whose events were refused without reaching
    /// the log (their positions may be written by a later command).
    pub fn withdraw(&self, owed: &[Owed]) {
        let Some(inner) = &self.inner else {
            return;
        };
        for o in owed {
            if let Err(e) = inner.trees.remove(o) {
                tracing::warn!(error = %e, "cannot withdraw a webhook delivery; the next start drops it");
            } else {
                owed_done(1);
            }
        }
    }

    /// Hands durable owed deliveries to the dispatcher, in memory, never waiting: past its
    /// bound, they stay in the outbox for a rescan.
    pub fn hand_over(&self, owed: Vec<Owed>) {
        if let Some(inner) = &self.inner {
            for o in owed {
                inner.track(o, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::test_support::{owed, setup};
    use runledger_domain::{sample_created, RunAdmitted, Topic};

    #[test]
    fn without_subscriptions_nothing_is_owed_or_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut config, store, id) = setup(dir.path());
        config.webhooks.clear();
        let hooks = Webhooks::open(&config, &store).expect("open");
        assert!(!hooks.configured());
        let admitted = Event::Admitted(RunAdmitted::from_legacy(sample_created(1)));
        let run = runledger_domain::evolve(None, id, &admitted, Timestamp(1_000));
        let owed = hooks.owed(None, run.as_ref(), id, 0, Timestamp(1_000), &[admitted]);
        assert!(owed.is_empty() && owed.capacity() == 0);
        assert!(!store
            .db()
            .tree_names()
            .iter()
            .any(|n| n.as_ref() == outbox::OUTBOX.as_bytes()));
    }

    #[test]
    fn a_decision_owes_one_delivery_per_topic_and_wanting_subscription() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut config, store, id) = setup(dir.path());
        let mut other = config.webhooks[0].clone();
        other.name = "terminal".into();
        other.events = vec![Topic::Succeeded];
        let mut infra = config.webhooks[0].clone();
        infra.name = "infra".into();
        infra.teams = vec!["infra".into()];
        config.webhooks.extend([other, infra]);
        let hooks = Webhooks::open(&config, &store).expect("open");
        let admitted = Event::Admitted(RunAdmitted::from_legacy(sample_created(1)));
        let run = runledger_domain::evolve(None, id, &admitted, Timestamp(1_000));
        let owed = hooks.owed(None, run.as_ref(), id, 0, Timestamp(1_000), &[admitted]);
        // `terminal` does not want run.queued; `infra` wants another team's runs.
        assert_eq!(owed, [owed_for(id, "ci")]);
        assert_eq!(owed[0].webhook_id(), format!("msg_{id}_0_ci"));
    }

    fn owed_for(id: RunId, name: &str) -> Owed {
        owed(id, 0, name)
    }
}
