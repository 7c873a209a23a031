//! The route table: every path, its methods (405 with `Allow` for any other), its body limit,
//! and the handler that answers it, in groups by the resources they serve; and `app`, the table
//! wrapped in the middleware every app needs. It must not answer anything itself beyond the
//! 404 and 405 of what no route serves: handlers live in their own modules.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::{web, HttpResponse, Scope};

use super::middleware::{body_deadline, request_context, MAX_BODY_BYTES, MAX_CREATE_BODY_BYTES};
use super::problem::ApiError;
use super::{
    admin, agents, artifacts, audit, audit_admin, console, deliveries, openapi, probes, prometheus,
    runs, schedules, session, travel, AppState,
};

async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::not_found("no such route"))
}

fn only(allow: &'static str) -> actix_web::Route {
    web::to(move || async move { Err::<HttpResponse, _>(ApiError::method_not_allowed(allow)) })
}

/// Registers every route on an actix-web app.
pub fn configure(cfg: &mut web::ServiceConfig) {
    let payload = web::PayloadConfig::new(MAX_BODY_BYTES);
    cfg.app_data(payload)
        .app_data(
            web::QueryConfig::default()
                .error_handler(|e, _| ApiError::bad_request(e.to_string()).into()),
        )
        .app_data(
            web::PathConfig::default()
                .error_handler(|e, _| ApiError::bad_request(e.to_string()).into()),
        );
    keyless_routes(cfg);
    // One scope, its groups in this order: a resource is matched in the order it was added.
    let api = web::scope("/api/v1");
    let api = admin_routes(schedule_routes(agent_routes(run_routes(api))));
    let api = audit_routes(api);
    let api = orchestration_routes(api);
    cfg.service(api)
        .configure(console::configure)
        .default_service(web::to(not_found));
}

/// The routes outside `/api/v1`: the probes, `/metrics` and the document, which need no API
/// key, and the capability links (an artifact's download, a run's session page), whose token
/// is in the URL.
fn keyless_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/healthz")
            .get(probes::health)
            .default_service(only("GET")),
    )
    .service(
        web::resource("/metrics")
            .get(prometheus::metrics)
            .default_service(only("GET")),
    )
    .service(
        web::resource("/readyz")
            .get(probes::ready)
            .default_service(only("GET")),
    )
    .service(
        web::resource("/openapi.json")
            .get(openapi::document)
            .default_service(only("GET")),
    )
    .service(
        web::resource("/artifacts/{artifact_uid}/download")
            .get(artifacts::download)
            .route(web::head().to(artifacts::download))
            .default_service(only("GET, HEAD")),
    )
    .service(
        web::resource("/sessions/{run_id}")
            .get(session::page)
            .default_service(only("GET")),
    );
}

/// A run and what hangs off it: create, list, follow up, cancel, events, transcript, links.
fn run_routes(scope: Scope) -> Scope {
    scope
        .service(
            web::resource("/agent/run")
                .app_data(web::PayloadConfig::new(MAX_CREATE_BODY_BYTES))
                .post(runs::create)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/runs")
                .app_data(web::PayloadConfig::new(MAX_CREATE_BODY_BYTES))
                .post(runs::create)
                .get(runs::list)
                .default_service(only("GET, POST")),
        )
        .service(
            web::resource("/agent/runs/{run_id}")
                .get(runs::get)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/followups")
                .post(runs::followup)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/fork")
                .post(super::fork::fork)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/cancel")
                .post(runs::cancel)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/rerun")
                .post(super::rerun::rerun)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/session-link/revoke")
                .post(session::revoke)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/events")
                .get(runs::events)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/states")
                .get(travel::states)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/export")
                .get(super::bundle::export_run)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/changes")
                .get(super::changes::changes)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/proof")
                .get(super::proof::proof)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/deliveries")
                .get(deliveries::deliveries)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/transcript")
                .get(runs::transcript)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/steps")
                .get(super::steps::run_steps)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/conversation")
                .get(agents::run_conversation)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/runs/{run_id}/handoff/attachments")
                .get(agents::handoff_attachments)
                .default_service(only("GET")),
        )
}

/// The Oz read endpoints beside runs: agents, models, conversations, redirects, identities,
/// artifacts and environments.
/// Messages between runs and event polling (`messages.rs`, `agent_events.rs`).
fn orchestration_routes(scope: Scope) -> Scope {
    scope
        .service(
            web::resource("/agent/messages")
                .post(super::messages::send)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/messages/{message_id}/read")
                .post(super::messages::read)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/messages/{message_id}/delivered")
                .post(super::messages::delivered)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/messages/{run_id}")
                .get(super::messages::list)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/events")
                .get(super::agent_events::poll)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/events/{run_id}")
                .post(super::agent_events::report)
                .default_service(only("POST")),
        )
}

fn agent_routes(scope: Scope) -> Scope {
    scope
        .service(
            web::resource("/agent")
                .get(agents::list)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/models")
                .get(agents::models)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/conversations/{conversation_id}")
                .get(agents::get_conversation)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/conversations/{conversation_id}/redirect")
                .get(agents::conversation_redirect)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/sessions/{session_uuid}/redirect")
                .get(agents::session_redirect)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/identities")
                .get(agents::identities)
                .post(agents::create_identity)
                .default_service(only("GET, POST")),
        )
        .service(
            web::resource("/agent/identities/{uid}")
                .get(agents::identity)
                .put(agents::update_identity)
                .delete(agents::delete_identity)
                .default_service(only("GET, PUT, DELETE")),
        )
        .service(
            web::resource("/agent/artifacts/{artifact_uid}")
                .get(artifacts::get)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/agent/environments")
                .get(runs::environments)
                .default_service(only("GET")),
        )
}

/// Schedules and their pause and resume.
fn schedule_routes(scope: Scope) -> Scope {
    scope
        .service(
            web::resource("/agent/schedules")
                .post(schedules::create)
                .get(schedules::list)
                .default_service(only("GET, POST")),
        )
        .service(
            web::resource("/agent/schedules/{schedule_id}")
                .get(schedules::get)
                .put(schedules::update)
                .delete(schedules::delete)
                .default_service(only("GET, PUT, DELETE")),
        )
        .service(
            web::resource("/agent/schedules/{schedule_id}/pause")
                .post(schedules::pause)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/agent/schedules/{schedule_id}/resume")
                .post(schedules::resume)
                .default_service(only("POST")),
        )
}

/// The admin API: keys and teams, and the admin audit log.
fn admin_routes(scope: Scope) -> Scope {
    scope
        .service(
            web::resource("/admin/keys")
                .get(admin::list)
                .post(admin::create)
                .default_service(only("GET, POST")),
        )
        .service(
            web::resource("/admin/keys/{key_id}/revoke")
                .post(admin::revoke)
                .default_service(only("POST")),
        )
        .service(
            web::resource("/admin/teams")
                .get(admin::teams)
                .post(admin::create_team)
                .default_service(only("GET, POST")),
        )
        .service(
            web::resource("/audit/admin")
                .get(audit_admin::list)
                .default_service(only("GET")),
        )
}

/// Run events across runs, and the store's export (`audit/`).
fn audit_routes(scope: Scope) -> Scope {
    scope
        .service(
            web::resource("/audit/events")
                .get(audit::events)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/admin/export")
                .get(audit::export)
                .default_service(only("GET")),
        )
}

/// Wraps `configure` in the middleware every app needs.
pub fn app(
    state: web::Data<AppState>,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    actix_web::App::new()
        .app_data(state)
        // The last wrap is the outermost: the body is read inside the request's context.
        .wrap(actix_web::middleware::from_fn(
            super::read_only::refuse_writes,
        ))
        .wrap(actix_web::middleware::from_fn(body_deadline))
        .wrap(actix_web::middleware::from_fn(request_context))
        .configure(configure)
}
