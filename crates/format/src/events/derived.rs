//! The payload of a `Derived` event as JSON, both directions: the run another was made from
//! and how (`{"from", "kind": "rerun", "pinned", "pins"}` or `{"from", "kind": "fork",
//! "after_execution", "message"}`), and back, refused unless it is exactly what was written.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use runledger_domain::{Derivation, Event, RepoPin, RunDerivation, RunId};

use super::error::{bad, EventJsonError};

/// The payload of a `Derived` event: the id of the run this one was made from (`from`) and
/// how: a rerun (its repositories pinned to the commits in `pins` when `pinned`) or a fork
/// after execution `after_execution` with `message`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum DerivedData {
    Rerun {
        from: String,
        pinned: bool,
        pins: Vec<RepoPinData>,
    },
    Fork {
        from: String,
        after_execution: u32,
        message: String,
    },
}

/// A repository held at one commit.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepoPinData {
    pub repository: String,
    pub commit: String,
}

impl DerivedData {
    pub(crate) fn from(d: &RunDerivation) -> DerivedData {
        let from = d.from.clone();
        match &d.kind {
            Derivation::Rerun { pinned, pins } => DerivedData::Rerun {
                from,
                pinned: *pinned,
                pins: pins
                    .iter()
                    .map(|p| RepoPinData {
                        repository: p.repository.clone(),
                        commit: p.commit.clone(),
                    })
                    .collect(),
            },
            Derivation::Fork {
                after_execution,
                message,
            } => DerivedData::Fork {
                from,
                after_execution: *after_execution,
                message: message.clone(),
            },
        }
    }

    pub(crate) fn event(self) -> Result<Event, EventJsonError> {
        let (from, kind) = match self {
            DerivedData::Rerun { from, pinned, pins } => {
                if !pinned && !pins.is_empty() {
                    return Err(bad("an unpinned rerun has no pins".to_string()));
                }
                let pins = pins
                    .into_iter()
                    .map(|p| {
                        if p.commit.len() == 40 && p.commit.bytes().all(|b| b.is_ascii_hexdigit()) {
                            Ok(RepoPin {
                                repository: p.repository,
                                commit: p.commit,
                            })
                        } else {
                            Err(bad(format!(
                                "commit {:?} is not 40 hexadecimal digits",
                                p.commit
                            )))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (from, Derivation::Rerun { pinned, pins })
            }
            DerivedData::Fork {
                from,
                after_execution,
                message,
            } => (
                from,
                Derivation::Fork {
                    after_execution,
                    message,
                },
            ),
        };
        if from.parse::<RunId>().is_err() {
            return Err(bad(format!("from {from:?} is not a run id (a ULID)")));
        }
        Ok(Event::Derived(RunDerivation { from, kind }))
    }
}
