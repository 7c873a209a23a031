//! List queries over the read index: filters, sort orders and opaque cursors.
//!
//! A query lists the runs of one team, and walks only that team's ranges (the team is part of
//! every index key, see `keys.rs`): another team's runs are never read. The filters that have
//! secondary indexes (state, name, creator, model_id, source, environment_id, artifact_type,
//! schedule_id, rerun_of, ancestor_run_id, parent_run_id) are answered by walking the matching index range of the team in the requested
//! order — never by scanning all runs. Remaining filters (time bounds, `q`, metadata, further indexed fields)
//! are checked on each candidate. A cursor is the position of the last returned run in
//! the walked order plus a fingerprint of the query, so paging visits every matching run exactly
//! once while nothing changes, and a cursor cannot be replayed against a different query.

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::blocks::{self, Positions};
use super::keys::{self, Field};
use super::row::decode_row;
use super::{Error, Index};
use runledger_domain::{Run, RunId, RunState, SourceType, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SortBy {
    #[default]
    UpdatedAt,
    CreatedAt,
    Title,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Order {
    #[default]
    Desc,
    Asc,
}

/// A validated list query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// The team whose runs are listed: the team of the key that asks. Empty (the default)
    /// matches no run, so a query nobody scoped lists nothing.
    pub team: String,
    /// Lists the runs of every team instead of `team`'s: only for the service's own walks
    /// (startup recovery), never set from a request.
    pub every_team: bool,
    pub states: Vec<RunState>,
    pub name: Option<String>,
    pub model_id: Option<String>,
    pub creator: Option<String>,
    pub source: Option<SourceType>,
    pub environment_id: Option<String>,
    /// A run matches if it holds at least one artifact of this type (`ArtifactKind::type_name`).
    pub artifact_type: Option<&'static str>,
    /// A run matches if a firing of this schedule made it: the schedule's id as the API
    /// writes it (`keys::schedule_value`).
    pub schedule_id: Option<String>,
    /// A run matches if it is a rerun of this run: its id as the API writes it.
    pub rerun_of: Option<String>,
    /// A run matches if this run is among its ancestors (at any depth): its id as the API
    /// writes it.
    pub ancestor_run_id: Option<String>,
    /// A run matches if this run spawned it (a child, not a later descendant).
    pub parent_run_id: Option<String>,
    /// Exclusive bounds, in milliseconds (after: floor, before: ceiling of the given time).
    pub created_after: Option<Timestamp>,
    pub created_before: Option<Timestamp>,
    pub updated_after: Option<Timestamp>,
    pub q: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub skill_spec: Option<String>,
    /// The query names something runledger runs never have (a parent run, a state such as
    /// `BLOCKED`, a schedule id that is not one): no run matches.
    pub matches_nothing: bool,
    pub sort_by: SortBy,
    pub order: Order,
    pub limit: usize,
    pub cursor: Option<Cursor>,
}

/// Where the previous page stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    version: u8,
    fingerprint: [u8; 8],
    position: Vec<u8>,
}

const CURSOR_VERSION: u8 = 1;

impl Cursor {
    pub fn encode(&self) -> String {
        let bytes = postcard::to_allocvec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    pub fn decode(text: &str) -> Result<Cursor, Error> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| Error::BadCursor("not a cursor returned by this server"))?;
        let cursor: Cursor = postcard::from_bytes(&bytes)
            .map_err(|_| Error::BadCursor("not a cursor returned by this server"))?;
        if cursor.version != CURSOR_VERSION {
            return Err(Error::BadCursor("cursor from an incompatible version"));
        }
        Ok(cursor)
    }
}

/// One page of results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub runs: Vec<Run>,
    pub next_cursor: Option<Cursor>,
}

impl Query {
    /// A fingerprint of everything but the cursor and the page size.
    fn fingerprint(&self) -> [u8; 8] {
        let mut h = Sha256::new();
        let text = format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            self.team,
            self.every_team,
            self.states,
            self.name,
            self.model_id,
            self.creator,
            self.source,
            self.environment_id,
            self.created_after,
            self.created_before,
            self.updated_after,
            self.q,
            self.metadata,
            self.skill_spec,
            self.matches_nothing,
            self.sort_by,
            self.order
        );
        h.update(text.as_bytes());
        // Only when given, so the cursors of queries without it keep their fingerprints.
        if let Some(artifact_type) = self.artifact_type {
            h.update(b"|artifact_type=");
            h.update(artifact_type.as_bytes());
        }
        if let Some(schedule_id) = &self.schedule_id {
            h.update(b"|schedule_id=");
            h.update(schedule_id.as_bytes());
        }
        if let Some(rerun_of) = &self.rerun_of {
            h.update(b"|rerun_of=");
            h.update(rerun_of.as_bytes());
        }
        if let Some(ancestor) = &self.ancestor_run_id {
            h.update(b"|ancestor_run_id=");
            h.update(ancestor.as_bytes());
        }
        if let Some(parent) = &self.parent_run_id {
            h.update(b"|parent_run_id=");
            h.update(parent.as_bytes());
        }
        let mut out = [0u8; 8];
        out.copy_from_slice(&h.finalize()[..8]);
        out
    }

    /// Whether `run` satisfies every filter.
    pub fn matches(&self, run: &Run) -> bool {
        let eq = |want: &Option<String>, have: &Option<String>| {
            want.as_ref().is_none_or(|w| have.as_ref() == Some(w))
        };
        !self.matches_nothing
            && (self.every_team || (!self.team.is_empty() && run.team == self.team))
            && (self.states.is_empty() || self.states.contains(&run.state))
            && eq(&self.skill_spec, &run.config.skill_spec)
            && eq(&self.name, &run.config.name)
            && eq(&self.model_id, &run.config.model_id)
            && eq(&self.environment_id, &run.config.environment_id)
            && self.creator.as_ref().is_none_or(|c| *c == run.creator.uid)
            && self.source.is_none_or(|s| s == run.source)
            && self.schedule_id.as_ref().is_none_or(|id| {
                run.schedule
                    .as_ref()
                    .is_some_and(|s| keys::schedule_value(s.schedule_id) == *id)
            })
            && self.rerun_of.as_ref().is_none_or(|id| {
                matches!(&run.derived, Some(runledger_domain::RunDerivation {
                    from,
                    kind: runledger_domain::Derivation::Rerun { .. },
                }) if from == id)
            })
            && self.ancestor_run_id.as_ref().is_none_or(|id| {
                run.parent
                    .as_ref()
                    .is_some_and(|p| p.lineage().any(|a| a == id))
            })
            && self
                .parent_run_id
                .as_ref()
                .is_none_or(|id| run.parent.as_ref().is_some_and(|p| p.parent == *id))
            && self.artifact_type.is_none_or(|t| {
                run.artifacts
                    .iter()
                    .any(|a| a.artifact.kind.type_name() == t)
            })
            && self.created_after.is_none_or(|t| run.created_at > t)
            && self.created_before.is_none_or(|t| run.created_at < t)
            && self.updated_after.is_none_or(|t| run.updated_at > t)
            && self.q.as_ref().is_none_or(|q| {
                contains_ci(&run.title, q)
                    || contains_ci(&run.prompt, q)
                    || run
                        .config
                        .skill_spec
                        .as_deref()
                        .is_some_and(|s| contains_ci(s, q))
            })
            && self
                .metadata
                .iter()
                .all(|(k, v)| run.metadata.get(k) == Some(v))
    }

    /// The index ranges to walk for the teams `teams`: prefixes whose entries share one
    /// position format. The first indexed filter present picks the ranges of each team
    /// (several for several states); the ranges of different teams hold different runs.
    fn prefixes(&self, teams: &[keys::TeamHash]) -> Vec<Vec<u8>> {
        let mut prefixes = Vec::new();
        for team in teams {
            match self.sort_by {
                SortBy::CreatedAt => prefixes.push(keys::created_prefix(team)),
                SortBy::Title => prefixes.push(keys::title_prefix(team)),
                SortBy::UpdatedAt => {
                    let mut single =
                        |field, value: &str| prefixes.push(keys::filter_prefix(team, field, value));
                    // A schedule's range holds only the runs it made, and artifact-type ranges
                    // only the runs with artifacts: the smallest ranges to walk when given.
                    if let Some(schedule_id) = &self.schedule_id {
                        single(Field::Schedule, schedule_id)
                    } else if let Some(rerun_of) = &self.rerun_of {
                        single(Field::RerunOf, rerun_of)
                    } else if let Some(parent) = &self.parent_run_id {
                        single(Field::Parent, parent)
                    } else if let Some(ancestor) = &self.ancestor_run_id {
                        single(Field::Ancestor, ancestor)
                    } else if let Some(artifact_type) = self.artifact_type {
                        single(Field::ArtifactType, artifact_type)
                    } else if let Some(env) = &self.environment_id {
                        single(Field::EnvironmentId, env)
                    } else if let Some(name) = &self.name {
                        single(Field::Name, name)
                    } else if let Some(model) = &self.model_id {
                        single(Field::ModelId, model)
                    } else if let Some(creator) = &self.creator {
                        single(Field::Creator, creator)
                    } else if !self.states.is_empty() && self.states.len() < RunState::ALL.len() {
                        let mut states = self.states.clone();
                        states.sort();
                        states.dedup();
                        for state in states {
                            single(Field::State, state.as_str());
                        }
                    } else if let Some(source) = self.source {
                        single(Field::Source, source.as_str())
                    } else {
                        // Every run is in exactly one state range of its team: merged, they
                        // are all the team's runs.
                        for state in RunState::ALL {
                            single(Field::State, state.as_str());
                        }
                    }
                }
            }
        }
        prefixes
    }

    /// Where a walk of `C` ranges starts: after the cursor, and past the runs the creation
    /// bounds exclude (ids start with the creation time, so a bound is an id). A bound beyond
    /// the 48 bits an id keeps of a time is not used: the walk starts at the cursor and every
    /// run is checked against the bound all the same.
    fn created_start(&self, cursor: Option<&[u8]>) -> Option<Vec<u8>> {
        const MAX_ID_TIME: u64 = (1 << 48) - 1;
        let bound = match self.order {
            // Strictly after the position just below the first id created after the bound.
            Order::Asc => self
                .created_after
                .map(|t| t.0.saturating_add(1))
                .filter(|t| *t <= MAX_ID_TIME)
                .map(|t| RunId(RunId::lower_bound(Timestamp(t)).0.saturating_sub(1))),
            // Strictly before the first id created at the bound.
            Order::Desc => self
                .created_before
                .filter(|t| t.0 <= MAX_ID_TIME)
                .map(RunId::lower_bound),
        }
        .map(|id| id.to_bytes().to_vec());
        match (cursor, bound) {
            (None, bound) => bound,
            (Some(c), None) => Some(c.to_vec()),
            (Some(c), Some(b)) => Some(match self.order {
                Order::Asc => c.to_vec().max(b),
                Order::Desc => c.to_vec().min(b),
            }),
        }
    }
}

/// The teams that have runs in the index: a skip over the `C` ranges, one seek per team.
fn teams(tree: &sled::Tree) -> Result<Vec<keys::TeamHash>, Error> {
    let mut teams = Vec::new();
    let mut from = vec![keys::CREATED];
    let end = keys::successor(&[keys::CREATED]);
    loop {
        let next = match &end {
            Some(end) => tree.range(from.clone()..end.clone()).next(),
            None => tree.range(from.clone()..).next(),
        };
        let Some((key, _)) = next.transpose()? else {
            return Ok(teams);
        };
        let Some(team) = key
            .get(1..keys::TEAM_PREFIX)
            .and_then(|t| keys::TeamHash::try_from(t).ok())
        else {
            return Err(Error::CorruptRow {
                run_id: String::new(),
                detail: format!("a created-range key of {} bytes", key.len()),
            });
        };
        teams.push(team);
        match keys::successor(&key[..keys::TEAM_PREFIX]) {
            Some(after) => from = after,
            None => return Ok(teams),
        }
    }
}

fn contains_ci(haystack: &str, needle: &str) -> bool {
    if needle.is_ascii() && haystack.is_ascii() {
        return haystack
            .as_bytes()
            .windows(needle.len().max(1))
            .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
            || needle.is_empty();
    }
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// Merges position streams into one stream in `order`. The streams are disjoint (one per
/// state, and a run has one state), so no duplicates arise.
struct Merge<'a> {
    heads: Vec<Option<Vec<u8>>>,
    iters: Vec<Positions<'a>>,
    order: Order,
}

impl<'a> Merge<'a> {
    fn new(mut iters: Vec<Positions<'a>>, order: Order) -> Result<Merge<'a>, Error> {
        let heads = iters
            .iter_mut()
            .map(|it| it.next().transpose())
            .collect::<Result<_, _>>()?;
        Ok(Merge {
            heads,
            iters,
            order,
        })
    }

    fn next(&mut self) -> Result<Option<Vec<u8>>, Error> {
        let mut best: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some(h) = head else { continue };
            best = match best {
                None => Some(i),
                Some(b) => {
                    let current = self.heads[b].as_ref();
                    let better = match self.order {
                        Order::Asc => Some(h) < current,
                        Order::Desc => Some(h) > current,
                    };
                    if better {
                        Some(i)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        let Some(b) = best else { return Ok(None) };
        let out = self.heads[b].take();
        self.heads[b] = self.iters[b].next().transpose()?;
        Ok(out)
    }
}

impl Index {
    /// Runs one list query.
    pub fn list(&self, query: &Query) -> Result<Page, Error> {
        // A walk that no index write overlapped saw one consistent state. Two optimistic
        // walks cost nothing to writers; if writes overlapped both, the third walk holds them
        // back (see `Writes`).
        for _ in 0..2 {
            let before = self.writes.quiet();
            let page = self.walk(query)?;
            if before.is_some() && self.writes.quiet() == before {
                return Ok(page);
            }
        }
        let _exclusive = self.writes.exclusive();
        self.walk(query)
    }

    fn walk(&self, query: &Query) -> Result<Page, Error> {
        let fingerprint = query.fingerprint();
        let after = match &query.cursor {
            Some(c) if c.fingerprint != fingerprint => {
                return Err(Error::BadCursor("the cursor belongs to a different query"));
            }
            Some(c) => Some(c.position.as_slice()),
            None => None,
        };
        if query.matches_nothing {
            return Ok(Page {
                runs: Vec::new(),
                next_cursor: None,
            });
        }
        let trees = self.trees();
        let teams = if query.every_team {
            teams(&trees.index)?
        } else if query.team.is_empty() {
            Vec::new()
        } else {
            vec![keys::team_hash(&query.team)]
        };
        let mut page = Pager::new(query.limit.max(1), fingerprint);
        let descending = query.order == Order::Desc;
        let start = match query.sort_by {
            SortBy::CreatedAt => query.created_start(after),
            _ => after.map(<[u8]>::to_vec),
        };
        let iters = query
            .prefixes(&teams)
            .iter()
            .map(|p| blocks::positions(&trees.index, p, start.as_deref(), descending))
            .collect();
        let mut merged = Merge::new(iters, query.order)?;
        while let Some(pos) = merged.next()? {
            match query.sort_by {
                // Walking newest first: nothing older can satisfy updated_after.
                SortBy::UpdatedAt if descending => {
                    if let (Some(bound), Some(updated)) =
                        (query.updated_after, keys::updated_of_position(&pos))
                    {
                        if updated <= bound.0 {
                            break;
                        }
                    }
                }
                // Positions are run ids: past a creation bound in the walk's direction, nothing
                // further can match.
                SortBy::CreatedAt => {
                    if let Some(id) = keys::id_of_position(&pos) {
                        let created = id.created_at();
                        let past = if descending {
                            query.created_after.is_some_and(|t| created <= t)
                        } else {
                            query.created_before.is_some_and(|t| created >= t)
                        };
                        if past {
                            break;
                        }
                    }
                }
                _ => {}
            }
            let Some(id) = keys::id_of_position(&pos) else {
                continue;
            };
            let Some(bytes) = trees.rows.get(id.to_bytes())? else {
                continue;
            };
            let run = decode_row(id, &bytes)?;
            // A stale entry (which `apply` never leaves behind) must not show a run twice.
            let current = match query.sort_by {
                SortBy::UpdatedAt => keys::updated_position(&run),
                SortBy::Title => keys::title_position(&run),
                SortBy::CreatedAt => run.id.to_bytes().to_vec(),
            };
            if current == pos && query.matches(&run) && !page.take(run, pos) {
                break;
            }
        }
        Ok(page.finish())
    }
}

/// The cut of one page, the same whichever source a list walks: up to `limit` matching runs,
/// and a cursor after the last of them only when a further match shows there is more.
struct Pager {
    limit: usize,
    fingerprint: [u8; 8],
    runs: Vec<Run>,
    last_position: Option<Vec<u8>>,
    more: bool,
}

impl Pager {
    fn new(limit: usize, fingerprint: [u8; 8]) -> Pager {
        Pager {
            limit,
            fingerprint,
            runs: Vec::with_capacity(limit.min(64) + 1),
            last_position: None,
            more: false,
        }
    }

    /// Takes a matching run found at `position`; `false` once the page is full, when the run
    /// offered belongs to the next page and the walk stops.
    fn take(&mut self, run: Run, position: Vec<u8>) -> bool {
        if self.runs.len() == self.limit {
            self.more = true;
            return false;
        }
        self.runs.push(run);
        self.last_position = Some(position);
        true
    }

    fn finish(self) -> Page {
        let fingerprint = self.fingerprint;
        Page {
            runs: self.runs,
            next_cursor: self
                .last_position
                .filter(|_| self.more)
                .map(|position| Cursor {
                    version: CURSOR_VERSION,
                    fingerprint,
                    position,
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn cursor() -> impl Strategy<Value = Cursor> {
        (
            any::<[u8; 8]>(),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(fingerprint, position)| Cursor {
                version: CURSOR_VERSION,
                fingerprint,
                position,
            })
    }

    /// An empty index on a temporary sled database.
    fn empty_index() -> (tempfile::TempDir, Index) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .path(dir.path())
            .temporary(true)
            .open()
            .expect("sled");
        let index = Index::open(&db).expect("index");
        (dir, index)
    }

    /// An index on a temporary sled database holding a few runs.
    fn index_with_runs() -> (tempfile::TempDir, Index) {
        let (dir, index) = empty_index();
        for i in 0..4u64 {
            let run = runledger_domain::sample_run(i);
            index.apply(None, &run).expect("apply");
        }
        (dir, index)
    }

    proptest! {
        #[test]
        fn cursors_round_trip(c in cursor()) {
            prop_assert_eq!(Cursor::decode(&c.encode()).expect("decode"), c);
        }

        /// Random text is almost never base64 of a postcard cursor; random bytes get past the
        /// base64 layer and exercise the postcard decoder.
        #[test]
        fn any_text_decodes_to_a_cursor_or_a_clean_error(
            text in ".{0,80}",
            bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
            for candidate in [text.as_str(), encoded.as_str()] {
                match Cursor::decode(candidate) {
                    // What decodes is a cursor of this version that encodes to itself again.
                    Ok(c) => {
                        prop_assert_eq!(c.version, CURSOR_VERSION);
                        prop_assert_eq!(Cursor::decode(&c.encode()).expect("decode"), c);
                    }
                    Err(e) => prop_assert!(matches!(e, Error::BadCursor(_))),
                }
            }
        }

        /// A cursor with the right fingerprint but a position the server never issued (anyone
        /// can forge one: the fingerprint is not secret) still gives a page, not a panic.
        #[test]
        fn a_forged_position_gives_a_page(
            position in proptest::collection::vec(any::<u8>(), 0..40),
            sort in 0usize..3,
            asc in any::<bool>(),
            states in proptest::collection::vec(0usize..5, 0..3),
            created_after in proptest::option::of(999_990u64..1_000_010),
            created_before in proptest::option::of(999_990u64..1_000_010),
            updated_after in proptest::option::of(999_990u64..1_000_010),
            every_team in any::<bool>(),
        ) {
            let (_dir, index) = index_with_runs();
            let mut query = Query {
                team: runledger_domain::DEFAULT_TEAM.into(),
                every_team,
                created_before: created_before.map(Timestamp),
                states: states.into_iter().map(|s| RunState::ALL[s]).collect(),
                sort_by: [SortBy::UpdatedAt, SortBy::CreatedAt, SortBy::Title][sort],
                order: if asc { Order::Asc } else { Order::Desc },
                created_after: created_after.map(Timestamp),
                updated_after: updated_after.map(Timestamp),
                limit: 2,
                ..Query::default()
            };
            query.cursor = Some(Cursor {
                version: CURSOR_VERSION,
                fingerprint: query.fingerprint(),
                position,
            });
            let page = index.list(&query).expect("list");
            prop_assert!(page.runs.len() <= 2);
        }
    }

    /// `sample_run(i)` moved into `team`.
    fn run_of(team: &str, i: u64) -> Run {
        let mut run = runledger_domain::sample_run(i);
        run.team = team.into();
        run
    }

    fn of_team(team: &str, sort_by: SortBy) -> Query {
        Query {
            team: team.into(),
            sort_by,
            limit: 100,
            ..Query::default()
        }
    }

    /// A list walks its team's ranges only: with another team's row made unreadable, every
    /// sort still answers for the first team (a walk that met the other team's runs would
    /// read that row and fail), and the other team's list does meet it.
    #[test]
    fn a_list_never_reads_another_teams_runs() {
        let (_dir, index) = empty_index();
        let ours: Vec<Run> = (0..3).map(|i| run_of("infra", i)).collect();
        let theirs = run_of("web", 3);
        for run in ours.iter().chain([&theirs]) {
            index.apply(None, run).expect("apply");
        }
        index
            .trees()
            .rows
            .insert(theirs.id.to_bytes(), b"\xff\xff".as_slice())
            .expect("spoil");
        for sort_by in [SortBy::UpdatedAt, SortBy::CreatedAt, SortBy::Title] {
            let page = index.list(&of_team("infra", sort_by)).expect("list");
            let mut ids: Vec<RunId> = page.runs.iter().map(|r| r.id).collect();
            ids.sort();
            assert_eq!(ids, ours.iter().map(|r| r.id).collect::<Vec<_>>());
            assert!(matches!(
                index.list(&of_team("web", sort_by)),
                Err(Error::CorruptRow { .. })
            ));
        }
    }

    /// A query nobody scoped to a team lists nothing; one scoped to every team lists the runs
    /// of all of them, merged in order; a cursor of one team's list is refused for another's.
    #[test]
    fn the_team_scopes_a_list_and_its_cursors() {
        let (_dir, index) = empty_index();
        let runs: Vec<Run> = (0..6)
            .map(|i| run_of(["a", "b", "c"][i as usize % 3], i))
            .collect();
        for run in &runs {
            index.apply(None, run).expect("apply");
        }
        let unscoped = Query {
            limit: 100,
            ..Query::default()
        };
        assert!(index.list(&unscoped).expect("list").runs.is_empty());
        let mut teams = teams(&index.trees().index).expect("teams");
        teams.sort();
        let mut want: Vec<keys::TeamHash> = ["a", "b", "c"].map(keys::team_hash).to_vec();
        want.sort();
        assert_eq!(teams, want);
        for sort_by in [SortBy::UpdatedAt, SortBy::CreatedAt, SortBy::Title] {
            let every = Query {
                every_team: true,
                order: Order::Asc,
                ..of_team("", sort_by)
            };
            let ids: Vec<RunId> = index
                .list(&every)
                .expect("list")
                .runs
                .iter()
                .map(|r| r.id)
                .collect();
            assert_eq!(ids, runs.iter().map(|r| r.id).collect::<Vec<_>>());
        }
        let first = index
            .list(&Query {
                limit: 1,
                ..of_team("a", SortBy::UpdatedAt)
            })
            .expect("list");
        let cursor = first.next_cursor.expect("a second page");
        let other = Query {
            limit: 1,
            cursor: Some(cursor),
            ..of_team("b", SortBy::UpdatedAt)
        };
        assert!(matches!(index.list(&other), Err(Error::BadCursor(_))));
    }

    #[test]
    fn a_cursor_of_another_version_is_refused() {
        let c = Cursor {
            version: CURSOR_VERSION + 1,
            fingerprint: [0; 8],
            position: vec![1, 2, 3],
        };
        assert!(matches!(
            Cursor::decode(&c.encode()),
            Err(Error::BadCursor("cursor from an incompatible version"))
        ));
    }
}
