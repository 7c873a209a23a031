//! Trees of runs on the run handle: creating a run another run spawned (its parent and the
//! parent's ancestors recorded with it, within the limits of depth and breadth), listing a
//! run's children and descendants from the read index, and cancelling a run's unfinished
//! descendants when it is cancelled. The rules are `runledger_domain::parent`'s; this module
//! reads the counts they need and keeps two creates from racing past a limit.
//!
//! A run without a parent never comes here: its create path is `Runs::create` as before.

use runledger_domain::parent::Refusal;
use runledger_domain::{
    admit_child, Attachment, Command, Origin, Rejection, Run, RunAdmitted, RunId, RunState,
    TreeLimits,
};
use runledger_projection::Query;

use super::error::Error;
use super::run_actor::Outcome;
use super::run_handle::RunHandle;

/// Held while a child is admitted and while a cancel cascades, so that the count of a run's
/// children cannot change between the check of `max_children` and the child's creation, and a
/// child cannot be admitted under a run whose cascade already listed its descendants. One lock
/// for the process: only creates that name a parent and cascading cancels take it, and each
/// holds it for a few index reads and actor round trips.
static TREE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Most runs one page of an internal walk of the index holds.
const PAGE: usize = 500;

/// Why a run could not be created under a parent.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The parent does not exist (or belongs to another team, which a caller cannot tell).
    #[error("parent_run_id: no run with id {0}")]
    NoParent(String),
    /// The parent was cancelled: its cascade may already have run, so a child of it would
    /// outlive the cancel.
    #[error("parent_run_id: run {0} was cancelled; a cancelled run gets no children")]
    ParentCancelled(String),
    /// A limit of the tree (`max_depth`, `max_children`).
    #[error(transparent)]
    Limit(#[from] Refusal),
    /// The create itself failed (a full queue, the store, an unavailable actor).
    #[error(transparent)]
    Failed(#[from] Error),
}

impl RunHandle {
    /// Creates a run spawned by run `parent` of team `team` (under `id` when chosen
    /// beforehand, see `Runs::new_id`, else a fresh one), if `limits` admit it, its first
    /// events recorded with `origin`. An `id` that exists is answered with its run, as
    /// `Runs::create_with_id` does.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_child(
        &self,
        id: Option<RunId>,
        parent: RunId,
        limits: TreeLimits,
        created: RunAdmitted,
        attachments: Vec<Attachment>,
        origin: Origin,
    ) -> Result<Outcome, ChildError> {
        if let Some(run) = id.map(|id| self.runs.get(id)).transpose()?.flatten() {
            return Ok(Outcome {
                run,
                at_capacity: false,
            });
        }
        let _tree = TREE.lock().await;
        let parent_run = self
            .runs
            .get(parent)?
            .filter(|run| run.team == created.team)
            .ok_or_else(|| ChildError::NoParent(parent.to_string()))?;
        if parent_run.state == RunState::Cancelled {
            return Err(ChildError::ParentCancelled(parent.to_string()));
        }
        // One more than the limit is enough to know it is reached.
        let children = self
            .children_page(&parent_run, limits.max_children as usize + 1)
            .await?
            .len();
        let line = admit_child(&parent_run, children, limits)?;
        let _waiting = self.runs.reserve(&created)?;
        // A fresh id has no log yet, so the actor need not read one (as `Runs::create`).
        let (id, fresh) = match id {
            Some(id) => (id, false),
            None => (self.runs.new_id(), true),
        };
        let command = Command::create_child(created, attachments, line);
        match self
            .runs
            .execute_inner(id, command, Some(origin), fresh)
            .await
        {
            Err(Error::Rejected(Rejection::AlreadyExists)) => match self.runs.get(id)? {
                Some(run) => Ok(Outcome {
                    run,
                    at_capacity: false,
                }),
                None => Err(Error::Rejected(Rejection::AlreadyExists).into()),
            },
            other => Ok(other?),
        }
    }

    /// Up to `limit` children of `parent` (the runs it spawned, not their descendants), most
    /// recently updated first, from the read index.
    pub async fn children(&self, parent: &Run, limit: usize) -> Result<Vec<Run>, Error> {
        self.children_page(parent, limit).await
    }

    async fn children_page(&self, parent: &Run, limit: usize) -> Result<Vec<Run>, Error> {
        let query = Query {
            team: parent.team.clone(),
            parent_run_id: Some(parent.id.to_string()),
            limit,
            ..Query::default()
        };
        Ok(self.runs.list(&query).await?.runs)
    }

    /// Cancels every unfinished (queued or in progress) descendant of the cancelled run
    /// `ancestor`, each recorded with `origin` and the cause naming the ancestor's cancel;
    /// answers the ids of the runs it cancelled. A descendant that ends on its own meanwhile
    /// is left as it ended.
    pub async fn cancel_descendants(
        &self,
        ancestor: &Run,
        by: &str,
        origin: &Origin,
    ) -> Result<Vec<RunId>, Error> {
        let _tree = TREE.lock().await;
        let mut query = Query {
            team: ancestor.team.clone(),
            ancestor_run_id: Some(ancestor.id.to_string()),
            states: vec![RunState::Queued, RunState::InProgress],
            limit: PAGE,
            ..Query::default()
        };
        let mut unfinished = Vec::new();
        loop {
            let page = self.runs.list(&query).await?;
            unfinished.extend(page.runs.iter().map(|run| run.id));
            match page.next_cursor {
                Some(cursor) => query.cursor = Some(cursor),
                None => break,
            }
        }
        let origin = Origin {
            cause: Some(format!(
                "cascade: its ancestor run {} was cancelled",
                ancestor.id
            )),
            ..origin.clone()
        };
        let mut cancelled = Vec::with_capacity(unfinished.len());
        for id in unfinished {
            let command = Command::Cancel { by: by.to_string() };
            match self
                .runs
                .execute_as(id, command, Some(origin.clone()))
                .await
            {
                Ok(_) => cancelled.push(id),
                Err(Error::Rejected(Rejection::AlreadyTerminal(_))) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(cancelled)
    }
}
