//! The actor of one run: decide, append, sync, hand the new row to the projector, act, reply.
//! Effects are carried out only after the events are durable (they are dispatched — processes
//! started, messages queued — just before the reply is sent). Also the registry of the live
//! actors, which an actor leaves when it stops. The actor reports back through the executor's
//! `Report` interface only, never through `Runs` itself, so that the file defining `Runs` may
//! start actors without an import circle.

use actix::prelude::*;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::error::Error;
use runledger_base::clock::now;
use runledger_base::notify::Feed;
use runledger_domain::{decide, evolve, Command, Effect, Origin, Run, RunId};
use runledger_exec::{Executor, Report};
use runledger_projection::projector::Projector;
use runledger_projection::Index;
use runledger_store::{self as store, Store};

/// How long a live run's actor waits for a message before it stops.
const IDLE_AFTER: Duration = Duration::from_secs(30);

/// The result of a command that was accepted.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub run: Run,
    /// Whether the run had to wait for capacity when it was queued.
    pub at_capacity: bool,
}

/// What a run's actor works with, handed over at activation: the log it appends to, the index
/// it repairs, the projector it hands new rows to, the executor that carries out its effects,
/// and the feed that tells followers about new events.
pub(super) struct Handles {
    pub store: Store,
    pub index: Index,
    pub projector: Arc<Projector>,
    pub executor: Executor,
    pub feed: Arc<Feed<RunId>>,
    /// Where a decision's owed webhook deliveries are written, and handed over once durable.
    pub webhooks: crate::webhooks::Webhooks,
}

/// The live actors by run, each activated on demand by the `Runs` handle (`R`).
pub(super) struct Registry<R: Report + Unpin> {
    actors: Mutex<HashMap<RunId, Addr<RunActor<R>>>>,
}

impl<R: Report + Unpin> Registry<R> {
    pub(super) fn new() -> Registry<R> {
        Registry {
            actors: Mutex::new(HashMap::new()),
        }
    }

    fn actors(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Addr<RunActor<R>>>> {
        self.actors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of live actors (for metrics and tests).
    pub(super) fn live(&self) -> usize {
        self.actors().len()
    }

    /// The live actor of run `id`, or a new one started with `runs` to report back to and the
    /// `handles` it shares with every other actor. `fresh`: the id was made just now, so the
    /// actor need not look for a log.
    pub(super) fn activate(
        self: &Arc<Self>,
        id: RunId,
        fresh: bool,
        runs: &R,
        handles: &Arc<Handles>,
    ) -> Addr<RunActor<R>> {
        let mut actors = self.actors();
        if let Some(addr) = actors.get(&id) {
            if addr.connected() {
                return addr.clone();
            }
        }
        let actor = RunActor {
            id,
            runs: runs.clone(),
            registry: self.clone(),
            handles: handles.clone(),
            state: if fresh { Some(None) } else { None },
            idle: None,
        };
        let addr = actor.start();
        actors.insert(id, addr.clone());
        addr
    }

    /// Called for an actor that stops, so that the next command activates a new one.
    pub(super) fn deactivated(&self, id: RunId, addr: &Addr<RunActor<R>>) {
        let mut actors = self.actors();
        if actors.get(&id) == Some(addr) {
            actors.remove(&id);
        }
    }
}

/// One run's actor. `runs` is kept only to report back through the executor (queueing and
/// launching); `registry` is left when the actor stops.
pub(super) struct RunActor<R: Report + Unpin> {
    id: RunId,
    runs: R,
    registry: Arc<Registry<R>>,
    handles: Arc<Handles>,
    /// `None` until loaded; `Some(None)` for a run that does not exist (yet).
    state: Option<Option<Run>>,
    idle: Option<SpawnHandle>,
}

#[derive(Message)]
#[rtype(result = "Result<Outcome, Error>")]
pub(super) struct Execute(pub Command, pub Option<Origin>);

impl<R: Report + Unpin> RunActor<R> {
    fn reset_idle(&mut self, ctx: &mut Context<Self>) {
        if let Some(handle) = self.idle.take() {
            ctx.cancel_future(handle);
        }
        self.idle = Some(ctx.run_later(IDLE_AFTER, |actor, ctx| actor.retire(ctx)));
    }

    /// Everything up to and including the durable append; returns the new state.
    fn load(&mut self) -> Result<Option<Run>, Error> {
        if let Some(state) = &self.state {
            return Ok(state.clone());
        }
        let store = &self.handles.store;
        let run = store.load_run(self.id)?;
        // A run marked dirty that the projector is not working on: a previous process or
        // apply failed to update the index after a durable append. Repair that first.
        if store.is_dirty(self.id)? && !self.handles.projector.tracks(self.id) {
            self.handles.index.catch_up(store, &[self.id])?;
        }
        self.state = Some(run.clone());
        Ok(run)
    }
}

/// Whether a run keeps its actor between commands: only while an execution is in progress,
/// when the agent's finish and follow-ups arrive. A queued run may wait for a slot for a long
/// time (a backlog can hold many thousands), and a finished one may never hear from anyone
/// again; both are activated again, from the log, by their next command.
fn holds_actor(run: &Run) -> bool {
    run.state == runledger_domain::RunState::InProgress
}

impl<R: Report + Unpin> RunActor<R> {
    /// Stops this actor, leaving the registry first so that the next command for the run goes
    /// straight to a new actor instead of to this stopping one.
    fn retire(&self, ctx: &mut Context<Self>) {
        self.registry.deactivated(self.id, &ctx.address());
        ctx.stop();
    }

    /// Carries out a decision's effects; returns whether the run had to wait for capacity.
    fn dispatch(&self, effects: Vec<Effect>, run: &Run) -> bool {
        let mut at_capacity = false;
        let executor = &self.handles.executor;
        for effect in effects {
            match effect {
                Effect::Enqueue => at_capacity |= executor.enqueue(&self.runs, run),
                Effect::Dequeue => executor.dequeue(run),
                Effect::Launch {
                    execution,
                    followups,
                    resumed_by,
                } => executor.launch(&self.runs, run, execution, followups, resumed_by),
                Effect::Deliver(followup) => executor.deliver(run.id, followup),
                Effect::Stop { execution } => executor.stop(run.id, execution),
            }
        }
        at_capacity
    }
}

impl<R: Report + Unpin> Actor for RunActor<R> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.reset_idle(ctx);
    }

    fn stopped(&mut self, ctx: &mut Self::Context) {
        self.registry.deactivated(self.id, &ctx.address());
    }
}

impl<R: Report + Unpin> Handler<Execute> for RunActor<R> {
    type Result = AtomicResponse<Self, Result<Outcome, Error>>;

    fn handle(
        &mut self,
        Execute(command, origin): Execute,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        // actix still delivers mailbox messages to a stopping actor but never runs its wait
        // futures, so work started here would append events that are never synced, indexed or
        // acted on. A stopping actor does nothing; its reply is dropped, and the sender retries
        // on a new actor (`Runs::execute`).
        if ctx.state() != actix::ActorState::Running {
            return AtomicResponse::new(Box::pin(fut::ready(Err(Error::Unavailable))));
        }
        self.reset_idle(ctx);
        let writer = writer_of(&command);
        let appended = self
            .load()
            .and_then(|current| self.append(current, command, origin.as_ref(), writer));
        let (new, effects, owed, envelopes) = match appended {
            Ok(appended) => appended,
            Err(e) => return self.refuse(e),
        };
        let store = self.handles.store.clone();
        AtomicResponse::new(Box::pin(
            async move { store.sync().await }
                .into_actor(self)
                .map(move |synced, actor, ctx| {
                    actor.settle(ctx, synced, new, effects, owed, envelopes)
                }),
        ))
    }
}

/// What a command appended: the run after it (`None` for a missing run), the effects to carry
/// out once it is durable, the webhook deliveries it owes, and its events (for the projector).
type Appended = (
    Option<Run>,
    Vec<Effect>,
    Vec<crate::webhooks::Owed>,
    Vec<store::Envelope>,
);

/// The writer a command appends as. Recording how an execution ended (what it took and used,
/// which come just before) is admitted while the store is only low on space; everything else
/// adds work (or starts an agent that would add output).
fn writer_of(command: &Command) -> store::Writer {
    match command {
        Command::Finish { .. } | Command::Delivered { .. } | Command::RecordUsage { .. } => {
            store::Writer::Internal
        }
        _ => store::Writer::Client,
    }
}

impl<R: Report + Unpin> RunActor<R> {
    /// Decides `command` on the `current` run and appends its events (after the webhook
    /// deliveries they owe); nothing is synced yet.
    fn append(
        &self,
        current: Option<Run>,
        command: Command,
        origin: Option<&Origin>,
        writer: store::Writer,
    ) -> Result<Appended, Error> {
        let decision = decide(current.as_ref(), command)?;
        // Refused before anything is written: the client is told so, and nothing of the
        // command reaches the log.
        self.handles.store.admit(writer)?;
        let at = match (&current, decision.events.first()) {
            // A new run's creation time is the one its id encodes.
            (None, _) => self.id.created_at(),
            (Some(run), _) => now().max(run.updated_at),
        };
        let first_seq = current.as_ref().map_or(0, |r| r.next_seq);
        let new = decision.events.iter().fold(current.clone(), |run, event| {
            evolve(run, self.id, event, at)
        });
        // The webhook deliveries the decision owes, written before its events: sled
        // recovers a prefix of its writes, so a durable event always has its entries
        // (`crate::webhooks`). Nothing, without configured webhooks.
        let webhooks = &self.handles.webhooks;
        let owed = webhooks.owed(
            current.as_ref(),
            new.as_ref(),
            self.id,
            first_seq,
            at,
            &decision.events,
        );
        webhooks.write(&owed)?;
        let envelopes = store::envelopes(self.id, first_seq, at, decision.events, origin);
        let projector = &self.handles.projector;
        projector.mark(self.id)?;
        if let Err(e) = self.handles.store.append(&envelopes) {
            projector.abandon(self.id);
            // Refused before anything reached the log: a later command may write these
            // positions, so the entries go. (After a failed sled write the store refuses
            // everything until a restart, whose outbox pass settles them.)
            if !matches!(e, store::Error::Sled(_)) {
                webhooks.withdraw(&owed);
            }
            return Err(e.into());
        }
        Ok((new, decision.effects, owed, envelopes))
    }

    /// The reply to a command refused before anything was synced.
    fn refuse(&self, e: Error) -> AtomicResponse<Self, Result<Outcome, Error>> {
        // A run that holds no actor (finished, queued, missing) lets it stop once the
        // reply is out — stopping before would drop the reply.
        let finished = self
            .state
            .as_ref()
            .is_some_and(|s| s.as_ref().is_none_or(|r| !holds_actor(r)));
        AtomicResponse::new(Box::pin(fut::ready(Err(e)).map(
            move |r, actor: &mut Self, ctx: &mut Context<Self>| {
                if finished {
                    actor.retire(ctx);
                }
                r
            },
        )))
    }

    /// After the sync: on success the run goes to the projector, its deliveries to the
    /// webhooks and its effects to the executor, and the reply carries it; a failed sync
    /// forgets the cached state and retires the actor.
    fn settle(
        &mut self,
        ctx: &mut Context<Self>,
        synced: Result<(), store::Error>,
        new: Option<Run>,
        effects: Vec<Effect>,
        owed: Vec<crate::webhooks::Owed>,
        envelopes: Vec<store::Envelope>,
    ) -> Result<Outcome, Error> {
        let projector = &self.handles.projector;
        if let Err(e) = synced {
            // The append may or may not be on disk; forget the cached state so the
            // next activation folds whatever the log really holds (and, the run
            // being dirty, repairs its index entry).
            projector.abandon(self.id);
            self.state = None;
            self.retire(ctx);
            return Err(Error::Store(e));
        }
        let Some(run) = new else {
            projector.abandon(self.id);
            return Err(Error::Rejected(runledger_domain::Rejection::NotFound));
        };
        // The index follows in the background; reads see the new row at once.
        // Its events too: the audit index is written from them, not the log read back.
        projector.submit_with(run.clone(), envelopes);
        self.handles.webhooks.hand_over(owed);
        let at_capacity = self.dispatch(effects, &run);
        self.handles.feed.publish(self.id, run.next_seq);
        if holds_actor(&run) {
            self.state = Some(Some(run.clone()));
        } else {
            // A stopping actor handles nothing more, so its state need not be kept.
            self.state = None;
            self.retire(ctx);
        }
        Ok(Outcome { run, at_capacity })
    }
}
