//! The `AdminAudit` handle: the admin audit log as the HTTP edge reads it (one page of records,
//! newest first, filtered), and the one way a running server records an administrative act
//! that is not a key's or a team's (those are recorded by `Keys` in the same durable write as
//! the act). It never writes a run's events and never decides what is an administrative act.

use runledger_base::clock::now;
use runledger_domain::{AdminEvent, Origin, Timestamp};
use runledger_store::{AdminEntry, Store};

use crate::failure::StorageError;

/// The most records one page holds.
pub const MAX_PAGE: usize = 1_000;

/// What a page of the admin log asks for.
#[derive(Debug, Clone, Default)]
pub struct AdminQuery {
    /// Record types to keep (`AdminEvent::kind`); empty keeps every type.
    pub types: Vec<String>,
    /// Keep only acts done with this key (its id).
    pub actor: Option<String>,
    /// Keep only records at or after this time.
    pub since: Option<Timestamp>,
    /// Keep only records at or before this time.
    pub until: Option<Timestamp>,
    /// Start below this sequence number (the `next` of the page before).
    pub before: Option<u64>,
    /// At most this many records (1..=`MAX_PAGE`).
    pub limit: usize,
}

/// One page, newest first; `next` is where the following page starts, `None` at the end.
#[derive(Debug, Clone)]
pub struct AdminPage {
    pub items: Vec<AdminEntry>,
    pub next: Option<u64>,
}

/// A cheap-to-clone handle on the admin audit log.
#[derive(Clone)]
pub struct AdminAudit {
    store: Store,
}

impl AdminAudit {
    pub fn new(store: Store) -> AdminAudit {
        AdminAudit { store }
    }

    /// Records `event` done now by `origin`, durably, before returning it.
    pub async fn record(
        &self,
        event: AdminEvent,
        origin: Origin,
    ) -> Result<AdminEntry, StorageError> {
        let entry = self.store.append_admin(now(), event, origin)?;
        self.store.sync().await?;
        Ok(entry)
    }

    /// One page of the records `query` keeps, newest first. Reads from the newest record down
    /// until the page is full, so a page costs what it skips and keeps.
    pub fn page(&self, query: &AdminQuery) -> Result<AdminPage, StorageError> {
        let limit = query.limit.clamp(1, MAX_PAGE);
        let mut items = Vec::new();
        let mut next = None;
        for entry in self.store.admin_records_rev(query.before) {
            let entry = entry?;
            if !keeps(query, &entry) {
                continue;
            }
            if items.len() == limit {
                // A record beyond the full page: there is a next page, starting below the
                // last one taken.
                next = items.last().map(|e: &AdminEntry| e.record.seq);
                break;
            }
            items.push(entry);
        }
        Ok(AdminPage { items, next })
    }
}

fn keeps(query: &AdminQuery, entry: &AdminEntry) -> bool {
    let record = &entry.record;
    (query.types.is_empty() || query.types.iter().any(|t| t == record.event.kind()))
        && query.actor.as_ref().is_none_or(|actor| {
            record
                .origin
                .key
                .as_ref()
                .is_some_and(|key| &key.id == actor)
        })
        && query.since.is_none_or(|since| record.at >= since)
        && query.until.is_none_or(|until| record.at <= until)
}
