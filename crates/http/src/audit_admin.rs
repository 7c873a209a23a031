//! `GET /api/v1/audit/admin`: the admin audit log for admin keys (newest first, paged,
//! filtered by record type, acting key and time). It reads the log through the `AdminAudit` handle only;
//! what an act records is decided where the act is done.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::error_responses::{BadRequest, Forbidden, InternalError, Unauthorized};
use super::problem::ApiError;
use super::wire::PageInfo;
use super::{AppState, Principal};
use runledger_domain::{AdminEvent, Timestamp};
use runledger_format::admin::{admin_json, AdminItem};
use runledger_format::time::parse_time;
use runledger_runs::actor::{AdminQuery, MAX_ADMIN_PAGE};

/// The page size when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;

/// One page of the admin audit log.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdminAuditPage {
    /// Newest first.
    pub items: Vec<AdminItem>,
    pub page_info: PageInfo,
}

/// The administrative acts recorded on this instance, newest first (admin keys only):
/// keys created and revoked, teams created, secrets rotated, the server started and stopped,
/// the index rebuilt, each with who did it and its place in the admin log's hash chain.
#[utoipa::path(
    get,
    path = "/api/v1/audit/admin",
    tag = "admin",
    operation_id = "listAdminAudit",
    params(
        ("type" = Option<Vec<String>>, Query, description = "Keep these record types (repeatable): `KeyCreated`, `KeyRevoked`, `TeamCreated`, `SecretRotated`, `ServerStarted`, `ServerStopped`, `IndexRebuilt`."),
        ("actor" = Option<String>, Query, description = "Keep the acts of this API key (its id)."),
        ("since" = Option<String>, Query, description = "Keep records at or after this time (RFC 3339)."),
        ("until" = Option<String>, Query, description = "Keep records at or before this time (RFC 3339)."),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the page before."),
        ("limit" = Option<u32>, Query, description = "At most this many records, 1 to 1000 (default 100)."),
    ),
    responses(
        (status = 200, description = "One page of records", body = AdminAuditPage),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    // Before the query is even read: a non-admin key learns nothing from its filters.
    if !key.admin {
        return Err(ApiError::forbidden(
            "only admin keys may read the admin audit log",
        ));
    }
    let query = parse_query(req.query_string())?;
    let page = state.admin_audit.page(&query)?;
    Ok(HttpResponse::Ok().json(AdminAuditPage {
        items: page.items.iter().map(admin_json).collect(),
        page_info: PageInfo {
            has_next_page: page.next.is_some(),
            next_cursor: page.next.map(|seq| seq.to_string()),
        },
    }))
}

/// The query string as an `AdminQuery`; a malformed or unknown parameter is a 400 naming it.
fn parse_query(query: &str) -> Result<AdminQuery, ApiError> {
    let mut parsed = AdminQuery {
        limit: DEFAULT_LIMIT,
        ..AdminQuery::default()
    };
    let time = |field: &str, value: &str| {
        parse_time(value)
            .and_then(|ns| u64::try_from(ns.div_euclid(1_000_000)).ok())
            .map(Timestamp)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "{field} must be an RFC 3339 time, as 2026-01-31T12:00:00Z"
                ))
            })
    };
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "type" => {
                if !AdminEvent::TYPES.contains(&value.as_ref()) {
                    return Err(ApiError::bad_request(format!(
                        "type {value:?} is not a record type; the types are {}",
                        AdminEvent::TYPES.join(", ")
                    )));
                }
                parsed.types.push(value.into_owned());
            }
            "actor" => parsed.actor = Some(value.into_owned()),
            "since" => parsed.since = Some(time("since", &value)?),
            "until" => parsed.until = Some(time("until", &value)?),
            "cursor" => {
                parsed.before = Some(value.parse().map_err(|_| {
                    ApiError::bad_request("cursor must be the next_cursor of a page before")
                })?)
            }
            "limit" => {
                parsed.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_ADMIN_PAGE).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "limit must be a whole number from 1 to {MAX_ADMIN_PAGE}"
                        ))
                    })?
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {other:?}; the parameters are type, actor, since, \
                     until, cursor and limit"
                )))
            }
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_reads_every_filter_and_refuses_what_is_malformed() {
        let q = parse_query(
            "type=KeyCreated&type=TeamCreated&actor=01K&since=2026-01-01T00:00:00Z&limit=5&cursor=9",
        )
        .expect("parses");
        assert_eq!(q.types, ["KeyCreated", "TeamCreated"]);
        assert_eq!(q.actor.as_deref(), Some("01K"));
        assert_eq!(q.since, Some(Timestamp(1_767_225_600_000)));
        assert_eq!((q.limit, q.before), (5, Some(9)));
        for bad in [
            "since=yesterday",
            "until=2026-13-01T00:00:00Z",
            "limit=0",
            "limit=1001",
            "type=KeyDeleted",
            "cursor=x",
            "team=a",
        ] {
            assert!(parse_query(bad).is_err(), "{bad} was accepted");
        }
    }
}
