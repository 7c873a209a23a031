//! Live notice of transcript growth, for clients following a run's output (the SSE form of the
//! transcript endpoint). A transcript `Writer` registers while it is open and bumps a counter
//! after each entry it writes; followers wake up and read the new entries from the file
//! themselves. Notices carry no output, so a slow follower never makes the writer wait or the
//! service buffer anything: it reads whatever is new when it gets round to it, and many writes
//! between two of its reads are one wake-up.
//!
//! The other half of the notice is whether anything is still writing the run's transcript. A
//! run that is terminal and has no open writer has all its output in the file: a follower that
//! has read to the end has drained it. Runs nobody writes or follows have no entry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::domain::RunId;

/// One run's notices: how many writers are open, and a counter bumped on every write.
struct Live {
    writers: usize,
    tx: watch::Sender<u64>,
}

#[derive(Default)]
pub struct Feed {
    runs: Mutex<HashMap<RunId, Live>>,
}

impl Feed {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Live>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(runs: &mut HashMap<RunId, Live>, id: RunId) -> &mut Live {
        runs.entry(id).or_insert_with(|| Live {
            writers: 0,
            tx: watch::channel(0).0,
        })
    }

    /// Registers an open writer of the run's transcript, until the handle is dropped.
    pub fn writing(self: &Arc<Self>, id: RunId) -> Writing {
        let mut runs = self.runs();
        let live = Self::entry(&mut runs, id);
        live.writers += 1;
        Writing {
            feed: self.clone(),
            id,
            tx: live.tx.clone(),
        }
    }

    /// Starts following a run's transcript; the entry goes when nothing uses it any more.
    pub fn follow(self: &Arc<Self>, id: RunId) -> Following {
        let rx = Self::entry(&mut self.runs(), id).tx.subscribe();
        Following {
            feed: self.clone(),
            id,
            rx: Some(rx),
        }
    }

    /// Removes the run's entry if no writer and no follower uses it.
    fn release(&self, id: RunId) {
        let mut runs = self.runs();
        if runs
            .get(&id)
            .is_some_and(|l| l.writers == 0 && l.tx.receiver_count() == 0)
        {
            runs.remove(&id);
        }
    }
}

/// An open writer's registration (see `Feed::writing`).
pub struct Writing {
    feed: Arc<Feed>,
    id: RunId,
    tx: watch::Sender<u64>,
}

impl Writing {
    /// Tells the run's followers that the file grew. Costs one atomic load when nobody
    /// follows.
    pub fn wrote(&self) {
        if self.tx.receiver_count() > 0 {
            self.tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        {
            let mut runs = self.feed.runs();
            if let Some(live) = runs.get_mut(&self.id) {
                live.writers = live.writers.saturating_sub(1);
            }
        }
        // The writer's last entry is in the file: a follower waiting for the end wakes up.
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
        self.feed.release(self.id);
    }
}

/// A follower's subscription (see `Feed::follow`).
pub struct Following {
    feed: Arc<Feed>,
    id: RunId,
    rx: Option<watch::Receiver<u64>>,
}

impl Following {
    /// Waits until the transcript grows or a writer closes. Never returns otherwise.
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

    /// Whether a writer of the run's transcript is open now. Checked before a read to the end
    /// of the file: if none was, that read saw every entry the run's executions wrote.
    pub fn writing(&self) -> bool {
        self.feed
            .runs()
            .get(&self.id)
            .is_some_and(|l| l.writers > 0)
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        drop(self.rx.take());
        self.feed.release(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn followers_hear_of_writes_and_of_the_writer_closing_and_leave_no_trace() {
        let feed = Arc::new(Feed::default());
        let id = RunId(5);
        let writer = feed.writing(id);
        writer.wrote(); // nobody follows yet
        let mut f = feed.follow(id);
        assert!(f.writing());
        writer.wrote();
        tokio::time::timeout(Duration::from_secs(1), f.changed())
            .await
            .expect("a write is a notice");
        drop(writer);
        tokio::time::timeout(Duration::from_secs(1), f.changed())
            .await
            .expect("a writer closing is a notice");
        assert!(!f.writing());
        assert_eq!(feed.runs().len(), 1, "the follower still uses the entry");
        drop(f);
        assert!(feed.runs().is_empty());
        // A writer alone leaves nothing behind either.
        drop(feed.writing(id));
        assert!(feed.runs().is_empty());
    }

    #[tokio::test]
    async fn two_writers_of_one_run_both_count() {
        let feed = Arc::new(Feed::default());
        let id = RunId(6);
        let (a, b) = (feed.writing(id), feed.writing(id));
        let f = feed.follow(id);
        drop(a);
        assert!(f.writing());
        drop(b);
        assert!(!f.writing());
    }
}
