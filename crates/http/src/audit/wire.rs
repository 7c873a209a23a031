//! The JSON of the audit events endpoint: one event as a line of `GET /agent/runs/{id}/events`
//! writes it plus its run's `team`, and a page of them. Shared by the page and the live
//! stream; it knows no request.

use serde::Serialize;
use utoipa::ToSchema;

use crate::wire::{PageInfo, RunEvent};
use runledger_runs::query::AuditItem;

/// One run event of an audit answer: the fields of a line of the run's events, and its team.
#[derive(Serialize, ToSchema)]
pub struct AuditEvent<'a> {
    #[serde(flatten)]
    pub event: RunEvent<'a>,
    /// The team of the event's run.
    pub team: &'a str,
}

impl<'a> AuditEvent<'a> {
    pub fn from(item: &'a AuditItem) -> AuditEvent<'a> {
        AuditEvent {
            event: RunEvent::from(&item.envelope),
            team: &item.team,
        }
    }
}

/// A page of run events across runs, newest first.
#[derive(Serialize, ToSchema)]
pub struct AuditEvents<'a> {
    pub events: Vec<AuditEvent<'a>>,
    pub page_info: PageInfo,
}
