//! Write-behind projection: the index update of an acknowledged command, done off the command's
//! path by one thread, with the updates of one run coalesced.
//!
//! A run's actor appends, waits for the sync, hands the new row to the projector and replies.
//! The projector applies the newest row of each waiting run to the read index. A run that moves
//! several times before the projector gets to it (create, start and finish of a short run, a
//! burst of follow-ups) is indexed once, at its newest state: the secondary keys embed
//! `updated_at`, so every intermediate state would cost a full remove-and-insert of them. Under
//! load the projector's batches grow and coalesce more; a backlog beyond `BACKLOG` makes
//! commands wait for it before they reply, so it stays bounded.
//!
//! Reads stay read-your-writes:
//! - `get` answers a waiting run from the projector's newest row;
//! - `caught_up` lets a list wait until everything submitted before it began is applied.
//!
//! Crash safety (see `docs/decisions/0001-durability.md`): startup must find every run whose
//! durable commands the index may lack. Two records say which runs those are:
//! - **The index floor**, a time kept in the store. Startup catches up every run created at or
//!   after it, so a run created after the floor needs no record of its own: the floor is only
//!   moved past a run's creation time once none of its commands is waiting (or in flight), and
//!   it is written after the index writes it vouches for. Most commands are those of young runs
//!   — a create, the start and finish of a short run — and cost no store write for this.
//! - **Dirty markers**, for the commands of runs older than the floor: a run is marked before
//!   its first unapplied append and unmarked only once the projector applied all of its
//!   acknowledged commands. A marker holds a generation number and is removed by
//!   compare-and-swap, so a mark for a newer command can never be lost to the removal of an
//!   older one.
//!
//! Both vouch for the runs' audit entries too, which the projector writes many batches late
//! (`backlog.rs`): the floor is stored, and a marker cleared, only once those are written.
//! The floor trails the clock by `FLOOR_LAG_MS`, so a create whose id was made a moment before
//! its command reached the actor is still covered; after a crash, startup catches up the runs of
//! about that last second (or more, while a young run's command waits). A clean stop moves the
//! floor up to the clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::watch;

use super::audit::Gathered;
use super::backlog::Backlog;
use super::Index;
use runledger_base::metrics::METRICS;
use runledger_domain::{Run, RunId};
use runledger_store::{Envelope, Store};

/// Commands the projector may lag behind before new commands wait for it to catch up to this
/// distance. Larger lets writes run further ahead of the index under load; smaller bounds the
/// projector's memory and how long a list may wait for it (the backlog divided by the index
/// update rate).
const BACKLOG: u64 = 256;

/// How long the projector, woken for a small batch, waits for more runs. A batch writes each
/// index block it touches once, so a batch of a few runs costs nearly what a full one does:
/// waiting trades a little index lag for fewer block writes per run under load. Reads do not
/// pay for it: `get` answers from the pending rows, and a list that must wait for the
/// projector cuts the gathering short (`hurry`).
const GATHER: std::time::Duration = std::time::Duration::from_millis(2);

/// A batch this large is applied without gathering more.
const FULL_BATCH: usize = 128;

/// How far the index floor stays behind the clock: a run whose id was made this long before
/// its first command reached its actor still needs no dirty marker.
const FLOOR_LAG_MS: u64 = 1_000;

/// The floor is stored when it has moved at least this far (milliseconds): a few writes a
/// second instead of one per batch, for a catch-up after a crash that is that much longer.
const FLOOR_STEP_MS: u64 = 250;

/// The handle the run actors hand new rows to; the projector thread holds the same `Shared`.
pub struct Projector {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared {
    index: Index,
    store: Store,
    state: Mutex<State>,
    work: Condvar,
    /// Tickets handed out so far (the ticket of the latest submission).
    submitted: AtomicU64,
    /// Every submission with a ticket up to this value is in the index (or failed loudly).
    applied: watch::Sender<u64>,
    /// Held for a whole batch: one batch at a time, so a run is never applied twice at once.
    applying: Mutex<()>,
    generation: AtomicU64,
    /// `GATHER`, but for tests.
    gather: std::time::Duration,
    /// Audit entries of applied rows not written yet, and the markers they hold back.
    backlog: Mutex<Backlog>,
}

#[derive(Default)]
struct State {
    /// Acknowledged rows the index does not have yet: the newest per run.
    pending: HashMap<RunId, Pending>,
    /// Runs with a dirty marker: the marker's generation and the commands that have marked the
    /// run and are not applied yet.
    marked: HashMap<RunId, Marked>,
    /// Runs created at or after the floor with commands not applied yet (how many), which have
    /// no marker: the floor must not pass them. Ordered by id, so by creation time.
    covered: BTreeMap<RunId, u32>,
    /// The index floor in milliseconds: a run created at or after it is `covered` by a command
    /// instead of marked. Never moves back.
    floor: u64,
    /// The floor as last stored (never above `floor`).
    stored_floor: u64,
    /// What the projector thread is waiting for, so that submitters wake it only when needed
    /// (a wake-up is a system call; a submission per wake-up would cost one per command).
    waiting: Waiting,
    /// A reader waits for the projector: apply without gathering.
    hurry: bool,
    stopping: bool,
    /// No thread (stopped, or it could not start): `submit` applies at once.
    inline: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// Applying, or about to: sees every submission without being woken.
    #[default]
    Busy,
    /// Nothing pending: wake on the first submission.
    Idle,
    /// A small batch pending: wake when it is full (or a reader hurries it).
    Gathering,
}

struct Pending {
    row: Run,
    ticket: u64,
    /// Submissions coalesced into `row`.
    commands: u32,
    /// The events the submissions appended, in order, for the audit index: with them it need
    /// not read the log back (`Index::gather_events` reads it when they do not cover the
    /// events between the stored row and `row`).
    events: Vec<Envelope>,
}

/// A run's row in a batch, with the ticket and the count of the submissions it answers.
type Applied = (Run, u64, u32);

struct Marked {
    generation: u64,
    commands: u32,
}

impl Projector {
    /// Starts the projector of a store that `startup::open_store` opened: that caught up every
    /// run the stored index floor covered and moved the floor up to the clock, so runs created
    /// before the floor need markers and those after it are this process's to cover.
    pub fn start(index: Index, store: Store) -> Projector {
        Projector::start_gathering(index, store, GATHER)
    }

    /// `start` with another gathering time (tests use a very long one).
    fn start_gathering(index: Index, store: Store, gather: std::time::Duration) -> Projector {
        let floor = match store.index_floor() {
            Ok(Some(floor)) => floor.0,
            // A store that never had a floor marks every run it has to catch up; from now on
            // runs are covered.
            Ok(None) => {
                let at = runledger_base::clock::now();
                match store.set_index_floor(at) {
                    Ok(()) => at.0,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot store the index floor; every command marks its run");
                        u64::MAX
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot read the index floor; every command marks its run");
                u64::MAX
            }
        };
        let shared = Arc::new(Shared {
            index,
            store,
            state: Mutex::new(State {
                floor,
                stored_floor: floor,
                ..State::default()
            }),
            work: Condvar::new(),
            submitted: AtomicU64::new(0),
            applied: watch::channel(0).0,
            applying: Mutex::new(()),
            generation: AtomicU64::new(0),
            gather,
            backlog: Mutex::new(Backlog::default()),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("projector".into())
            .spawn(move || worker.run())
            .map_err(|e| {
                tracing::error!(error = %e, "cannot start the projector thread; indexing inline");
                shared.lock().inline = true;
            })
            .ok();
        Projector {
            shared,
            thread: Mutex::new(thread),
        }
    }

    /// Records, before a command appends to its log, that the index may lack the run: in memory
    /// if the index floor covers the run, else with a dirty marker in the store. Must be
    /// followed by exactly one `submit` (after a durable append) or `abandon` (when the append
    /// or sync failed).
    pub fn mark(&self, id: RunId) -> Result<(), runledger_store::Error> {
        let mut state = self.shared.lock();
        if let Some(marked) = state.marked.get_mut(&id) {
            marked.commands += 1;
            return Ok(());
        }
        // Under the lock: the floor cannot pass the run between this check and the count.
        if id.created_at().0 >= state.floor {
            *state.covered.entry(id).or_insert(0) += 1;
            return Ok(());
        }
        // Written while holding the lock: the generation is in `marked` before any other
        // command of this run could see the run as unmarked.
        let generation = self.shared.mark_anew(id)?;
        state.marked.insert(
            id,
            Marked {
                generation,
                commands: 1,
            },
        );
        Ok(())
    }

    /// A marked command that will never be submitted. Its append may be on disk, so the run
    /// keeps a marker for its next activation or the next start to catch it up.
    pub fn abandon(&self, id: RunId) {
        let mut state = self.shared.lock();
        if let Some(marked) = state.marked.get_mut(&id) {
            marked.commands = marked.commands.saturating_sub(1);
            if marked.commands == 0 {
                state.marked.remove(&id);
            }
            // Marked again under a generation that no waiting command of the run holds: once
            // those are applied, their compare-and-swap would otherwise remove the marker this
            // command still needs.
            if let Err(e) = self.shared.mark_anew(id) {
                tracing::error!(run_id = %id, error = %e, "cannot keep a run marked after an abandoned command; the index may miss it until `runledger replay`");
            }
        } else if state.covered.contains_key(&id) {
            // A covered run gets the marker a marked one keeps, for the same repair.
            self.shared
                .uncover(&mut state, id, 1, "an abandoned command");
        }
    }

    /// Hands the run's new row, whose events are durable, to the projector.
    pub fn submit(&self, row: Run) {
        self.submit_with(row, Vec::new());
    }

    /// `submit`, with the events the command appended (those that moved the run to `row`), so
    /// that the audit index is written from them rather than from the log read back.
    pub fn submit_with(&self, row: Run, mut events: Vec<Envelope>) {
        let mut state = self.shared.lock();
        let ticket = self.shared.submitted.fetch_add(1, Ordering::AcqRel) + 1;
        match state.pending.get_mut(&row.id) {
            Some(pending) => {
                pending.row = row;
                pending.ticket = ticket;
                pending.commands += 1;
                pending.events.append(&mut events);
            }
            None => {
                state.pending.insert(
                    row.id,
                    Pending {
                        row,
                        ticket,
                        commands: 1,
                        events,
                    },
                );
            }
        }
        let inline = state.inline;
        let wake = match state.waiting {
            Waiting::Busy => false,
            Waiting::Idle => true,
            Waiting::Gathering => state.pending.len() >= FULL_BATCH,
        };
        if wake {
            state.waiting = Waiting::Busy;
        }
        drop(state);
        METRICS.index_submitted.fetch_add(1, Ordering::Relaxed);
        if inline {
            self.shared.batch();
        } else if wake {
            self.shared.work.notify_one();
        }
    }

    /// The newest acknowledged row of a run the index may not have yet.
    pub fn newest(&self, id: RunId) -> Option<Run> {
        self.shared.lock().pending.get(&id).map(|p| p.row.clone())
    }

    /// Whether a command of this run is marked and not yet applied: its dirty marker is the
    /// projector's, not a leftover to repair.
    pub fn tracks(&self, id: RunId) -> bool {
        let state = self.shared.lock();
        state.marked.contains_key(&id) || self.shared.backlog().holds(id)
    }

    /// Waits until every command acknowledged before this call is in the index.
    pub async fn caught_up(&self) {
        self.applied_up_to(self.shared.submitted.load(Ordering::Acquire))
            .await;
    }

    async fn applied_up_to(&self, target: u64) {
        if *self.shared.applied.borrow() >= target {
            return;
        }
        {
            let mut state = self.shared.lock();
            state.hurry = true;
            if state.waiting == Waiting::Gathering {
                state.waiting = Waiting::Busy;
                self.shared.work.notify_one();
            }
        }
        let mut rx = self.shared.applied.subscribe();
        // The sender lives as long as `self`; an error cannot happen while we hold it.
        let _ = rx.wait_for(|applied| *applied >= target).await;
    }

    /// `caught_up`, and the audit entries of all that written: what audit readers wait for.
    pub async fn audit_caught_up(&self) {
        self.caught_up().await;
        self.write_audit_backlog();
    }

    /// Writes the audit entries of every row applied so far (waits for a batch in progress).
    pub fn write_audit_backlog(&self) {
        let _serial = self
            .shared
            .applying
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.shared.write_backlog(None, true);
    }

    /// Notices of the projector's progress: the value rises after every batch it applies, so a
    /// follower of the index (the audit stream) wakes when there may be something new in it.
    pub fn watch_applied(&self) -> watch::Receiver<u64> {
        self.shared.applied.subscribe()
    }

    /// Makes a command wait while the projector lags more than `BACKLOG` commands behind.
    pub async fn throttle(&self) {
        let target = self
            .shared
            .submitted
            .load(Ordering::Acquire)
            .saturating_sub(BACKLOG);
        self.applied_up_to(target).await;
    }

    /// Applies everything waiting and stops the thread (at shutdown).
    pub fn stop(&self) {
        self.shared.lock().stopping = true;
        self.shared.work.notify_all();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                tracing::error!("the projector thread panicked");
            }
        }
        // Everything submitted is applied: the floor may rise to the clock, so that the next
        // start has (almost) nothing to catch up.
        let _serial = self
            .shared
            .applying
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut state = self.shared.lock();
        let floor = self.shared.raise_floor(&mut state, 0);
        drop(state);
        self.shared.write_backlog(floor, true);
    }

    /// The index floor in memory, in milliseconds (for tests).
    #[cfg(test)]
    fn floor(&self) -> u64 {
        self.shared.lock().floor
    }
}

impl Drop for Projector {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn backlog(&self) -> MutexGuard<'_, Backlog> {
        // Taken after `state` when both are held, never before.
        self.backlog.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The projector thread: a batch whenever runs wait, until stopped and drained.
    fn run(&self) {
        loop {
            {
                let mut state = self.lock();
                while state.pending.is_empty() && !state.stopping {
                    state.waiting = Waiting::Idle;
                    state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                if state.pending.is_empty() {
                    // From now on submitters apply their rows themselves.
                    state.inline = true;
                    return;
                }
                let deadline = std::time::Instant::now() + self.gather;
                while state.pending.len() < FULL_BATCH && !state.stopping && !state.hurry {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    state.waiting = Waiting::Gathering;
                    state = self
                        .work
                        .wait_timeout(state, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                // Whoever hurried waits for something submitted before now: this batch has it.
                state.waiting = Waiting::Busy;
                state.hurry = false;
            }
            self.batch();
        }
    }

    /// Applies the newest row of every run waiting now, then settles their markers and moves
    /// `applied` up to the last ticket handed out before the batch began.
    fn batch(&self) {
        let _serial = self.applying.lock().unwrap_or_else(|p| p.into_inner());
        let (batch, events, upto) = {
            let mut state = self.lock();
            if state.pending.is_empty() {
                return;
            }
            // The events leave with the batch; a later submission of the same run brings its
            // own, which then start where this batch's row ends.
            let (batch, events): (Vec<Applied>, Vec<Vec<Envelope>>) = state
                .pending
                .values_mut()
                .map(|p| {
                    (
                        (p.row.clone(), p.ticket, p.commands),
                        std::mem::take(&mut p.events),
                    )
                })
                .unzip();
            (batch, events, self.submitted.load(Ordering::Acquire))
        };
        let started = std::time::Instant::now();
        let mut gathered = Gathered::default();
        let applied = self
            .index
            .apply_batch(&self.store, &batch, &events, &mut gathered);
        self.backlog().gathered.append(gathered);
        let results = vec![applied; batch.len()];
        METRICS.index_batch.observe(started.elapsed());
        METRICS
            .index_applied
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut state = self.lock();
        for ((row, ticket, commands), ok) in batch.iter().zip(results) {
            let id = row.id;
            match state.pending.get_mut(&id) {
                Some(p) if p.ticket == *ticket => {
                    state.pending.remove(&id);
                }
                Some(p) => p.commands -= commands,
                None => {}
            }
            if state.covered.contains_key(&id) {
                if ok {
                    self.settle_covered(&mut state, id, *commands);
                } else {
                    // Marked now, so that the next activation or start repairs the run.
                    self.uncover(&mut state, id, *commands, "a failed index update");
                }
                continue;
            }
            if !ok {
                // The marker stays for good: the next activation or start repairs the run.
                continue;
            }
            let Some(marked) = state.marked.get_mut(&id) else {
                continue;
            };
            marked.commands = marked.commands.saturating_sub(*commands);
            if marked.commands == 0 {
                let generation = marked.generation;
                state.marked.remove(&id);
                // Cleared once the run's audit entries are written (`backlog.rs`); a command
                // of this run that marks it meanwhile writes a new generation, which the
                // compare-and-swap of the clear keeps.
                self.backlog().clear_later(id, generation);
            }
        }
        let floor = self.raise_floor(&mut state, FLOOR_LAG_MS);
        // Without the thread (stopped), nothing would come along to write the backlog later.
        let inline = state.inline;
        drop(state);
        self.write_backlog(floor, inline);
        self.applied.send_replace(upto);
    }

    /// Writes the audit backlog when it is due (`now`, a floor to store, or `MAX_EVENTS`
    /// gathered), then stores `floor`, which only vouches for runs whose entries are written.
    /// Called with `applying` held.
    fn write_backlog(&self, floor: Option<u64>, now: bool) {
        let due = now || floor.is_some();
        let written = self.backlog().write(&self.index, &self.store, due);
        let Some(floor) = floor.filter(|_| written) else {
            return;
        };
        match self
            .store
            .set_index_floor(runledger_domain::Timestamp(floor))
        {
            Ok(()) => self.lock().stored_floor = floor,
            // The stored floor stays where it was: the next start catches up more runs.
            Err(e) => tracing::error!(error = %e, "cannot store the index floor"),
        }
    }

    /// Writes the run's dirty marker under a generation no other command holds, and returns it.
    fn mark_anew(&self, id: RunId) -> Result<u64, runledger_store::Error> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.store.mark_dirty_generation(id, generation)?;
        Ok(generation)
    }

    /// `commands` of a covered run are applied.
    fn settle_covered(&self, state: &mut State, id: RunId, commands: u32) {
        if let Some(waiting) = state.covered.get_mut(&id) {
            *waiting = waiting.saturating_sub(commands);
            if *waiting == 0 {
                state.covered.remove(&id);
            }
        }
    }

    /// Takes `commands` of a covered run out of the floor's care by marking the run dirty (as
    /// a leftover, for the repair of its next activation or start). If even that write fails,
    /// the run stays covered for good: the floor then stays below it for the life of this
    /// process, and the next start catches it up with every run created since.
    fn uncover(&self, state: &mut State, id: RunId, commands: u32, why: &str) {
        match self.mark_anew(id) {
            Ok(_) => self.settle_covered(state, id, commands),
            Err(e) => {
                tracing::error!(run_id = %id, error = %e, "cannot mark a run dirty after {why}; the index floor stays below it");
            }
        }
    }

    /// Moves the index floor up to `lag_ms` behind the clock, but never past a covered run; once
    /// it has moved `FLOOR_STEP_MS` (or at once, for a stop), answers it for `write_backlog`.
    fn raise_floor(&self, state: &mut State, lag_ms: u64) -> Option<u64> {
        let mut floor = runledger_base::clock::now().0.saturating_sub(lag_ms);
        if let Some(oldest) = state.covered.keys().next() {
            floor = floor.min(oldest.created_at().0);
        }
        if floor <= state.floor {
            return None;
        }
        state.floor = floor;
        if lag_ms > 0 && floor < state.stored_floor.saturating_add(FLOOR_STEP_MS) {
            return None;
        }
        Some(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Query;
    use runledger_domain::{evolve, Event, Timestamp};

    fn open() -> (tempfile::TempDir, Store, Index) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), &runledger_store::Options::default()).expect("store");
        let index = Index::open(store.db()).expect("index");
        (dir, store, index)
    }

    fn created(i: u64) -> Run {
        runledger_domain::sample_run(i)
    }

    /// A run created now: younger than the floor of a projector started before it.
    fn young(i: u64) -> Run {
        let id = RunId::new(runledger_base::clock::now(), u128::from(i));
        let event = Event::Created(runledger_domain::sample_created(i));
        evolve(None, id, &event, id.created_at()).expect("created")
    }

    fn started(run: &Run) -> Run {
        let at = Timestamp(run.updated_at.0 + 5);
        evolve(
            Some(run.clone()),
            run.id,
            &Event::Started { execution: 1 },
            at,
        )
        .expect("started")
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    /// What `list` answers once the projector has caught up (audit entries and markers too).
    fn listed(projector: &Projector, index: &Index) -> Vec<Run> {
        block_on(projector.audit_caught_up());
        let all = Query {
            team: runledger_domain::DEFAULT_TEAM.into(),
            limit: 100,
            ..Query::default()
        };
        index.list(&all).expect("list").runs
    }

    #[test]
    fn an_acknowledged_row_is_readable_at_once_and_listed_after_caught_up() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let run = created(1);
        projector.mark(run.id).expect("mark");
        projector.submit(run.clone());
        // Whether or not the thread has got to it, the newest row is known.
        let newest = projector
            .newest(run.id)
            .or_else(|| index.get(run.id).expect("get"));
        assert_eq!(newest.as_ref(), Some(&run));
        assert_eq!(listed(&projector, &index), vec![run.clone()]);
        assert_eq!(projector.newest(run.id), None);
        assert!(
            !store.is_dirty(run.id).expect("dirty"),
            "the marker is cleared once applied"
        );
        assert!(!projector.tracks(run.id));
    }

    #[test]
    fn a_marker_stays_until_every_command_of_the_run_is_applied() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let run = created(2);
        projector.mark(run.id).expect("mark");
        projector.submit(run.clone());
        // A second command marks the run before the first one is (perhaps) applied.
        projector.mark(run.id).expect("mark");
        block_on(projector.caught_up());
        assert!(
            store.is_dirty(run.id).expect("dirty"),
            "the second command is not applied yet"
        );
        assert!(projector.tracks(run.id));
        let moved = started(&run);
        projector.submit(moved.clone());
        assert_eq!(listed(&projector, &index), vec![moved]);
        assert!(!store.is_dirty(run.id).expect("dirty"));
    }

    /// A run's marker is cleared only once its audit entries are written: a crash before that
    /// leaves the run to the next start's catch-up, which indexes its events again.
    #[test]
    fn a_marker_waits_for_the_audit_entries_of_its_run() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let run = created(7);
        projector.mark(run.id).expect("mark");
        projector.submit(run.clone());
        block_on(projector.caught_up());
        assert_eq!(index.get(run.id).expect("get"), Some(run.clone()));
        assert!(
            store.is_dirty(run.id).expect("dirty"),
            "applied, but its audit entries are not written yet"
        );
        assert!(projector.tracks(run.id), "the marker is the projector's");
        projector.write_audit_backlog();
        assert!(!store.is_dirty(run.id).expect("dirty"));
        assert!(!projector.tracks(run.id));
    }

    #[test]
    fn an_abandoned_command_leaves_its_marker_for_the_repair() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let run = created(3);
        projector.mark(run.id).expect("mark");
        projector.abandon(run.id);
        assert!(
            !projector.tracks(run.id),
            "the next activation must repair the run"
        );
        assert!(store.is_dirty(run.id).expect("dirty"));
    }

    /// A command abandoned while an earlier command of the run waits for the projector: the
    /// earlier command's apply must not take the marker the abandoned one still needs.
    #[test]
    fn an_abandoned_command_keeps_its_marker_past_an_earlier_commands_apply() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let run = created(11);
        projector.mark(run.id).expect("mark");
        projector.submit(run.clone());
        projector.mark(run.id).expect("mark");
        projector.abandon(run.id);
        assert_eq!(listed(&projector, &index), vec![run.clone()]);
        assert!(
            store.is_dirty(run.id).expect("dirty"),
            "the abandoned append may be durable"
        );
        assert!(!projector.tracks(run.id), "a leftover for the repair");
    }

    #[test]
    fn an_older_generation_does_not_clear_a_newer_marker() {
        let (_dir, store, _index) = open();
        let id = created(4).id;
        store.mark_dirty_generation(id, 1).expect("mark");
        store.mark_dirty_generation(id, 2).expect("mark again");
        store.clear_dirty_generation(id, 1).expect("clear");
        assert!(store.is_dirty(id).expect("dirty"));
        store.clear_dirty_generation(id, 2).expect("clear");
        assert!(!store.is_dirty(id).expect("dirty"));
    }

    #[test]
    fn after_stop_submissions_are_applied_at_once() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        projector.stop();
        let run = created(5);
        projector.mark(run.id).expect("mark");
        projector.submit(run.clone());
        assert_eq!(index.get(run.id).expect("get"), Some(run.clone()));
        assert!(!store.is_dirty(run.id).expect("dirty"));
        assert_eq!(listed(&projector, &index), vec![run]);
    }

    #[test]
    fn many_moves_of_one_run_end_at_its_newest_row() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let mut runs: Vec<Run> = (10..60).map(created).collect();
        for run in &runs {
            projector.mark(run.id).expect("mark");
            projector.submit(run.clone());
        }
        for run in &mut runs {
            projector.mark(run.id).expect("mark");
            *run = started(run);
            projector.submit(run.clone());
        }
        let mut listed = listed(&projector, &index);
        listed.sort_by_key(|r| r.id);
        assert_eq!(listed.len(), runs.len());
        assert!(listed == runs, "every run is listed at its newest row");
        for run in &runs {
            assert!(!store.is_dirty(run.id).expect("dirty"));
        }
        // No entry of an older state is left behind: filtering by the old state finds nothing.
        let queued = index
            .list(&Query {
                team: runledger_domain::DEFAULT_TEAM.into(),
                states: vec![runledger_domain::RunState::Queued],
                limit: 100,
                ..Query::default()
            })
            .expect("list");
        assert!(queued.runs.is_empty());
    }

    #[test]
    fn a_young_run_is_covered_by_the_floor_without_a_marker() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let floor = store
            .index_floor()
            .expect("floor")
            .expect("stored at start");
        let run = young(6);
        assert!(run.id.created_at() >= floor);
        projector.mark(run.id).expect("mark");
        assert!(
            !store.is_dirty(run.id).expect("dirty"),
            "a run younger than the floor costs no marker"
        );
        projector.submit(run.clone());
        let moved = started(&run);
        projector.mark(run.id).expect("mark");
        projector.submit(moved.clone());
        assert_eq!(listed(&projector, &index), vec![moved]);
        assert!(!store.is_dirty(run.id).expect("dirty"));
        assert!(projector.shared.lock().covered.is_empty());
    }

    #[test]
    fn the_floor_never_passes_a_run_whose_command_is_in_flight() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let waiting = young(7);
        projector.mark(waiting.id).expect("mark");
        // Other runs come and go; a stop raises the floor as far as it may go.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let other = young(8);
        projector.mark(other.id).expect("mark");
        projector.submit(other.clone());
        projector.stop();
        let stored = store.index_floor().expect("floor").expect("stored");
        assert_eq!(stored, waiting.id.created_at(), "held at the waiting run");
        assert_eq!(projector.floor(), stored.0);
        // Once the waiting command is applied, nothing holds the floor back.
        projector.submit(waiting.clone());
        assert_eq!(index.get(waiting.id).expect("get"), Some(waiting.clone()));
        projector.stop();
        let stored = store.index_floor().expect("floor").expect("stored");
        assert!(stored > waiting.id.created_at());
        // A run created before the floor now needs a marker.
        projector.mark(waiting.id).expect("mark");
        assert!(store.is_dirty(waiting.id).expect("dirty"));
    }

    #[test]
    fn an_abandoned_command_of_a_young_run_leaves_a_marker_for_the_repair() {
        let (_dir, store, index) = open();
        let projector = Projector::start(index.clone(), store.clone());
        let run = young(9);
        projector.mark(run.id).expect("mark");
        projector.abandon(run.id);
        assert!(store.is_dirty(run.id).expect("dirty"));
        assert!(!projector.tracks(run.id));
        assert!(projector.shared.lock().covered.is_empty());
    }

    /// With a gathering time far longer than any test, these finish only if a waiting reader
    /// or a full batch cuts the gathering short.
    #[test]
    fn a_waiting_list_or_a_full_batch_ends_the_gathering() {
        let (_dir, store, index) = open();
        let forever = std::time::Duration::from_secs(24 * 3600);
        let projector = Projector::start_gathering(index.clone(), store.clone(), forever);
        let run = young(10);
        projector.mark(run.id).expect("mark");
        projector.submit(run.clone());
        assert_eq!(listed(&projector, &index), vec![run]);

        let runs: Vec<Run> = (100..100 + FULL_BATCH as u64).map(young).collect();
        for run in &runs {
            projector.mark(run.id).expect("mark");
            projector.submit(run.clone());
        }
        let last = runs.last().map(|r| r.id).expect("runs");
        // No reader hurries it: only the full batch wakes the projector.
        while index.get(last).expect("get").is_none() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        projector.stop();
        assert_eq!(index.len(), FULL_BATCH + 1);
    }
}
