//! Audit queries: a page of run events across runs, newest first, and a follower's next events
//! oldest first, under one set of filters. The query walks one tree, chosen for the most
//! selective filter it can seek to (an actor, else the types, else the team), over the range
//! its time bounds and cursor leave, merging the teams' ranges when it covers every team; the
//! other filters are checked against each entry's summary. A `run_id` filter reads that run's
//! log instead. The events themselves are read from the log, only for the entries answered.
//! It must not decide who may see which team (the caller sets `team`).

use std::collections::VecDeque;

use runledger_domain::{RunId, Timestamp};
use runledger_store::{Envelope, Store};

use super::keys::{prefix, split_entry, Position, Summary, Tree};
use crate::blocks;
use crate::keys::{team_hash, TeamHash, TEAM_LEN};
use crate::{Error, Index};

/// What an audit query asks for; a page's cursor and a follower's start are given beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this team's runs; `None`: every team's (an admin key's query).
    pub team: Option<String>,
    /// Only events of these types (as the events API names them); empty: every type.
    pub types: Vec<String>,
    /// Only events attributed to this key id.
    pub actor: Option<String>,
    /// Only this run's events.
    pub run_id: Option<RunId>,
    /// Only events at or after this time.
    pub since: Option<Timestamp>,
    /// Only events before this time.
    pub until: Option<Timestamp>,
}

/// One event an audit query answers, with its run's team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditItem {
    pub envelope: Envelope,
    pub team: String,
}

impl AuditItem {
    pub fn position(&self) -> Position {
        Position::of(&self.envelope)
    }
}

/// A page of an audit query, newest first; `next` is the cursor of the following page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    pub items: Vec<AuditItem>,
    pub next: Option<Position>,
}

/// Positions from `low` (included) to `high` (excluded); `None`: unbounded.
#[derive(Debug, Clone, Copy)]
struct Span {
    low: Option<Position>,
    high: Option<Position>,
}

impl Span {
    fn of(query: &AuditQuery) -> Span {
        Span {
            low: query.since.map(Position::first_at),
            high: query.until.map(Position::first_at),
        }
    }

    fn contains(&self, p: Position) -> bool {
        self.low.is_none_or(|low| p >= low) && self.high.is_none_or(|high| p < high)
    }

    fn raise_low(&mut self, low: Position) {
        self.low = Some(self.low.map_or(low, |l| l.max(low)));
    }

    fn lower_high(&mut self, high: Position) {
        self.high = Some(self.high.map_or(high, |h| h.min(high)));
    }
}

/// The position right after `p`.
fn successor(p: Position) -> Position {
    match p.seq.checked_add(1) {
        Some(seq) => Position { seq, ..p },
        None => Position {
            run_id: RunId(p.run_id.0.wrapping_add(1)),
            seq: 0,
            ..p
        },
    }
}

type Entries = Box<dyn Iterator<Item = Result<(Position, Summary), Error>>>;

/// The entries of the range `prefix` of `tree` within `span`, in the walk's order. A block
/// split while the walk passes it can show some of its entries a second time (sled's
/// iterators are not snapshots); positions only move one way in a walk, so those are skipped.
fn walk(tree: &sled::Tree, prefix: &[u8], span: Span, newest_first: bool) -> Entries {
    // `positions` answers the entries strictly beyond a bound; an entry is longer than its
    // position, so the entries beyond the bare 32 bytes of `p` are those at `p` and after
    // (ascending), or those before `p` (descending).
    let start = if newest_first { span.high } else { span.low };
    let start = start.map(Position::to_bytes);
    let mut inner = blocks::positions(tree, prefix, start.as_ref().map(|s| &s[..]), newest_first);
    let mut last: Option<Position> = None;
    let mut done = false;
    Box::new(std::iter::from_fn(move || {
        while !done {
            let entry = match inner.next()? {
                Ok(entry) => entry,
                Err(e) => return Some(Err(e)),
            };
            let Some((position, summary)) = split_entry(&entry) else {
                return Some(Err(corrupt(&entry)));
            };
            let beyond = if newest_first {
                span.low.is_some_and(|low| position < low)
            } else {
                span.high.is_some_and(|high| position >= high)
            };
            if beyond {
                done = true;
                break;
            }
            let seen = last.is_some_and(|l| {
                if newest_first {
                    position >= l
                } else {
                    position <= l
                }
            });
            if seen {
                continue;
            }
            last = Some(position);
            return Some(Ok((position, summary)));
        }
        None
    }))
}

impl Index {
    /// One page of `query`, newest first, before the cursor `before` (excluded) if given.
    pub fn audit_page(
        &self,
        store: &Store,
        query: &AuditQuery,
        before: Option<Position>,
        limit: usize,
    ) -> Result<AuditPage, Error> {
        let mut span = Span::of(query);
        if let Some(before) = before {
            span.lower_high(before);
        }
        let mut items = self.audit_scan(store, query, span, true, limit.saturating_add(1))?;
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(AuditItem::position)
        } else {
            None
        };
        Ok(AuditPage { items, next })
    }

    /// Up to `max` events of `query` after `after` (excluded) and at or before `upto`, oldest
    /// first: a follower's next batch.
    pub fn audit_after(
        &self,
        store: &Store,
        query: &AuditQuery,
        after: Position,
        upto: Timestamp,
        max: usize,
    ) -> Result<Vec<AuditItem>, Error> {
        let mut span = Span::of(query);
        span.raise_low(successor(after));
        span.lower_high(Position::first_at(Timestamp(upto.0.saturating_add(1))));
        self.audit_scan(store, query, span, false, max)
    }

    fn audit_scan(
        &self,
        store: &Store,
        query: &AuditQuery,
        span: Span,
        newest_first: bool,
        max: usize,
    ) -> Result<Vec<AuditItem>, Error> {
        if max == 0 || span.low.zip(span.high).is_some_and(|(l, h)| l >= h) {
            return Ok(Vec::new());
        }
        if let Some(run_id) = query.run_id {
            return self.audit_run(store, query, run_id, span, newest_first, max);
        }
        let audit = self.trees().audit;
        let teams = match &query.team {
            Some(team) => vec![team_hash(team)],
            None => teams(&audit.team)?,
        };
        let (tree, values): (&sled::Tree, Vec<(Tree, &str)>) =
            match (&query.actor, &query.types[..]) {
                (Some(actor), _) => (&audit.actor, vec![(Tree::Actor, actor.as_str())]),
                (None, []) => (&audit.team, vec![(Tree::Team, "")]),
                (None, types) => (
                    &audit.kind,
                    types.iter().map(|t| (Tree::Type, t.as_str())).collect(),
                ),
            };
        let mut sources: Vec<std::iter::Peekable<Entries>> = Vec::new();
        for team in &teams {
            for (which, value) in &values {
                let prefix = prefix(*which, team, value);
                sources.push(walk(tree, &prefix, span, newest_first).peekable());
            }
        }
        let mut found = Vec::new();
        while found.len() < max {
            // The source whose next entry comes first in the walk's order.
            let mut best: Option<(usize, Position)> = None;
            for (i, source) in sources.iter_mut().enumerate() {
                let position = match source.peek() {
                    None => continue,
                    Some(Err(_)) => {
                        // Surface the error.
                        if let Some(Err(e)) = source.next() {
                            return Err(e);
                        }
                        continue;
                    }
                    Some(Ok((position, _))) => *position,
                };
                let better = best.is_none_or(|(_, b)| {
                    if newest_first {
                        position > b
                    } else {
                        position < b
                    }
                });
                if better {
                    best = Some((i, position));
                }
            }
            let Some((i, position)) = best else { break };
            let Some(Ok((_, summary))) = sources[i].next() else {
                continue;
            };
            if !matches(query, &summary) {
                continue;
            }
            found.push((position, summary.team));
        }
        let mut items = Vec::with_capacity(found.len());
        for (position, team) in found {
            // The log is the truth; the entry only says where to look.
            if let Some(envelope) = store.run_events(position.run_id, position.seq).next() {
                let envelope = envelope?;
                if envelope.seq == position.seq {
                    items.push(AuditItem { envelope, team });
                }
            }
        }
        Ok(items)
    }

    /// A `run_id` query: the run's log, read in order, keeping the `max` events the walk
    /// answers (the newest ones for a newest-first walk).
    fn audit_run(
        &self,
        store: &Store,
        query: &AuditQuery,
        run_id: RunId,
        span: Span,
        newest_first: bool,
        max: usize,
    ) -> Result<Vec<AuditItem>, Error> {
        let Some(row) = self.get(run_id)? else {
            return Ok(Vec::new());
        };
        if query.team.as_ref().is_some_and(|team| *team != row.team) {
            return Ok(Vec::new());
        }
        let mut kept: VecDeque<Envelope> = VecDeque::new();
        for envelope in store.run_events(run_id, 0) {
            let envelope = envelope?;
            // Only what the index holds, as for every other query: the row's events are
            // durable, an append after them may not be yet.
            if envelope.seq >= row.next_seq {
                break;
            }
            let position = Position::of(&envelope);
            if !span.contains(position) {
                continue;
            }
            if !matches(query, &super::keys::summary(&row.team, &envelope)) {
                continue;
            }
            kept.push_back(envelope);
            if kept.len() > max {
                if newest_first {
                    kept.pop_front();
                } else {
                    kept.pop_back();
                    break;
                }
            }
        }
        // A run's events are in sequence order, which is time order but for a clock stepped
        // back: sort by position, as the index walks.
        let mut kept: Vec<Envelope> = kept.into();
        kept.sort_by_key(Position::of);
        if newest_first {
            kept.reverse();
        }
        Ok(kept
            .into_iter()
            .map(|envelope| AuditItem {
                envelope,
                team: row.team.clone(),
            })
            .collect())
    }
}

/// Whether an entry's summary passes the query's filters (the team's too: a hash that
/// collided must not let another team's event through).
fn matches(query: &AuditQuery, summary: &Summary) -> bool {
    query.team.as_ref().is_none_or(|team| *team == summary.team)
        && (query.types.is_empty() || query.types.contains(&summary.kind))
        && query
            .actor
            .as_ref()
            .is_none_or(|actor| summary.actor.as_ref() == Some(actor))
}

/// The teams with events in the `audit_team` tree: one seek per team (every block key starts
/// with its team).
fn teams(tree: &sled::Tree) -> Result<Vec<TeamHash>, Error> {
    let mut out = Vec::new();
    let mut from: Vec<u8> = Vec::new();
    while let Some(entry) = tree.range(from.as_slice()..).keys().next() {
        let key = entry?;
        let team: TeamHash = key
            .get(..TEAM_LEN)
            .and_then(|t| t.try_into().ok())
            .ok_or_else(|| corrupt(&key))?;
        out.push(team);
        match u64::from_be_bytes(team).checked_add(1) {
            Some(next) => from = next.to_be_bytes().to_vec(),
            None => break,
        }
    }
    Ok(out)
}

fn corrupt(key: &[u8]) -> Error {
    Error::CorruptRow {
        run_id: String::new(),
        detail: format!("audit index entry of {} bytes does not decode", key.len()),
    }
}
