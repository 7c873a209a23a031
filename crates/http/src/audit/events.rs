//! `GET /api/v1/audit/events`: who may ask for what (a key its team's runs, an admin key every
//! team's; another team's run is answered like one that does not exist, as `access::visible`
//! does), and a page of the answer: each event exactly as one line of
//! `GET /agent/runs/{id}/events` writes it, plus its run's `team`.

use actix_web::{web, HttpRequest, HttpResponse};

use super::wire::{AuditEvent, AuditEvents};
use crate::error_responses::{BadRequest, Forbidden, InternalError, NotFound, Unauthorized};
use crate::problem::ApiError;
use crate::stream::wants_stream;
use crate::validate::{self, AuditRequest};
use crate::wire::PageInfo;
use crate::{AppState, Principal};
use runledger_runs::api_keys::Key;

/// The request as `key` may ask it: scoped to its team unless it is an admin key. Naming
/// another team is refused (403); naming another team's run is answered 404, like a run that
/// does not exist.
pub(super) fn scoped(
    state: &AppState,
    key: &Key,
    mut request: AuditRequest,
) -> Result<AuditRequest, ApiError> {
    if !key.admin {
        match &request.query.team {
            Some(team) if *team != key.team => {
                return Err(ApiError::forbidden(format!(
                    "this key sees the events of its team {:?} only; only an admin key queries \
                     other teams",
                    key.team
                )))
            }
            _ => request.query.team = Some(key.team.clone()),
        }
    }
    if let Some(id) = request.query.run_id {
        let visible = state
            .runs
            .get(id)?
            .is_some_and(|run| key.admin || run.team == key.team);
        if !visible {
            return Err(ApiError::not_found("no run with this id"));
        }
    }
    Ok(request)
}

/// Run events across runs, newest first: every run of the key's team (an admin key's: every
/// team's), filtered (docs/api.md, "Audit"). With `Accept: text/event-stream`, the matching
/// events recorded from now on (or after `Last-Event-ID`), as they are indexed.
#[utoipa::path(
    get,
    path = "/api/v1/audit/events",
    tag = "audit",
    operation_id = "listAuditEvents",
    params(
        ("type" = Option<Vec<String>>, Query, explode = true,
         description = "Only events of this type, as the run events name it (`Created`, `Cancelled`, …); repeat for several."),
        ("actor" = Option<String>, Query, description = "Only events caused by this key id."),
        ("run_id" = Option<String>, Query, description = "Only this run's events; another team's run is answered 404."),
        ("team" = Option<String>, Query, description = "Only this team's runs (an admin key's filter; another key may name only its own team)."),
        ("since" = Option<String>, Query, format = DateTime, description = "Only events at or after this RFC 3339 time."),
        ("until" = Option<String>, Query, format = DateTime, description = "Only events before this RFC 3339 time."),
        ("cursor" = Option<String>, Query, description = "A `next_cursor` this endpoint returned, with the same filters."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "Most events to return; 100 when absent."),
    ),
    responses(
        (status = 200, description = "A page of run events, newest first", body = AuditEvents),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn events(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let request = scoped(&state, &key, validate::audit_query(req.query_string())?)?;
    if wants_stream(&req) {
        return super::follow::follow(&req, &state, request);
    }
    let page = state
        .audit
        .page(&request.query, request.cursor, request.limit)
        .await?;
    let body = AuditEvents {
        events: page.items.iter().map(AuditEvent::from).collect(),
        page_info: PageInfo {
            has_next_page: page.next.is_some(),
            next_cursor: page.next.map(|p| p.encode()),
        },
    };
    Ok(HttpResponse::Ok().json(body))
}
