//! The payload of a `Parented` event as JSON, both directions: the run that spawned this one
//! and that run's ancestors (`{"parent_run_id", "ancestor_run_ids"}`, nearest first), and
//! back, refused unless every id is a run id as the API writes it and the line is no longer
//! than a tree may be deep, so an imported log holds only what the service could have written.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use runledger_domain::parent::MAX_DEPTH;
use runledger_domain::{Event, RunId, RunParent};

use super::error::{bad, EventJsonError};

/// The payload of a `Parented` event: the run that spawned this one (`parent_run_id`) and
/// the parent's own ancestors, nearest first (`ancestor_run_ids`: its parent, then that
/// run's parent, up to the root).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ParentedData {
    pub parent_run_id: String,
    pub ancestor_run_ids: Vec<String>,
}

impl ParentedData {
    pub(crate) fn from(p: &RunParent) -> ParentedData {
        ParentedData {
            parent_run_id: p.parent.clone(),
            ancestor_run_ids: p.ancestors.clone(),
        }
    }

    pub(crate) fn event(self) -> Result<Event, EventJsonError> {
        if self.ancestor_run_ids.len() >= MAX_DEPTH as usize {
            return Err(bad(format!(
                "a run has at most {MAX_DEPTH} ancestors; this one names {}",
                self.ancestor_run_ids.len() + 1
            )));
        }
        for id in std::iter::once(&self.parent_run_id).chain(&self.ancestor_run_ids) {
            let canonical = id.parse::<RunId>().ok().map(|r| r.to_string());
            if canonical.as_deref() != Some(id.as_str()) {
                return Err(bad(format!("{id:?} is not a run id (a ULID)")));
            }
        }
        Ok(Event::Parented(RunParent {
            parent: self.parent_run_id,
            ancestors: self.ancestor_run_ids,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_run_ids_within_the_deepest_tree_are_read() {
        let id = RunId::new(runledger_domain::Timestamp(1_763_700_000_000), 7).to_string();
        let ok = ParentedData {
            parent_run_id: id.clone(),
            ancestor_run_ids: vec![id.clone()],
        };
        assert!(ok.event().is_ok());
        let lower = ParentedData {
            parent_run_id: id.to_ascii_lowercase(),
            ancestor_run_ids: Vec::new(),
        };
        assert!(lower.event().is_err());
        let deep = ParentedData {
            parent_run_id: id.clone(),
            ancestor_run_ids: vec![id; MAX_DEPTH as usize],
        };
        assert!(deep.event().is_err());
    }
}
