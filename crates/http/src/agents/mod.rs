//! Handlers of the Oz read endpoints beside runs that the official clients call: the agents
//! (skills) list, the models list, a run's conversation (`GET /agent/runs/{id}/conversation`,
//! and the same by conversation id), the session and conversation redirect checks, a run's
//! handoff attachments, and the agent identities, which runledger does not have and answers
//! `422 operation_not_supported`. What each answers, and why, is in docs/api.md ("Agents,
//! models and conversations"). Runs are read through the `RunHandle` and the
//! `TranscriptReader`, with the same team scoping as `GET /agent/runs/{id}`.

mod catalog;
mod conversation;
mod identities;
mod reads;
mod redirects;
mod step;

pub use catalog::*;
pub use identities::*;
pub use reads::*;
pub use redirects::*;
