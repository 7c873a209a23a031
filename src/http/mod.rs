//! The HTTP edge: routes, authentication, JSON DTOs, problem+json errors and pagination
//! cursors. It talks to runs only through the `Runs` handle and the narrow handles it hands
//! out (API keys, idempotency records, transcript reads), never to the store, and owns every
//! status code.

mod access;
mod admin;
mod agents;
mod artifacts;
pub mod console;
mod deliveries;
mod error_responses;
mod fields;
mod history;
pub mod openapi;
pub mod problem;
pub mod ratelimit;
pub mod render;
mod runs;
mod schedules;
mod scrape;
mod session;
mod sse;
mod stream;
mod transcript_stream;
pub mod validate;
pub mod wire;

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use tracing::Instrument;

use crate::actor::Runs;
use crate::api_keys::Key;
use crate::config::Config;
use problem::{ApiError, REQUEST};
use ratelimit::RateLimiter;
use wire::{Health, HealthStatus, Ready, ReadyStatus};

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest accepted body of a create: `MAX_BODY_BYTES` for the run itself, plus its
/// attachments at their limit in base64 (4 characters per 3 bytes) with their names.
pub const MAX_CREATE_BODY_BYTES: usize = MAX_BODY_BYTES
    + (validate::MAX_ATTACHMENTS_TOTAL_BYTES / 3 + 1) * 4
    + validate::MAX_ATTACHMENTS * 1024;

/// The body limit of a request to `path`.
fn body_limit(path: &str) -> usize {
    if path.ends_with("/agent/runs") || path.ends_with("/agent/run") {
        MAX_CREATE_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    }
}

/// Shared state of the HTTP layer.
pub struct AppState {
    pub runs: Runs,
    /// Every schedule (`crate::schedules`).
    pub schedules: crate::schedules::Schedules,
    pub config: Arc<Config>,
    /// Base of `session_link`s (the configured public URL or the bound address).
    pub public_url: String,
    pub session_secret: [u8; 32],
    pub ready: std::sync::atomic::AtomicBool,
    /// Per-key token buckets; `None` when rate limiting is off.
    pub rate_limiter: Option<RateLimiter>,
    /// Set once the shutdown has stopped the agents and recorded their runs: live event
    /// streams then send what is new and end, instead of holding the workers' graceful stop.
    pub closing: tokio::sync::watch::Sender<bool>,
    /// The JSON of runs recently answered, for the clients that poll them.
    pub rendered: render::RenderCache,
    /// The web console's sessions (`console`).
    pub console: console::Sessions,
}

impl AppState {
    pub fn new(
        runs: Runs,
        schedules: crate::schedules::Schedules,
        config: Arc<Config>,
        public_url: String,
        session_secret: [u8; 32],
    ) -> AppState {
        AppState {
            rate_limiter: config.rate_limit.map(RateLimiter::new),
            runs,
            schedules,
            config,
            public_url,
            session_secret,
            ready: std::sync::atomic::AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
            rendered: render::RenderCache::new(render::DEFAULT_BUDGET),
            console: console::Sessions::default(),
        }
    }
}

/// The authenticated caller of an `/api/v1` request — a bearer key, or without one the key of a
/// console session cookie (`console::authenticate`) — charged one token of its key's rate limit.
/// Every `/api/v1` handler takes one, which is what puts the whole API under the limit.
pub struct Principal(pub Key);

impl FromRequest for Principal {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Principal, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(authenticate(req))
    }
}

/// The caller of an endpoint the official clients call without a key (the redirect checks):
/// `None` when the request has no `Authorization` header; a key that is sent must be valid
/// (else 401), and is charged like any other.
pub struct MaybePrincipal(pub Option<Key>);

impl FromRequest for MaybePrincipal {
    type Error = ApiError;
    type Future = std::future::Ready<Result<MaybePrincipal, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(if req.headers().contains_key(header::AUTHORIZATION) {
            authenticate(req).map(|Principal(key)| MaybePrincipal(Some(key)))
        } else {
            Ok(MaybePrincipal(None))
        })
    }
}

fn authenticate(req: &HttpRequest) -> Result<Principal, ApiError> {
    let Some(state) = req.app_data::<web::Data<AppState>>() else {
        return Err(ApiError::internal(&"application state missing"));
    };
    let key = match req.headers().get(header::AUTHORIZATION) {
        Some(header) => bearer(state, header)?,
        // Without a bearer key, the console's session cookie (with its CSRF rules) may stand
        // in for the key that signed in; a bearer request never looks at cookies.
        None => console::authenticate(req, state)?.ok_or_else(|| {
            ApiError::unauthenticated("send an API key as 'Authorization: Bearer <key>'")
        })?,
    };
    charge(state, &key)?;
    Ok(Principal(key))
}

/// The secret of a bearer `Authorization` header; `what` names it in the refusal.
fn bearer_secret<'h>(header: &'h HeaderValue, what: &str) -> Result<&'h str, ApiError> {
    header
        .to_str()
        .ok()
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::unauthenticated(format!(
                "the Authorization header must be 'Bearer <{what}>'"
            ))
        })
}

/// The live key of a bearer `Authorization` header.
fn bearer(state: &AppState, header: &HeaderValue) -> Result<Key, ApiError> {
    let secret = bearer_secret(header, "key")?;
    state
        .runs
        .keys()
        .authenticate(secret)?
        .ok_or_else(|| ApiError::unauthenticated("the API key is not valid or has been revoked"))
}

/// Charges one request to `key`'s rate limit: API requests, with a bearer key or a console
/// session, and console pages alike.
fn charge(state: &AppState, key: &Key) -> Result<(), ApiError> {
    // Limited by key id, so only after authentication: a request without a valid key costs a
    // hash and one lookup, and has no bucket to charge (see docs/api.md, Rate limits).
    if let Some(limiter) = &state.rate_limiter {
        if let Err(wait) = limiter.check(&key.id) {
            let rate = limiter.rate();
            let secs = ratelimit::retry_after_secs(wait);
            return Err(ApiError::rate_limited(
                secs,
                format!(
                    "this API key sent more than {} requests per second (bursts of up to {}); \
                     retry after {secs} s",
                    rate.per_sec, rate.burst
                ),
            ));
        }
    }
    Ok(())
}

/// Gives every request an id (`x-request-id`, `trace_id` in error bodies, and a `request`
/// span around everything logged while answering it), and records its latency by route.
///
/// The id is always made here: a client's own `x-request-id` is logged beside it
/// (`client_request_id`, when it is printable ASCII of at most 128 bytes) but never sent back,
/// so nothing a client chooses is echoed into an answer.
async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let id = ulid::Ulid::new().to_string();
    let client_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.chars().all(|c| c.is_ascii_graphic()))
        .unwrap_or("")
        .to_string();
    let path = req.path().to_string();
    let method = req.method().clone();
    crate::memory::note_activity();
    let header_value = HeaderValue::from_str(&id).ok();
    let started = std::time::Instant::now();
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        client_request_id = tracing::field::Empty,
        method = %method,
        path = %path
    );
    if !client_id.is_empty() {
        span.record("client_request_id", client_id.as_str());
    }
    let mut response = REQUEST
        .scope(
            (id, path),
            async move {
                let response = next.call(req).await?.map_into_boxed_body();
                Ok::<_, actix_web::Error>(as_problem(response))
            }
            .instrument(span.clone()),
        )
        .await?;
    let took = started.elapsed();
    let status = response.status().as_u16();
    // The pattern, not the path: one series per route whatever ids clients send.
    let route = response
        .request()
        .match_pattern()
        .unwrap_or_else(|| "unmatched".to_string());
    crate::metrics::METRICS.request(&route, method.as_str(), status, took);
    span.in_scope(|| {
        tracing::debug!(status, route = %route, micros = took.as_micros() as u64, "request answered")
    });
    let headers = response.headers_mut();
    if let Some(v) = header_value {
        headers.insert(header::HeaderName::from_static("x-request-id"), v);
    }
    secure_headers(headers);
    Ok(response)
}

/// The Content-Security-Policy of every HTML answer: nothing may load, run or frame it. The
/// session page's one inline stylesheet is allowed by its hash (`session::STYLE_HASH`).
fn content_security_policy() -> &'static HeaderValue {
    static CSP: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();
    CSP.get_or_init(|| {
        let policy = format!(
            "default-src 'none'; style-src '{}'; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'",
            session::style_hash()
        );
        HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static("default-src 'none'"))
    })
}

/// Every answer is sent as its declared type (`nosniff`); an HTML one (the session page) also
/// may not be framed, load anything its policy does not name, or leak its URL (which holds a
/// capability token) as a referrer.
fn secure_headers(headers: &mut header::HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let html = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    // An answer that set its own policy keeps it (an artifact download's `sandbox`).
    if html && !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            content_security_policy().clone(),
        );
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
}

/// A request's body must be complete within `server.body_timeout_secs` of its head: a body
/// that trickles in slower is answered 408 and its connection closed, so that slow senders
/// cannot hold connections open. The payload is wrapped, not read here: a handler still reads
/// it only after authentication and the rate limit (a refused request reads no body), and a
/// read past the deadline fails; the failure is then answered as the 408 it is.
async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    use actix_web::HttpMessage as _;
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    if !has_body {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let timeout = req
        .app_data::<web::Data<AppState>>()
        .map_or(std::time::Duration::from_secs(30), |s| {
            s.config.body_timeout
        });
    let expired = std::rc::Rc::new(std::cell::Cell::new(false));
    let payload = Deadline {
        inner: req.take_payload(),
        timer: Box::pin(tokio::time::sleep(timeout)),
        expired: expired.clone(),
    };
    req.set_payload(actix_web::dev::Payload::from(
        Box::pin(payload) as actix_http::BoxedPayloadStream
    ));
    let response = next.call(req).await?.map_into_boxed_body();
    if !expired.get() {
        return Ok(response);
    }
    let error = ApiError::request_timeout(format!(
        "the request body did not arrive within {} s (server.body_timeout_secs)",
        timeout.as_secs()
    ));
    let mut answer = actix_web::ResponseError::error_response(&error);
    // What is left of the body cannot be told apart from a next request.
    answer
        .head_mut()
        .set_connection_type(actix_web::http::ConnectionType::Close);
    Ok(response.into_response(answer))
}

/// A request's payload that fails once its deadline has passed while more is awaited.
struct Deadline {
    inner: actix_web::dev::Payload,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    expired: std::rc::Rc<std::cell::Cell<bool>>,
}

impl futures_util::Stream for Deadline {
    type Item = Result<web::Bytes, actix_web::error::PayloadError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        // What has arrived is taken first: a body complete in time never fails.
        if let Poll::Ready(item) = std::pin::Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(item);
        }
        match std::future::Future::poll(self.timer.as_mut(), cx) {
            Poll::Ready(()) => {
                self.expired.set(true);
                Poll::Ready(Some(Err(actix_web::error::PayloadError::Io(
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the request body did not arrive in time",
                    ),
                ))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The body of an answer that actix-http makes by itself, to a request it cannot hand to the
/// app (a malformed request line or header, a URI over `http::Uri`'s 65,534 bytes, a head over
/// its buffer): problem+json like every other failure, with a server-made `trace_id` (also
/// `x-request-id`). No request path is known, so `instance` is empty. Installed once at start
/// (`install_dispatcher_answers`); the hook is the patch of `vendor/actix-http`.
fn dispatcher_answer(head: &mut actix_http::ResponseHead) -> web::Bytes {
    let status = head.status;
    let id = ulid::Ulid::new().to_string();
    tracing::debug!(request_id = %id, status = status.as_u16(), "answered a request that could not be parsed");
    let error = match status.as_u16() {
        431 => ApiError::client_error(
            status,
            "the request's head (request line and headers) is too large",
        ),
        s if s >= 500 => ApiError::internal(&"the HTTP dispatcher failed"),
        _ => ApiError::client_error(
            status,
            "the request could not be parsed: a malformed request line or header, or a URI \
             longer than 65534 bytes",
        ),
    };
    let response = REQUEST.sync_scope((id.clone(), String::new()), || {
        actix_web::ResponseError::error_response(&error)
    });
    for (name, value) in response.headers() {
        head.headers_mut().insert(name.clone(), value.clone());
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        head.headers_mut()
            .insert(header::HeaderName::from_static("x-request-id"), v);
    }
    secure_headers(head.headers_mut());
    match actix_web::body::MessageBody::try_into_bytes(response.into_body()) {
        Ok(bytes) => bytes,
        Err(_) => web::Bytes::new(),
    }
}

/// Makes the answers actix-http gives by itself problem+json (`dispatcher_answer`).
pub fn install_dispatcher_answers() {
    actix_http::runledger::set_error_body(dispatcher_answer);
}

/// Failures produced by the framework inside the app (an oversized body, a payload that cannot
/// be read) come with plain-text bodies; they are answered as problem+json like every other
/// failure. (A request too broken to parse never reaches the app; actix-http answers it.)
fn as_problem(
    response: ServiceResponse<actix_web::body::BoxBody>,
) -> ServiceResponse<actix_web::body::BoxBody> {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    // The console's pages answer their errors as pages that say what to do.
    let is_page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if !status.is_client_error() && !status.is_server_error() || is_problem || is_page {
        return response;
    }
    let error = match status.as_u16() {
        413 => ApiError::too_large(format!(
            "the request body is larger than {} bytes",
            body_limit(response.request().path())
        )),
        404 => ApiError::not_found("no such resource"),
        s if s >= 500 => ApiError::internal(&format!("framework error with status {status}")),
        // Any other client error keeps its status (405, 408, 411, 415, ...).
        _ => ApiError::client_error(
            status,
            format!(
                "the request could not be served ({} {})",
                status.as_u16(),
                status.canonical_reason().unwrap_or("client error")
            ),
        ),
    };
    response.into_response(actix_web::ResponseError::error_response(&error))
}

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
        )
        .service(
            web::resource("/healthz")
                .get(health)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/metrics")
                .get(metrics)
                .default_service(only("GET")),
        )
        .service(
            web::resource("/readyz")
                .get(ready)
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
        )
        .service(
            web::scope("/api/v1")
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
                    web::resource("/agent/runs/{run_id}/cancel")
                        .post(runs::cancel)
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
                    web::resource("/agent/runs/{run_id}/conversation")
                        .get(agents::run_conversation)
                        .default_service(only("GET")),
                )
                .service(
                    web::resource("/agent/runs/{run_id}/handoff/attachments")
                        .get(agents::handoff_attachments)
                        .default_service(only("GET")),
                )
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
                ),
        )
        .configure(console::configure)
        .default_service(web::to(not_found));
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
        .wrap(actix_web::middleware::from_fn(body_deadline))
        .wrap(actix_web::middleware::from_fn(request_context))
        .configure(configure)
}

/// Liveness: the process serves requests.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    operation_id = "health",
    responses((status = 200, description = "Alive", body = Health))
)]
async fn health() -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: HealthStatus::Ok,
    })
}

/// Readiness: startup recovery (re-queueing the waiting runs) is done.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "service",
    operation_id = "ready",
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, response = error_responses::Unavailable),
    )
)]
async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if !state.ready.load(std::sync::atomic::Ordering::Acquire) {
        return Err(ApiError::unavailable("the service is still recovering"));
    }
    // A store that cannot write takes no new work: a load balancer should send it elsewhere.
    let health = state.runs.store_health();
    if let Some(reason) = health.refusal {
        return Err(ApiError {
            retryable: health.refusal_clears,
            ..ApiError::unavailable(format!("the store refuses writes: {reason}"))
        });
    }
    Ok(HttpResponse::Ok().json(Ready {
        status: ReadyStatus::Ready,
    }))
}

/// Prometheus text exposition of the service's gauges and counters.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    operation_id = "metrics",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String,
         content_type = "text/plain"),
        (status = 401, description = "Neither the metrics token (`server.metrics_token`) nor a live API key was sent as `Authorization: Bearer …`",
         content_type = "application/problem+json", body = problem::Problem),
        (status = 403, description = "A live API key that is not an admin's",
         content_type = "application/problem+json", body = problem::Problem),
    ),
    security(("bearerAuth" = []))
)]
async fn metrics(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    scrape::authorize(&req, &state)?;
    use crate::metrics::{escape, family};
    use std::fmt::Write;
    let runs = &state.runs;
    let store = runs.store_health();
    let (syncs, sync_micros) = store.syncs;
    let mut out = String::new();
    family(
        &mut out,
        "runledger_live_run_actors",
        "gauge",
        "Run actors alive (active runs only).",
    );
    let _ = writeln!(out, "runledger_live_run_actors {}", runs.live_actors());
    if let Ok(counts) = runs.count_by_state().await {
        family(&mut out, "runledger_runs", "gauge", "Runs by state.");
        for (state, n) in counts {
            let _ = writeln!(out, "runledger_runs{{state=\"{}\"}} {n}", state.as_str());
        }
    }
    let load = runs.load();
    if let Ok(mut usage) = runs.usage_by_environment().await {
        // Every configured environment has its series, at 0 until a run of it records usage;
        // runs of an environment since removed from the configuration keep theirs.
        for (env, _, _) in &load {
            usage.entry(env.clone()).or_default();
        }
        use crate::http::wire::usd;
        for (name, help, value) in [
            (
                "runledger_inference_cost_usd_total",
                "Inference cost of the runs' executions, per environment (US dollars).",
                (|t| usd(t.inference_nano_usd)) as fn(&crate::projection::UsageTotals) -> f64,
            ),
            (
                "runledger_compute_cost_usd_total",
                "Compute cost (CPU time at the configured price) of the runs' executions, per \
                 environment (US dollars).",
                |t| usd(t.compute_nano_usd),
            ),
            (
                "runledger_cpu_seconds_total",
                "CPU time of the runs' executions' process trees, per environment.",
                |t| t.cpu_ms as f64 / 1000.0,
            ),
        ] {
            family(&mut out, name, "counter", help);
            for (env, totals) in &usage {
                let _ = writeln!(
                    out,
                    "{name}{{environment=\"{}\"}} {}",
                    escape(env),
                    value(totals)
                );
            }
        }
        let name = "runledger_tokens_total";
        family(
            &mut out,
            name,
            "counter",
            "Tokens the agents' CLIs reported, per environment and direction.",
        );
        for (env, totals) in &usage {
            for (direction, n) in [
                ("input", totals.input_tokens),
                ("output", totals.output_tokens),
            ] {
                let _ = writeln!(
                    out,
                    "{name}{{environment=\"{}\",direction=\"{direction}\"}} {n}",
                    escape(env)
                );
            }
        }
    }
    family(
        &mut out,
        "runledger_queue_depth",
        "gauge",
        "Runs waiting for a slot, per environment.",
    );
    for (env, queued, _) in &load {
        let _ = writeln!(
            out,
            "runledger_queue_depth{{environment=\"{}\"}} {queued}",
            escape(env)
        );
    }
    family(
        &mut out,
        "runledger_running_executions",
        "gauge",
        "Executions holding a slot, per environment.",
    );
    for (env, _, running) in &load {
        let _ = writeln!(
            out,
            "runledger_running_executions{{environment=\"{}\"}} {running}",
            escape(env)
        );
    }
    family(
        &mut out,
        "runledger_durable_syncs_total",
        "counter",
        "Group-commit syncs (flush, fdatasync, new blob fsyncs).",
    );
    let _ = writeln!(out, "runledger_durable_syncs_total {syncs}");
    family(
        &mut out,
        "runledger_durable_sync_seconds_total",
        "counter",
        "Time spent in group-commit syncs.",
    );
    let _ = writeln!(
        out,
        "runledger_durable_sync_seconds_total {:.6}",
        sync_micros as f64 / 1e6
    );
    family(
        &mut out,
        "runledger_store_writable",
        "gauge",
        "1 while the store accepts writes; 0 while it refuses them (/readyz names why).",
    );
    let _ = writeln!(
        out,
        "runledger_store_writable {}",
        u8::from(store.refusal.is_none())
    );
    family(
        &mut out,
        "runledger_store_refused_writes_total",
        "counter",
        "Writes refused because the store could not durably write.",
    );
    let _ = writeln!(
        out,
        "runledger_store_refused_writes_total {}",
        store.refused_writes
    );
    family(
        &mut out,
        "runledger_rate_limited_total",
        "counter",
        "Requests refused with 429 by the per-key rate limit.",
    );
    let _ = writeln!(
        out,
        "runledger_rate_limited_total {}",
        state.rate_limiter.as_ref().map_or(0, RateLimiter::refused)
    );
    crate::metrics::METRICS.render(&mut out);
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(out))
}
