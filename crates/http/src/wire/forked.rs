//! `forked_from` of a run's JSON (runledger's extension): the run and the execution a fork
//! started from, read from the run's `Derivation::Fork`.

use serde::Serialize;
use utoipa::ToSchema;

use runledger_domain::{Derivation, Run};

/// The run a fork was made from, and the execution whose end it started from.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForkedFrom<'a> {
    /// The original run's id.
    #[schema(value_type = String)]
    pub run_id: &'a str,
    /// The original's execution whose snapshot the fork started from (1 is the first).
    pub execution: u32,
}

impl<'a> ForkedFrom<'a> {
    /// `Some` for a fork.
    pub fn of(run: &'a Run) -> Option<ForkedFrom<'a>> {
        let derived = run.derived.as_ref()?;
        match &derived.kind {
            Derivation::Fork {
                after_execution, ..
            } => Some(ForkedFrom {
                run_id: &derived.from,
                execution: *after_execution,
            }),
            _ => None,
        }
    }
}
