//! The runs list's query string into the read index's `Query`: each filter, the sort, the
//! page size and the cursor (decoded once the filters are known), and the hosted service's
//! filters that match nothing here. Other endpoints' queries are `queries`.

use super::limits::{limit, metadata_pair, MAX_FIELD_BYTES, MAX_LIST_LIMIT, MAX_QUERY_TEXT_BYTES};
use crate::problem::ApiError;
use crate::wire::{parse_time, FOREIGN_STATES, MAX_METADATA_FILTERS, SORT_BY, SORT_ORDER};
use runledger_domain::{RunState, SourceType, Timestamp};
use runledger_runs::query::{Cursor, Query};

/// List filters of the hosted service that name things runledger runs never have (factories,
/// automations): with any of them, whatever its value, nothing matches.
pub const MATCH_NOTHING_PARAMS: [&str; 2] = ["factory_uid", "automation_id"];

/// Artifact types of the hosted service that runledger's agents never report. As
/// `artifact_type` filters they are accepted and match nothing, like `FOREIGN_STATES`.
pub const FOREIGN_ARTIFACT_TYPES: [&str; 1] = ["EXTERNAL_REFERENCE"];

fn lookup<T: Copy>(table: &[(&str, T)], name: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// Parses the list query string (`state` repeats; `metadata[key]=value`).
pub fn list_query(raw: &str) -> Result<Query, ApiError> {
    let mut list = ListParams::default();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        list.apply(&key, value.into_owned())?;
    }
    list.finish()
}

/// A list query as its parameters are read, with what only the whole query decides.
struct ListParams {
    q: Query,
    /// The raw cursor, decoded once the filters are known.
    cursor: Option<String>,
    /// Whether a `state` of the hosted service's that runledger never takes was asked for.
    foreign_state: bool,
    /// The last `schedule_id` given, read once every parameter is (`schedule_filter`).
    schedule_id: Option<String>,
    /// The last `rerun_of` given, read once every parameter is (`rerun_filter`).
    rerun_of: Option<String>,
    /// The last `ancestor_run_id` given, read once every parameter is (`ancestor_filter`).
    ancestor_run_id: Option<String>,
}

impl Default for ListParams {
    fn default() -> ListParams {
        ListParams {
            q: Query {
                limit: 20,
                ..Query::default()
            },
            cursor: None,
            foreign_state: false,
            schedule_id: None,
            rerun_of: None,
            ancestor_run_id: None,
        }
    }
}

impl ListParams {
    /// Reads one parameter.
    fn apply(&mut self, key: &str, value: String) -> Result<(), ApiError> {
        let q = &mut self.q;
        match key {
            "limit" => q.limit = limit(&value, MAX_LIST_LIMIT)?,
            "cursor" => self.cursor = Some(value),
            "sort_by" => {
                q.sort_by = lookup(&SORT_BY, &value).ok_or_else(|| {
                    ApiError::bad_request("sort_by must be one of updated_at, created_at, title")
                })?;
            }
            "sort_order" => {
                q.order = lookup(&SORT_ORDER, &value)
                    .ok_or_else(|| ApiError::bad_request("sort_order must be asc or desc"))?;
            }
            "state" if FOREIGN_STATES.contains(&value.as_str()) => {
                self.foreign_state = true;
            }
            "state" => {
                let state = RunState::parse(&value).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "state {value:?} is not one of QUEUED, INPROGRESS, SUCCEEDED, FAILED, CANCELLED"
                    ))
                })?;
                if !q.states.contains(&state) {
                    q.states.push(state);
                }
            }
            "name" | "config_name" => q.name = Some(exact_filter(key, value)?),
            "model_id" => q.model_id = Some(exact_filter(key, value)?),
            "creator" => q.creator = Some(exact_filter(key, value)?),
            "environment_id" => q.environment_id = Some(exact_filter(key, value)?),
            "schedule_id" => self.schedule_id = Some(exact_filter(key, value)?),
            "rerun_of" => self.rerun_of = Some(exact_filter(key, value)?),
            "ancestor_run_id" => self.ancestor_run_id = Some(exact_filter(key, value)?),
            "source" => {
                q.source = Some(SourceType::parse(&value).ok_or_else(|| {
                    ApiError::bad_request(format!("source {value:?} is not a known source type"))
                })?)
            }
            "created_after" => q.created_after = Some(time_filter(key, &value, false)?),
            "created_before" => q.created_before = Some(time_filter(key, &value, true)?),
            "updated_after" => q.updated_after = Some(time_filter(key, &value, false)?),
            "q" if value.len() > MAX_QUERY_TEXT_BYTES => {
                return Err(ApiError::bad_request(format!(
                    "q is longer than {MAX_QUERY_TEXT_BYTES} bytes"
                )))
            }
            "q" => q.q = Some(value).filter(|v| !v.is_empty()),
            "skill" | "skill_spec" => q.skill_spec = Some(exact_filter(key, value)?),
            "artifact_type" if FOREIGN_ARTIFACT_TYPES.contains(&value.as_str()) => {
                q.matches_nothing = true;
            }
            "artifact_type" => {
                let known = runledger_domain::ArtifactKind::TYPE_NAMES;
                q.artifact_type =
                    Some(known.into_iter().find(|t| *t == value).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "artifact_type {value:?} is not one of {}",
                            known.join(", ")
                        ))
                    })?);
            }
            k if MATCH_NOTHING_PARAMS.contains(&k) => {
                q.matches_nothing = true;
            }
            other => {
                if let Some(k) = other
                    .strip_prefix("metadata[")
                    .and_then(|r| r.strip_suffix(']'))
                {
                    metadata_filter(q, k, value)?;
                }
                // Remaining parameters of the hosted API (`execution_location`, `executor`)
                // do not narrow runledger's runs; they are ignored.
            }
        }
        Ok(())
    }

    /// The query, once every parameter is read.
    fn finish(self) -> Result<Query, ApiError> {
        let mut q = self.q;
        q.metadata.sort();
        q.states.sort();
        if self.foreign_state && q.states.is_empty() {
            q.matches_nothing = true;
        }
        if let Some(schedule_id) = &self.schedule_id {
            schedule_filter(&mut q, schedule_id);
        }
        if let Some(rerun_of) = &self.rerun_of {
            rerun_filter(&mut q, rerun_of);
        }
        if let Some(ancestor) = &self.ancestor_run_id {
            match canonical_run_id(ancestor) {
                Some(id) => q.ancestor_run_id = Some(id),
                None => q.matches_nothing = true,
            }
        }
        if let Some(c) = self.cursor {
            q.cursor = Some(
                Cursor::decode(&c)
                    .map_err(|_| ApiError::bad_request("cursor is not valid for this server"))?,
            );
        }
        Ok(q)
    }
}

/// The value of an exact-match filter. Filters compare with stored values of at most
/// `MAX_FIELD_BYTES`, so a longer one is refused rather than matching nothing.
fn exact_filter(key: &str, v: String) -> Result<String, ApiError> {
    if v.is_empty() {
        Err(ApiError::bad_request(format!("{key} must not be empty")))
    } else if v.len() > MAX_FIELD_BYTES {
        Err(ApiError::bad_request(format!(
            "{key} is longer than {MAX_FIELD_BYTES} bytes"
        )))
    } else {
        Ok(v)
    }
}

/// Sets the filter `schedule_id=value`. A schedule id is a ULID, kept in its canonical text so
/// that any spelling the id parser accepts (lower case) finds the schedule's runs. A value that
/// is no ULID names no schedule of this server (the hosted service's ids, say): like an
/// exact-match filter that no run has, it matches nothing, rather than refusing the list; an
/// empty or overlong value is refused like any other filter's.
fn schedule_filter(q: &mut Query, value: &str) {
    let canonical = value
        .parse::<runledger_domain::RunId>()
        .map(runledger_runs::query::schedule_value)
        // The ULID parser takes a 26th character beyond 128 bits and drops the excess: such a
        // text is not one this server writes for any id.
        .ok()
        .filter(|id| id.eq_ignore_ascii_case(value));
    match canonical {
        Some(id) => q.schedule_id = Some(id),
        None => q.matches_nothing = true,
    }
}

/// Sets the filter `rerun_of=value`, a run id kept in its canonical text like a schedule id
/// (`schedule_filter`); a value that is no run id of this server matches nothing.
fn rerun_filter(q: &mut Query, value: &str) {
    match canonical_run_id(value) {
        Some(id) => q.rerun_of = Some(id),
        None => q.matches_nothing = true,
    }
}

/// `value` as the API writes a run id, if it is one in any case; `None` for a value that is
/// no run id of this server (the filter then matches nothing).
fn canonical_run_id(value: &str) -> Option<String> {
    value
        .parse::<runledger_domain::RunId>()
        .map(|id| id.to_string())
        .ok()
        .filter(|id| id.eq_ignore_ascii_case(value))
}

/// A time filter in milliseconds: rounded up (`ceil`) for an exclusive upper bound, so that a
/// sub-millisecond bound excludes nothing it should keep.
fn time_filter(key: &str, value: &str, ceil: bool) -> Result<Timestamp, ApiError> {
    let nanos = parse_time(value)
        .ok_or_else(|| ApiError::bad_request(format!("{key} must be an RFC 3339 timestamp")))?;
    if nanos < 0 {
        return Err(ApiError::bad_request(format!("{key} is before 1970")));
    }
    let ms = nanos / 1_000_000;
    let ms = if ceil && nanos % 1_000_000 != 0 {
        ms + 1
    } else {
        ms
    };
    Ok(Timestamp(ms as u64))
}

/// Adds the filter `metadata[key]=value`; a repeated key keeps its last value.
fn metadata_filter(q: &mut Query, key: &str, value: String) -> Result<(), ApiError> {
    metadata_pair(key, &value)?;
    q.metadata.retain(|(existing, _)| existing != key);
    q.metadata.push((key.to_string(), value));
    if q.metadata.len() > MAX_METADATA_FILTERS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_METADATA_FILTERS} metadata filters"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::test_support::refusal;
    use runledger_runs::query::{Order, SortBy};

    #[test]
    fn list_query_parses_every_filter() {
        let q = list_query(
            "state=QUEUED&state=FAILED&config_name=n&model_id=m&creator=c&source=API&environment_id=e\
             &created_after=2026-01-01T00:00:00Z&created_before=2026-01-02T00:00:00.0005Z\
             &updated_after=2026-01-01T00:00:00Z&q=bug&metadata%5Bteam%5D=core&sort_by=title&sort_order=asc&limit=7",
        )
        .expect("valid");
        assert_eq!(q.states, vec![RunState::Queued, RunState::Failed]);
        assert_eq!(q.name.as_deref(), Some("n"));
        assert_eq!(q.source, Some(SourceType::Api));
        assert_eq!(q.metadata, vec![("team".to_string(), "core".to_string())]);
        assert_eq!(q.created_before, Some(Timestamp(1_767_312_000_001)));
        assert_eq!(q.sort_by, SortBy::Title);
        assert_eq!(q.order, Order::Asc);
        assert_eq!(q.limit, 7);
    }

    /// `schedule_id` is a filter on the runs a schedule's firings made, by the schedule's id
    /// in canonical text; a value that is no schedule id of this server matches nothing, and
    /// an empty or overlong one is refused like any filter's.
    #[test]
    fn schedule_id_filters_by_the_canonical_id_and_a_foreign_one_matches_nothing() {
        let id = runledger_domain::RunId::new(Timestamp(1_763_700_000_000), 9).to_string();
        let q = list_query(&format!("schedule_id={id}")).expect("valid");
        assert_eq!(q.schedule_id.as_deref(), Some(id.as_str()));
        assert!(!q.matches_nothing);
        let lower = list_query(&format!("schedule_id={}", id.to_lowercase())).expect("valid");
        assert_eq!(lower.schedule_id.as_deref(), Some(id.as_str()));
        assert_eq!(lower, q);
        for foreign in [
            "7f7c2b1e-8a0a-4c1e-9d35-2f0f3c7b9a10",
            "not-a-schedule",
            "0123456789ABCDEFGHJKMNPQRSTV",
            "81ZZZZZZZZZZZZZZZZZZZZZZZZ",
        ] {
            let q = list_query(&format!("schedule_id={foreign}")).expect("accepted");
            assert!(q.matches_nothing, "{foreign}");
            assert_eq!(q.schedule_id, None);
        }
        // The last value counts, as for every filter.
        let q = list_query(&format!("schedule_id=nope&schedule_id={id}")).expect("valid");
        assert!(!q.matches_nothing);
        let q = list_query(&format!("schedule_id={id}&schedule_id=nope")).expect("valid");
        assert!(q.matches_nothing);
        // With a foreign parameter too, still nothing.
        let q = list_query(&format!("schedule_id={id}&factory_uid=x")).expect("valid");
        assert!(q.matches_nothing);
        assert_eq!(
            refusal(list_query("schedule_id=")),
            "schedule_id must not be empty"
        );
        assert_eq!(
            refusal(list_query(&format!("schedule_id={}", "x".repeat(257)))),
            "schedule_id is longer than 256 bytes"
        );
    }

    #[test]
    fn list_query_refuses_bad_values() {
        for bad in [
            "limit=0",
            "limit=501",
            "limit=ten",
            "state=DONE",
            "sort_by=agent",
            "sort_order=up",
            "source=EMAIL",
            "created_after=yesterday",
            "cursor=xyz",
            "metadata%5Bbad%20key%5D=1",
            "name=",
        ] {
            assert!(list_query(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn list_query_limits_name_the_parameter_and_the_limit() {
        let at = |n: usize| "x".repeat(n);
        assert!(list_query(&format!("name={}", at(256))).is_ok());
        for key in [
            "name",
            "config_name",
            "model_id",
            "creator",
            "environment_id",
            "skill",
        ] {
            let detail = refusal(list_query(&format!("{key}={}", at(257))));
            assert_eq!(detail, format!("{key} is longer than 256 bytes"));
        }
        assert!(list_query(&format!("q={}", at(1024))).is_ok());
        assert_eq!(
            refusal(list_query(&format!("q={}", at(1025)))),
            "q is longer than 1024 bytes"
        );
        for bad in ["limit=0", "limit=501", "limit=-1", "limit=1.5", "limit="] {
            assert_eq!(
                refusal(list_query(bad)),
                "limit must be an integer from 1 to 500"
            );
        }
        assert!(list_query("limit=500").is_ok() && list_query("limit=1").is_ok());
        let six: String = (0..6).map(|i| format!("metadata%5Bk{i}%5D=v&")).collect();
        assert_eq!(refusal(list_query(&six)), "at most 5 metadata filters");
        assert!(refusal(list_query("created_after=2026-13-01")).starts_with("created_after"));
        assert!(refusal(list_query("updated_after=")).starts_with("updated_after"));
    }
}
