//! Giving memory back after bursts. A burst of large responses (pages of events, transcripts)
//! leaves freed memory that the allocator keeps for the threads that freed it, and an HTTP
//! worker that goes quiet never asks for it to be given back. So each worker thread, once it
//! has been active (a request began, an event stream sent a batch) and then not for `QUIET`,
//! asks the allocator to collect once.
//!
//! The allocator is the binary's choice (mimalloc, `docs/decisions/0005-allocator.md`) and
//! calling it needs `unsafe`, which the library forbids: the binary registers its collect
//! function with `set_collector` (`docs/decisions/0011-purge-after-bursts.md`). This module owns
//! only that registration and the per-thread count of activity; it knows nothing of the
//! allocator, and without a registered function it does nothing.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Duration;

/// How long a worker must have been inactive before it collects.
pub const QUIET: Duration = Duration::from_secs(2);

static COLLECTOR: OnceLock<fn()> = OnceLock::new();

thread_local! {
    /// Requests begun and stream batches sent on this thread.
    static ACTIVITY: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread runs `collect_when_quiet` already.
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}

/// Registers the function that gives the calling thread's freed memory back (once; later
/// calls are ignored).
pub fn set_collector(collect: fn()) {
    let _ = COLLECTOR.set(collect);
}

/// Notes work on this thread that allocates: a request begins, a stream sends a batch.
pub fn note_activity() {
    ACTIVITY.with(|n| n.set(n.get().wrapping_add(1)));
}

/// On an HTTP worker's thread (inside its runtime): starts the task that collects once the
/// thread goes quiet after being active. Does nothing without a collector, or when the thread has
/// the task already (actix-web may build a worker's app more than once).
pub fn watch_this_thread() {
    let Some(&collect) = COLLECTOR.get() else {
        return;
    };
    if WATCHED.with(|w| w.replace(true)) {
        return;
    }
    actix_rt::spawn(async move {
        let mut watch = Watch::new(ACTIVITY.with(Cell::get));
        let mut ticks = tokio::time::interval(QUIET);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if watch.tick(ACTIVITY.with(Cell::get)) {
                collect();
            }
        }
    });
}

/// When to collect, from the activity count read every `QUIET`: once after each stretch of
/// activity, never while idle (an idle server does no work for it), never twice in a row.
#[derive(Debug)]
struct Watch {
    seen: u64,
    active: bool,
}

impl Watch {
    fn new(activity: u64) -> Watch {
        Watch {
            seen: activity,
            active: false,
        }
    }

    /// Whether to collect now, given the activity count now.
    fn tick(&mut self, activity: u64) -> bool {
        if activity != self.seen {
            self.seen = activity;
            self.active = true;
            false
        } else {
            std::mem::replace(&mut self.active, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_once_after_each_stretch_of_activity() {
        let mut watch = Watch::new(5);
        // Idle from the start: nothing to give back.
        assert!(!watch.tick(5));
        assert!(!watch.tick(5));
        // Active for two ticks, then quiet: one collection, then none while quiet.
        assert!(!watch.tick(9));
        assert!(!watch.tick(40));
        assert!(watch.tick(40));
        assert!(!watch.tick(40));
        assert!(!watch.tick(40));
        // Again after the next burst, even one of a single request.
        assert!(!watch.tick(41));
        assert!(watch.tick(41));
    }
}
