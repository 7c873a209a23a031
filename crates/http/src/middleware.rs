//! What wraps every request and answer of the app: the body limits, the request id and its
//! `request` span with the latency metric (`request_context`), the security headers of every
//! answer, the deadline of a request's body, and problem+json for the failures the framework
//! answers by itself (inside the app, and through the vendored actix-http's hook, before it).
//! It names no route and no handler and authenticates nothing.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::web;
use tracing::Instrument;

use super::problem::{ApiError, REQUEST};
use super::{session, validate, AppState};

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

/// Gives every request an id (`x-request-id`, `trace_id` in error bodies, and a `request`
/// span around everything logged while answering it), and records its latency by route.
///
/// The id is always made here: a client's own `x-request-id` is logged beside it
/// (`client_request_id`, when it is printable ASCII of at most 128 bytes) but never sent back,
/// so nothing a client chooses is echoed into an answer.
pub(super) async fn request_context(
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
    runledger_base::memory::note_activity();
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
    runledger_base::metrics::METRICS.request(&route, method.as_str(), status, took);
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
pub(super) async fn body_deadline(
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
