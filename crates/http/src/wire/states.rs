//! The DTOs of a run's past states (`GET /agent/runs/{id}/states`): each event of the run with
//! the run as it was right after it and the `RunItem` fields that event changed. The handler
//! (`travel.rs`) writes these shapes one item at a time; the structs are what the OpenAPI
//! document describes and what its tests compare the bytes with.

use serde::Serialize;
use utoipa::ToSchema;

use super::{PageInfo, RunEvent, RunItem};

/// One event of a run with the run's state right after it.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunStateItem<'a> {
    /// The event's position in the run's log, from 0.
    pub seq: u64,
    /// When the event was recorded.
    #[schema(format = DateTime)]
    pub at: String,
    /// The event's type, as `event.type`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The event as `GET /agent/runs/{id}/events` answers it.
    pub event: RunEvent<'a>,
    /// The run as it was right after the event (what `GET /agent/runs/{id}?as_of_seq=` answers).
    pub state: RunItem<'a>,
    /// The top-level fields of `state` whose value differs from the state before the event
    /// (present in one and absent in the other counts); every field of `state` for the first
    /// event. Sorted.
    pub changed: Vec<String>,
}

/// One page of a run's past states, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunStates<'a> {
    pub run_id: String,
    pub states: Vec<RunStateItem<'a>>,
    /// `next_cursor` is the `cursor` of the next page (a sequence number as text).
    pub page_info: PageInfo,
}
