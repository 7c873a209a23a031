//! Live notices for followers of something that grows durably under a key: a run's events (its
//! actor publishes the new event count once the events are durable) and a run's transcript (an
//! open writer bumps a counter after each entry). Followers wake up and read what is new from the
//! log or the file themselves. Notices carry no data, so a slow follower never makes a writer
//! wait or the service buffer anything: it reads whatever is new when it gets round to it, and
//! many notices between two of its reads are one wake-up.
//!
//! The feed also says whether a writer of a key is still open: a follower that read to the end
//! while none was has seen everything. Keys nobody writes or follows have no entry.
//!
//! A leaf: it knows no run, log or file, only keys and counters.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

/// One key's notices: how many writers are open, and the counter followers watch.
struct Live {
    writers: usize,
    tx: watch::Sender<u64>,
}

/// The notices of every key being written or followed.
pub struct Feed<K> {
    keys: Mutex<HashMap<K, Live>>,
}

impl<K> Default for Feed<K> {
    fn default() -> Self {
        Feed {
            keys: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Copy> Feed<K> {
    fn keys(&self) -> MutexGuard<'_, HashMap<K, Live>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(keys: &mut HashMap<K, Live>, key: K) -> &mut Live {
        keys.entry(key).or_insert_with(|| Live {
            writers: 0,
            tx: watch::channel(0).0,
        })
    }

    /// Tells the key's followers, if any, that its count is now `count` (a run's next sequence
    /// number); a count no higher than one told before is no notice. Nobody following: nothing
    /// is kept.
    pub fn publish(&self, key: K, count: u64) {
        if let Some(live) = self.keys().get(&key) {
            live.tx.send_if_modified(|seen| {
                let newer = count > *seen;
                *seen = (*seen).max(count);
                newer
            });
        }
    }

    /// Registers an open writer of the key, until the handle is dropped.
    pub fn writing(self: &Arc<Self>, key: K) -> Writing<K> {
        let mut keys = self.keys();
        let live = Self::entry(&mut keys, key);
        live.writers += 1;
        Writing {
            feed: self.clone(),
            key,
            tx: live.tx.clone(),
        }
    }

    /// Starts following the key; the entry goes when nothing uses it any more.
    pub fn follow(self: &Arc<Self>, key: K) -> Follower<K> {
        let rx = Self::entry(&mut self.keys(), key).tx.subscribe();
        Follower {
            feed: self.clone(),
            key,
            rx: Some(rx),
        }
    }

    /// Removes the key's entry if no writer and no follower uses it.
    fn release(&self, key: K) {
        let mut keys = self.keys();
        if keys
            .get(&key)
            .is_some_and(|l| l.writers == 0 && l.tx.receiver_count() == 0)
        {
            keys.remove(&key);
        }
    }

    /// How many keys have an entry.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys().len()
    }
}

/// An open writer's registration (see `Feed::writing`).
pub struct Writing<K: Hash + Eq + Copy> {
    feed: Arc<Feed<K>>,
    key: K,
    tx: watch::Sender<u64>,
}

impl<K: Hash + Eq + Copy> Writing<K> {
    /// Tells the key's followers that it grew. Costs one atomic load when nobody follows.
    pub fn wrote(&self) {
        if self.tx.receiver_count() > 0 {
            self.tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

impl<K: Hash + Eq + Copy> Drop for Writing<K> {
    fn drop(&mut self) {
        {
            let mut keys = self.feed.keys();
            if let Some(live) = keys.get_mut(&self.key) {
                live.writers = live.writers.saturating_sub(1);
            }
        }
        // The writer's last entry is durable: a follower waiting for the end wakes up.
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
        self.feed.release(self.key);
    }
}

/// A follower's subscription (see `Feed::follow`).
pub struct Follower<K: Hash + Eq + Copy> {
    feed: Arc<Feed<K>>,
    key: K,
    rx: Option<watch::Receiver<u64>>,
}

impl<K: Hash + Eq + Copy> Follower<K> {
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

    /// Whether a writer of the key is open now. Checked before a read to the end: if none was,
    /// that read saw everything the key's writers wrote.
    pub fn writing(&self) -> bool {
        self.feed
            .keys()
            .get(&self.key)
            .is_some_and(|l| l.writers > 0)
    }
}

impl<K: Hash + Eq + Copy> Drop for Follower<K> {
    fn drop(&mut self) {
        drop(self.rx.take());
        self.feed.release(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn notice<K: Hash + Eq + Copy>(follower: &mut Follower<K>) {
        tokio::time::timeout(Duration::from_secs(1), follower.changed())
            .await
            .expect("a notice");
    }

    #[tokio::test]
    async fn followers_hear_of_higher_counts_and_leave_no_trace() {
        let feed = Arc::new(Feed::default());
        feed.publish(7u64, 1); // nobody follows: nothing kept
        assert_eq!(feed.len(), 0);
        let mut a = feed.follow(7);
        let b = feed.follow(7);
        feed.publish(7, 3);
        notice(&mut a).await;
        feed.publish(7, 3); // not newer: no notice
        let rx = a.rx.as_ref().expect("following");
        assert!(
            !rx.has_changed().expect("open"),
            "a count told before is no notice"
        );
        drop(a);
        assert_eq!(feed.len(), 1);
        drop(b);
        assert_eq!(feed.len(), 0);
    }

    #[tokio::test]
    async fn followers_hear_of_writes_and_of_the_writer_closing_and_leave_no_trace() {
        let feed = Arc::new(Feed::default());
        let writer = feed.writing(5u64);
        writer.wrote(); // nobody follows yet
        let mut f = feed.follow(5);
        assert!(f.writing());
        writer.wrote();
        notice(&mut f).await;
        drop(writer);
        notice(&mut f).await;
        assert!(!f.writing());
        assert_eq!(feed.len(), 1, "the follower still uses the entry");
        drop(f);
        assert_eq!(feed.len(), 0);
        // A writer alone leaves nothing behind either.
        drop(feed.writing(5));
        assert_eq!(feed.len(), 0);
    }

    #[tokio::test]
    async fn two_writers_of_one_key_both_count() {
        let feed = Arc::new(Feed::default());
        let (a, b) = (feed.writing(6u64), feed.writing(6));
        let f = feed.follow(6);
        drop(a);
        assert!(f.writing());
        drop(b);
        assert!(!f.writing());
    }
}
