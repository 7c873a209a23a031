//! Time travel over one run: the run as it was right after its event N
//! (`GET /agent/runs/{id}?as_of_seq=N`) and the pages of its past states
//! (`GET /agent/runs/{id}/states`), each event with the run after it and the fields it changed.
//! States come from `runledger_runs::actor::History`, which folds the run's log from its first
//! event, one record at a time; this module renders them as `RunItem`s and owns the answers'
//! status codes; `past` renders a state. Visibility is checked first (`access::visible`),
//! exactly as for the plain get.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};

use super::access::{links, run_id, visible};
use super::error_responses::{BadRequest, InternalError, NotFound, Unauthorized};
use super::past::{as_of, changed, past_item, past_json};
use super::problem::ApiError;
use super::wire::{Links, RunEvent, RunStates};
use super::{AppState, Principal};
use runledger_domain::Run;
use runledger_runs::actor::Step;

/// Most states on one page of `…/states`, and the default.
pub const MAX_STATES_LIMIT: usize = 1000;
pub const DEFAULT_STATES_LIMIT: usize = 100;

/// JSON bytes after which a page of states ends even before `limit` items (never before the
/// first): each item carries the whole run, prompt included, so a page of long prompts would
/// otherwise grow with `limit × prompt`.
pub const STATES_PAGE_BYTES: usize = 1 << 20;

/// `as_of_seq` of the get's query: `None` when absent; a value that is not an integer from 0
/// to 2^64-1 is refused, naming the parameter.
pub(super) fn as_of_seq(raw: &str) -> Result<Option<u64>, ApiError> {
    let mut seq = None;
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        if key == "as_of_seq" {
            seq = Some(value.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "as_of_seq must be an integer from 0 to {}: the seq of one of the run's events; got {value:?}",
                    u64::MAX
                ))
            })?);
        }
    }
    Ok(seq)
}

/// `GET /agent/runs/{id}?as_of_seq=N`, once the run is known visible.
pub(super) fn as_of_response(
    state: &AppState,
    run: &Run,
    seq: u64,
) -> Result<HttpResponse, ApiError> {
    let past = as_of(state, run, seq)?;
    Ok(HttpResponse::Ok()
        .insert_header(actix_web::http::header::ContentType::json())
        .body(past_json(&past, &links(state))?))
}

/// `cursor` and `limit` of `…/states`: the first sequence number to answer (0 without a
/// cursor) and the most items.
fn states_query(raw: &str) -> Result<(u64, usize), ApiError> {
    let mut from = 0;
    let mut limit = DEFAULT_STATES_LIMIT;
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "cursor" => {
                from = value.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "cursor must be a `next_cursor` this endpoint returned (an integer); got {value:?}"
                    ))
                })?
            }
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_STATES_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "limit must be an integer from 1 to {MAX_STATES_LIMIT}"
                        ))
                    })?
            }
            _ => {}
        }
    }
    Ok((from, limit))
}

/// One page of the run's past states, oldest first: each of its events from `cursor` on with
/// the run as it was right after it and the `RunItem` fields it changed.
///
/// Reaching `cursor` folds every event before it, so a page deep in a long history costs as
/// much as `as_of_seq` at its start (about a second at event 100,000); memory stays at one
/// page (`limit` items, and no more than 1 MiB of JSON past the first). See `docs/api.md`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/states",
    tag = "runs",
    operation_id = "listRunStates",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
        ("cursor" = Option<String>, Query,
         description = "A `page_info.next_cursor` this endpoint returned (the `seq` the page starts at). From the first event when absent."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000,
         description = "Most states to return; 100 when absent. A page also ends once it holds 1 MiB of JSON."),
    ),
    responses(
        (status = 200, description = "A page of the run's past states", body = RunStates),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn states(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    visible(&state, &key, id)?;
    let (from, limit) = states_query(req.query_string())?;
    let steps = state
        .runs
        .history()
        .steps(id, from)?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let body = page(
        &id.to_string(),
        steps,
        limit,
        STATES_PAGE_BYTES,
        &links(&state),
    )?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body))
}

/// The JSON of one page of states (the bytes serde_json writes for `RunStates`), written one
/// item at a time.
fn page<E>(
    run_id: &str,
    steps: impl Iterator<Item = Result<Step, E>>,
    limit: usize,
    budget: usize,
    links: &Links<'_>,
) -> Result<Vec<u8>, ApiError>
where
    ApiError: From<E>,
{
    let mut steps = steps.peekable();
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"run_id\":");
    write(&mut out, &run_id)?;
    out.extend_from_slice(b",\"states\":[");
    let mut count = 0;
    let mut last = None;
    while count < limit && (count == 0 || out.len() < budget) {
        let Some(step) = steps.next() else { break };
        let step = step?;
        if count > 0 {
            out.push(b',');
        }
        write(&mut out, &item(&step, links)?)?;
        last = Some(step.envelope.seq);
        count += 1;
    }
    out.extend_from_slice(b"],\"page_info\":");
    // A damaged record after the page is the next page's error; this one is whole.
    let next = match (last, steps.peek()) {
        (Some(seq), Some(_)) => Some(seq.saturating_add(1).to_string()),
        _ => None,
    };
    write(
        &mut out,
        &super::wire::PageInfo {
            has_next_page: next.is_some(),
            next_cursor: next,
        },
    )?;
    out.push(b'}');
    Ok(out)
}

/// One step as a `RunStateItem`'s JSON value.
fn item(step: &Step, links: &Links<'_>) -> Result<Value, ApiError> {
    let event = to_value(&RunEvent::from(&step.envelope))?;
    let after = to_value(&past_item(&step.after, links))?;
    let before = match &step.before {
        Some(run) => to_value(&past_item(run, links))?,
        None => Value::Object(Map::new()),
    };
    let mut item = Map::new();
    item.insert("seq".into(), Value::from(step.envelope.seq));
    item.insert("at".into(), event["at"].clone());
    item.insert("type".into(), event["type"].clone());
    item.insert("changed".into(), Value::from(changed(&before, &after)));
    item.insert("event".into(), event);
    item.insert("state".into(), after);
    Ok(Value::Object(item))
}

fn to_value(value: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(&e))
}

fn write(out: &mut Vec<u8>, value: &impl serde::Serialize) -> Result<(), ApiError> {
    serde_json::to_writer(out, value).map_err(|e| ApiError::internal(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{evolve, sample_created, Event, RunAdmitted, RunId, Timestamp};
    use runledger_runs::actor::Envelope;

    const SECRET: [u8; 32] = [3; 32];

    fn links() -> Links<'static> {
        Links {
            public_url: "http://127.0.0.1:8080",
            secret: &SECRET,
            now: Timestamp(5_000_000),
            ttl_secs: 3600,
        }
    }

    /// The steps of a history of `n` events: admitted, then started again and again.
    fn steps(n: u64) -> Vec<Step> {
        let id = RunId::new(Timestamp(1_000_000), 7);
        let mut run = None;
        (0..n)
            .map(|seq| {
                let event = if seq == 0 {
                    Event::Admitted(RunAdmitted::from_legacy(sample_created(7)))
                } else {
                    Event::Started {
                        execution: seq as u32,
                    }
                };
                let at = Timestamp(1_000_000 + seq);
                let before = run.clone();
                run = evolve(run.take(), id, &event, at);
                Step {
                    envelope: Envelope {
                        run_id: id,
                        seq,
                        at,
                        event,
                        origin: None,
                    },
                    before,
                    after: run.clone().expect("a run"),
                }
            })
            .collect()
    }

    fn parse(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("json")
    }

    #[test]
    fn a_page_names_its_next_cursor_and_ends_at_its_byte_budget() {
        let all = steps(5);
        let ok = || all.iter().cloned().map(Ok::<_, ApiError>);
        let page_of =
            |limit, budget| parse(&page("R", ok(), limit, budget, &links()).expect("page"));
        let whole = page_of(10, STATES_PAGE_BYTES);
        assert_eq!(whole["states"].as_array().map(Vec::len), Some(5));
        assert_eq!(
            whole["page_info"],
            serde_json::json!({"has_next_page": false})
        );
        let first = &whole["states"][0];
        assert_eq!(first["seq"], 0);
        assert_eq!(first["state"]["state"], "QUEUED");
        let fields = first["state"].as_object().expect("state").len();
        assert_eq!(first["changed"].as_array().map(Vec::len), Some(fields));
        assert_eq!(whole["states"][1]["type"], "Started");
        assert!(whole["states"][1]["changed"]
            .as_array()
            .expect("changed")
            .contains(&Value::from("state")));
        let two = page_of(2, STATES_PAGE_BYTES);
        assert_eq!(two["states"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            two["page_info"],
            serde_json::json!({"has_next_page": true, "next_cursor": "2"})
        );
        // The budget ends a page early, never before its first state.
        let one = page_of(10, 1);
        assert_eq!(one["states"].as_array().map(Vec::len), Some(1));
        assert_eq!(one["page_info"]["next_cursor"], "1");
    }

    #[test]
    fn the_query_names_what_it_refuses() {
        assert_eq!(as_of_seq("").expect("valid"), None);
        assert_eq!(as_of_seq("as_of_seq=0").expect("valid"), Some(0));
        assert_eq!(
            as_of_seq("as_of_seq=18446744073709551615").expect("valid"),
            Some(u64::MAX)
        );
        for bad in ["as_of_seq=", "as_of_seq=-1", "as_of_seq=1.5", "as_of_seq=x"] {
            let e = as_of_seq(bad).expect_err(bad);
            assert!(e.detail.starts_with("as_of_seq must be"), "{}", e.detail);
        }
        assert_eq!(states_query("").expect("valid"), (0, 100));
        assert_eq!(
            states_query("cursor=7&limit=1000").expect("valid"),
            (7, 1000)
        );
        for bad in ["limit=0", "limit=1001", "limit=x"] {
            let e = states_query(bad).expect_err(bad);
            assert!(e.detail.starts_with("limit must be"), "{}", e.detail);
        }
        assert!(states_query("cursor=abc")
            .expect_err("bad")
            .detail
            .starts_with("cursor must be"));
    }
}
