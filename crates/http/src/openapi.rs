//! runledger's own OpenAPI document, served at `GET /openapi.json`.
//!
//! The document is derived from the code (`utoipa`): the schemas from the DTOs in `wire.rs`
//! and `problem.rs`, each operation from the `#[utoipa::path]` attribute on its handler, which
//! lists every status the handler can answer, naming the reusable problem+json responses of
//! `error_responses.rs`. This module only assembles those parts, adds what no handler owns (the
//! bearer scheme, the 429 and 408 every operation may answer, the legacy create path) and
//! serves the result. Besides the route table (`routes.rs`), it is the one module of `http/` that
//! names the handlers; no handler names it. It must not describe an endpoint by hand: a route
//! without a handler attribute here is a route missing from the document.

use std::sync::OnceLock;

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::RefOr;
use utoipa::{Modify, OpenApi, PartialSchema as _};

use super::error_responses::{
    problem, BadRequest, Conflict, Forbidden, InternalError, NotFound, NotSupported,
    PayloadTooLarge, Unauthorized, Unavailable,
};
use super::problem::ApiError;
use super::{admin, agents, artifacts, runs, session, travel};

/// The name of the bearer-key security scheme that `/api/v1` operations require.
pub const BEARER: &str = "bearerAuth";

/// Adds the bearer scheme, which no handler owns.
struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`rl_...`): printed once on first start, or made with \
                         `runledger keys create` or `POST /api/v1/admin/keys`.",
                    ))
                    .build(),
            ),
        );
    }
}

/// Every `/api/v1` operation may answer 429: the per-key rate limit is charged by the
/// `Principal` extractor (`http/ratelimit.rs`), which no handler's list names.
struct RateLimited;

impl Modify for RateLimited {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let mut response = problem(
            "Too many requests for this API key, or (on a create) too many runs already waiting \
             in the team's or the environment's queues: wait `Retry-After` seconds \
             (`resource_unavailable`, retryable).",
        );
        if let RefOr::T(r) = &mut response {
            r.headers.insert(
                "retry-after".into(),
                utoipa::openapi::header::HeaderBuilder::new()
                    .schema(i64::schema())
                    .description(Some("Whole seconds to wait before retrying."))
                    .build(),
            );
        }
        components
            .responses
            .insert("TooManyRequests".into(), response);
        components.responses.insert(
            "RequestTimeout".into(),
            problem(
                "The request body did not arrive whole within `server.body_timeout_secs` \
                 (default 30 s); the connection is closed (`invalid_request`).",
            ),
        );
        for (path, item) in doc.paths.paths.iter_mut() {
            if !path.starts_with("/api/v1/") {
                continue;
            }
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                op.responses.responses.insert(
                    "429".into(),
                    RefOr::Ref(utoipa::openapi::Ref::from_response_name("TooManyRequests")),
                );
                if op.request_body.is_some() {
                    op.responses.responses.insert(
                        "408".into(),
                        RefOr::Ref(utoipa::openapi::Ref::from_response_name("RequestTimeout")),
                    );
                }
            }
        }
    }
}

/// `POST /api/v1/agent/run` is the same handler as `POST /api/v1/agent/runs` (older SDKs use
/// it; see `http/routes.rs`), so its operation is a copy under the hosted service's operation id.
struct LegacyCreate;

impl Modify for LegacyCreate {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let Some(create) = doc
            .paths
            .paths
            .get("/api/v1/agent/runs")
            .and_then(|item| item.post.clone())
        else {
            return;
        };
        let mut legacy = create;
        legacy.operation_id = Some("runAgent".into());
        legacy.summary = Some("Create a run (the older path; identical behaviour)".into());
        let item = utoipa::openapi::path::PathItem::new(utoipa::openapi::HttpMethod::Post, legacy);
        doc.paths.paths.insert("/api/v1/agent/run".into(), item);
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "runledger",
        description = "Self-hosted service that runs AI coding agents. The `/api/v1` endpoints \
                       follow the wire format of the Oz agent API; `events`, `deliveries` \
                       and `admin` are runledger's own. Every error answer is `application/problem+json`.",
    ),
    paths(
        runs::create,
        runs::list,
        runs::get,
        runs::followup,
        super::fork::fork,
        runs::cancel,
        super::rerun::rerun,
        session::revoke,
        runs::events,
        travel::states,
        runs::transcript,
        super::steps::run_steps,
        super::deliveries::deliveries,
        super::proof::proof,
        super::bundle::export_run,
        super::changes::changes,
        runs::environments,
        agents::list,
        agents::models,
        agents::run_conversation,
        agents::get_conversation,
        agents::session_redirect,
        agents::conversation_redirect,
        agents::handoff_attachments,
        agents::identities,
        agents::create_identity,
        agents::identity,
        agents::update_identity,
        agents::delete_identity,
        artifacts::get,
        artifacts::download,
        super::schedules::create,
        super::schedules::list,
        super::schedules::get,
        super::schedules::update,
        super::schedules::delete,
        super::schedules::pause,
        super::schedules::resume,
        admin::list,
        admin::create,
        admin::revoke,
        admin::teams,
        admin::create_team,
        super::audit::events,
        super::audit::export,
        super::messages::send,
        super::messages::list,
        super::messages::read,
        super::messages::delivered,
        super::agent_events::poll,
        super::agent_events::report,
        super::audit_admin::list,
        super::probes::health,
        super::probes::ready,
        super::prometheus::metrics,
        document,
        session::page,
    ),
    components(responses(
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        PayloadTooLarge,
        NotSupported,
        InternalError,
        Unavailable,
    )),
    modifiers(&Security, &RateLimited, &LegacyCreate),
    tags(
        (name = "runs", description = "Create, list, follow and cancel agent runs"),
        (name = "schedules", description = "Prompts that fire on a cron expression, each firing a run"),
        (name = "agents", description = "Agents, models, conversations and redirects; agent identities are not offered"),
        (name = "admin", description = "API keys and teams, the store's export (admin keys only)"),
        (name = "audit", description = "Run events across runs: who did what, when"),
        (name = "orchestration", description = "Messages between runs, event polling and reported lifecycle events"),
        (name = "service", description = "Health, readiness, metrics, this document, session pages"),
    )
)]
pub struct ApiDoc;

/// The document as a JSON value, with utoipa's output corrected where it breaks the
/// specification.
pub fn document_value() -> Result<serde_json::Value, serde_json::Error> {
    let mut doc = serde_json::to_value(ApiDoc::openapi())?;
    camel_case_links(&mut doc);
    prompt_or_skill(&mut doc);
    Ok(doc)
}

/// A create needs a prompt that is not blank, or a skill (`validate::create`). JSON Schema can
/// say so; utoipa's derive cannot, so the rule is added to the derived schema here.
fn prompt_or_skill(doc: &mut serde_json::Value) {
    let Some(schema) = doc
        .pointer_mut("/components/schemas/RunAgentRequest")
        .and_then(|s| s.as_object_mut())
    else {
        return;
    };
    let string = serde_json::json!({"type": "string"});
    schema.insert(
        "anyOf".into(),
        serde_json::json!([
            {"required": ["prompt"],
             "properties": {"prompt": {"type": "string", "pattern": "\\S"}}},
            {"required": ["skill"], "properties": {"skill": string}},
            {"required": ["config"],
             "properties": {"config": {"type": "object", "required": ["skill_spec"],
                                       "properties": {"skill_spec": string}}}},
        ]),
    );
}

/// utoipa 5 writes the fields of a Link object in snake case (`operation_id`), which tools
/// ignore: to them every link names no operation. The specification's names are camel case.
fn camel_case_links(doc: &mut serde_json::Value) {
    let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    let operations = paths
        .values_mut()
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut());
    let responses = operations
        .filter_map(|op| op.get_mut("responses").and_then(|r| r.as_object_mut()))
        .flat_map(|r| r.values_mut());
    let links = responses
        .filter_map(|r| r.get_mut("links").and_then(|l| l.as_object_mut()))
        .flat_map(|l| l.values_mut())
        .filter_map(|link| link.as_object_mut());
    for link in links {
        for (snake, camel) in [
            ("operation_id", "operationId"),
            ("operation_ref", "operationRef"),
            ("request_body", "requestBody"),
        ] {
            if let Some(value) = link.remove(snake) {
                link.insert(camel.into(), value);
            }
        }
    }
}

/// The document as JSON, built once.
fn json() -> Result<&'static [u8], ApiError> {
    static DOC: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    DOC.get_or_init(|| {
        document_value()
            .and_then(|doc| serde_json::to_vec(&doc))
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map(Vec::as_slice)
    .map_err(|e| ApiError::internal(e))
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    operation_id = "openapi",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document of this service",
         body = Object, content_type = "application/json"),
        (status = 500, response = InternalError),
    )
)]
pub async fn document() -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(json()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_link_names_an_operation_of_the_document() {
        let doc = document_value().expect("document");
        let paths = doc["paths"].as_object().expect("paths");
        let operations: Vec<&str> = paths
            .values()
            .filter_map(|item| item.as_object())
            .flat_map(|item| item.values())
            .filter_map(|op| op["operationId"].as_str())
            .collect();
        let mut links = 0;
        for item in paths.values() {
            for op in item.as_object().expect("path item").values() {
                for response in op["responses"].as_object().expect("responses").values() {
                    for link in response["links"].as_object().into_iter().flatten() {
                        let (name, link) = link;
                        let target = link["operationId"].as_str().expect(name);
                        assert!(operations.contains(&target), "{name} -> {target}");
                        links += 1;
                    }
                }
            }
        }
        // create (both paths) -> five run endpoints and three orchestration ones; key create ->
        // revoke; a sent message -> its read and its delivered.
        assert_eq!(links, 19);
    }

    #[test]
    fn problem_codes_are_platform_error_codes() {
        let errors = [
            ApiError::bad_request(""),
            ApiError::unauthenticated(""),
            ApiError::forbidden(""),
            ApiError::not_found(""),
            ApiError::conflict(""),
            ApiError::too_large(""),
            ApiError::method_not_allowed("GET"),
            ApiError::unsupported_media_type(""),
            ApiError::not_supported(""),
            ApiError::internal(&""),
            ApiError::unavailable(""),
        ];
        for e in errors {
            assert!(
                super::super::wire::PLATFORM_ERROR_CODES.contains(&e.code),
                "{e}"
            );
        }
    }

    /// The revoke of session links and `/metrics` are in the document with the answers their
    /// authentication gives, so a client (and schemathesis) expects them.
    #[test]
    fn the_revoke_and_metrics_are_documented_with_their_auth() {
        let doc = document_value().expect("document");
        let revoke = &doc["paths"]["/api/v1/agent/runs/{run_id}/session-link/revoke"]["post"];
        assert_eq!(revoke["operationId"], "revokeSessionLink", "{revoke}");
        let metrics = &doc["paths"]["/metrics"]["get"];
        for (op, statuses) in [
            (revoke, &["200", "401", "404", "429"][..]),
            (metrics, &["200", "401", "403"][..]),
        ] {
            for status in statuses {
                assert!(op["responses"][*status].is_object(), "{status}: {op}");
            }
            assert_eq!(
                op["security"],
                serde_json::json!([{"bearerAuth": []}]),
                "{op}"
            );
        }
        let page = &doc["paths"]["/sessions/{run_id}"]["get"]["parameters"];
        let names: Vec<&str> = page
            .as_array()
            .expect("parameters")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(
            names.contains(&"expires") && names.contains(&"token"),
            "{page}"
        );
    }

    #[test]
    fn a_create_needs_a_prompt_or_a_skill() {
        let doc = document_value().expect("document");
        let any_of = &doc["components"]["schemas"]["RunAgentRequest"]["anyOf"];
        assert_eq!(any_of.as_array().map(Vec::len), Some(3), "{any_of}");
    }

    /// `RunItem.schedule` is the OpenAPI `ScheduleInfo`: its three fields, all required.
    #[test]
    fn a_run_item_names_its_schedule_as_schedule_info() {
        let doc = document_value().expect("document");
        let schemas = &doc["components"]["schemas"];
        let schedule = &schemas["RunItem"]["properties"]["schedule"];
        let reference = schedule["$ref"]
            .as_str()
            .or_else(|| {
                schedule["oneOf"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find_map(|s| s["$ref"].as_str())
            })
            .unwrap_or_else(|| panic!("no $ref in {schedule}"));
        assert_eq!(reference, "#/components/schemas/ScheduleInfo");
        let mut required: Vec<&str> = schemas["ScheduleInfo"]["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        required.sort();
        assert_eq!(required, ["cron_schedule", "schedule_id", "schedule_name"]);
    }
}
