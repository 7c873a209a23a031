//! JSON wire types of the v1 API (OpenAPI `RunAgentRequest`, `RunItem`, …) and their mapping
//! to and from the domain. Field names and enums follow the OpenAPI document; optional fields
//! are omitted rather than sent as null, because the official clients validate strictly.
//!
//! Each type also carries its schema in the service's own document (`/openapi.json`): what a handler
//! serialises is what the document describes. String fields that hold a domain enum's wire
//! name say so with `value_type`, pointing at a schema built from that enum's values.
//!
//! The types live by concern: `requests` and `responses` here, `agents` for the agents, models,
//! conversation and redirect reads, `token` for session links, and
//! the parts the CLI shares (times, runs' configuration, stored events, API keys, string-enum
//! schemas) in `runledger_format`, re-exported here so handlers name one module.

mod agents;
mod forked;
mod orchestration;
mod requests;
mod responses;
mod schedules;
mod schema;
mod states;
mod token;

pub use agents::*;
pub use forked::ForkedFrom;
pub use orchestration::*;
pub use requests::*;
pub use responses::*;
pub use runledger_format::events::*;
pub use runledger_format::keys::*;
pub use runledger_format::run::*;
pub use runledger_format::schema::*;
pub use runledger_format::time::*;
pub use schedules::*;
pub use schema::*;
pub use states::*;
pub use token::capability;
pub use token::*;
