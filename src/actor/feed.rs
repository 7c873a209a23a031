//! Live notice of durable events, for clients following a run (the SSE form of the events
//! endpoint). A run's actor publishes the run's new event count once its events are durable
//! (and handed to the projector, so `Runs::get` already shows them); followers wake up and
//! read the new events from the log themselves. Notices carry no events, so a slow follower
//! cannot make the service buffer anything: it reads whatever is new when it gets round to it.
//! Runs nobody follows have no entry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::domain::RunId;

#[derive(Default)]
pub struct Feed {
    followed: Mutex<HashMap<RunId, watch::Sender<u64>>>,
}

impl Feed {
    fn followed(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, watch::Sender<u64>>> {
        self.followed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the run's followers (if any) that its first `next_seq` events are durable.
    pub fn publish(&self, id: RunId, next_seq: u64) {
        if let Some(tx) = self.followed().get(&id) {
            tx.send_if_modified(|seen| {
                let newer = next_seq > *seen;
                *seen = (*seen).max(next_seq);
                newer
            });
        }
    }

    /// Starts following a run; the subscription ends (and its entry goes) when dropped.
    pub fn subscribe(self: &Arc<Self>, id: RunId) -> Subscription {
        let rx = self
            .followed()
            .entry(id)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        Subscription {
            feed: self.clone(),
            id,
            rx: Some(rx),
        }
    }
}

pub struct Subscription {
    feed: Arc<Feed>,
    id: RunId,
    rx: Option<watch::Receiver<u64>>,
}

impl Subscription {
    /// Waits for the next notice. Never returns while the feed lives, except with a notice.
    pub async fn changed(&mut self) {
        match self.rx.as_mut() {
            Some(rx) => {
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut followed = self.feed.followed();
        if followed
            .get(&self.id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            followed.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_hear_of_new_events_and_leave_no_trace() {
        let feed = Arc::new(Feed::default());
        let id = RunId::new(crate::domain::Timestamp(1), 7);
        feed.publish(id, 1); // nobody follows: nothing kept
        assert!(feed.followed().is_empty());
        let mut a = feed.subscribe(id);
        let b = feed.subscribe(id);
        feed.publish(id, 3);
        tokio::time::timeout(std::time::Duration::from_secs(1), a.changed())
            .await
            .expect("notice");
        drop(a);
        assert_eq!(feed.followed().len(), 1);
        drop(b);
        assert!(feed.followed().is_empty());
    }
}
