//! Errors as RFC 7807 `application/problem+json`, in one table.
//!
//! Every failure the API can answer — validation, auth, unknown runs, unknown routes, wrong
//! methods, malformed JSON, internal errors — becomes an `ApiError`, rendered here with the
//! OpenAPI `Error` fields. `instance` and `trace_id` come from the request context that the
//! request-id middleware puts in task-local storage. Internal causes are logged, never sent.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use runledger_runs::failure::Cause;

tokio::task_local! {
    /// `(request id, request path)` of the request being served.
    pub static REQUEST: (String, String);
}

pub const TYPE_BASE: &str = "https://docs.warp.dev/reference/api-and-sdk/troubleshooting/errors/";

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: String,
    pub retryable: bool,
    pub allow: Option<&'static str>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.detail)
    }
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            detail: detail.into(),
            retryable: false,
            allow: None,
            retry_after: None,
        }
    }

    /// A client error of any status, for the framework's own answers (`http::as_problem`).
    pub fn client_error(status: StatusCode, detail: impl Into<String>) -> ApiError {
        ApiError::new(status, "invalid_request", detail)
    }

    pub fn bad_request(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", detail)
    }

    pub fn unauthenticated(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "authentication_required", detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "not_authorized", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "resource_not_found", detail)
    }

    pub fn conflict(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", detail)
    }

    /// The request's body did not arrive in time (`server.body_timeout_secs`).
    pub fn request_timeout(detail: impl Into<String>) -> ApiError {
        ApiError {
            retryable: true,
            ..ApiError::new(StatusCode::REQUEST_TIMEOUT, "invalid_request", detail)
        }
    }

    pub fn too_large(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request", detail)
    }

    /// The caller's API key is over its request rate. The OpenAPI `PlatformErrorCode` has no
    /// rate-limit code; `resource_unavailable` is its code for a transient condition that a
    /// later retry clears, and the status (429) and `Retry-After` say the rest.
    pub fn rate_limited(retry_after_secs: u64, detail: impl Into<String>) -> ApiError {
        ApiError {
            retryable: true,
            retry_after: Some(retry_after_secs),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "resource_unavailable",
                detail,
            )
        }
    }

    pub fn method_not_allowed(allow: &'static str) -> ApiError {
        ApiError {
            allow: Some(allow),
            ..ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request",
                format!("this resource supports {allow}"),
            )
        }
    }

    /// An operation of the Oz API that runledger deliberately does not offer
    /// (`operation_not_supported`, 422): the route exists, so a client can tell it from a typo
    /// (404), and `detail` says what runledger has instead.
    pub fn not_supported(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "operation_not_supported",
            detail,
        )
    }

    pub fn unsupported_media_type(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request",
            detail,
        )
    }

    /// An unexpected failure: logged with its cause, answered opaquely.
    pub fn internal(cause: &dyn std::fmt::Display) -> ApiError {
        let (trace_id, path) = REQUEST.try_with(|r| r.clone()).unwrap_or_default();
        tracing::error!(error = %cause, %trace_id, %path, "internal error");
        ApiError {
            retryable: true,
            ..ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the service hit an unexpected error; the request may be retried",
            )
        }
    }

    /// A run whose stored history failed its checksum: logged with the record it names,
    /// answered with the run (which the client named) but no storage details. Not retryable:
    /// the damage stays until an operator repairs it.
    pub fn damaged(cause: &dyn std::fmt::Display) -> ApiError {
        let (trace_id, path) = REQUEST.try_with(|r| r.clone()).unwrap_or_default();
        tracing::error!(error = %cause, %trace_id, %path, "damaged event record");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "the stored history of this run is damaged; the operator must restore it \
             (the server log names the record)",
        )
    }

    /// A write the store refused before writing anything: it cannot durably write (a full or
    /// read-only filesystem, a failed write or sync), for `reason`. Retryable only while the
    /// condition can clear without a restart (low on space).
    pub fn refused(reason: &str, retryable: bool) -> ApiError {
        let detail = if retryable {
            format!(
                "{reason}; new work is refused until space is freed, and nothing of this \
                 request was stored. Retry later"
            )
        } else {
            format!(
                "{reason}. Nothing of this request was stored; reads still work. The operator \
                 must fix the storage and restart the server"
            )
        };
        ApiError {
            retryable,
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "resource_unavailable",
                detail,
            )
        }
    }

    /// A write whose events reached the store but could not be made durable (`cause` in
    /// words): whether it took effect is unknown, and stays so until a restart recovers what is
    /// on disk.
    pub fn outcome_unknown(cause: &str, error: &dyn std::fmt::Display) -> ApiError {
        let (trace_id, path) = REQUEST.try_with(|r| r.clone()).unwrap_or_default();
        tracing::error!(%error, %trace_id, %path, "a write could not be made durable");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "resource_unavailable",
            format!(
                "{cause}: this request was written but could not be made durable, so its outcome is \
                 unknown until the server is restarted. The store refuses writes until then. \
                 Retry a create with the same Idempotency-Key once the service is back (it \
                 answers the run if it was stored, and creates it once otherwise); look a \
                 follow-up or cancel up in the run's events before sending it again"
            ),
        )
    }

    /// A storage operation that failed with an I/O error (`cause` in words: a full or
    /// read-only filesystem, a failing device), before or instead of writing: nothing of the
    /// request took effect.
    pub fn storage_failed(cause: &str, error: &dyn std::fmt::Display) -> ApiError {
        let (trace_id, path) = REQUEST.try_with(|r| r.clone()).unwrap_or_default();
        tracing::error!(%error, %trace_id, %path, "storage operation failed");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "resource_unavailable",
            format!(
                "{cause}; the store could not complete this request. The operator must fix the \
                 storage and restart the server"
            ),
        )
    }

    pub fn unavailable(detail: impl Into<String>) -> ApiError {
        ApiError {
            retryable: true,
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "resource_unavailable",
                detail,
            )
        }
    }

    fn title(&self) -> &'static str {
        match self.status.as_u16() {
            400 => "Invalid request",
            401 => "Authentication required",
            403 => "Not authorized",
            404 => "Resource not found",
            405 => "Method not allowed",
            406 => "Not acceptable",
            408 => "Request timeout",
            409 => "Conflict",
            413 => "Request body too large",
            415 => "Unsupported media type",
            422 => "Operation not supported",
            429 => "Too many requests",
            503 => "Resource unavailable",
            _ if self.status.is_client_error() => {
                self.status.canonical_reason().unwrap_or("Invalid request")
            }
            _ => "Internal error",
        }
    }
}

/// An error answer (OpenAPI `Error`, RFC 7807), sent as `application/problem+json`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct Problem<'a> {
    /// `https://docs.warp.dev/reference/api-and-sdk/troubleshooting/errors/` followed by the
    /// `PlatformErrorCode`.
    #[serde(rename = "type")]
    #[schema(format = "uri")]
    kind: String,
    /// A short summary of the problem type.
    #[schema(value_type = String)]
    title: &'a str,
    /// The HTTP status code.
    #[schema(minimum = 400, maximum = 599)]
    status: u16,
    /// What went wrong in this request.
    #[schema(value_type = String)]
    detail: &'a str,
    /// The request path.
    instance: String,
    /// `title (detail)`, for older clients.
    error: String,
    /// Whether retrying the same request may succeed.
    retryable: bool,
    /// The id the server gave the request, also sent as the `x-request-id` header. Always
    /// made by the server: a client's own `x-request-id` is logged beside it, never echoed.
    trace_id: String,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let (trace_id, instance) = REQUEST.try_with(|r| r.clone()).unwrap_or_default();
        let title = self.title();
        let body = Problem {
            kind: format!("{TYPE_BASE}{}", self.code),
            title,
            status: self.status.as_u16(),
            detail: &self.detail,
            instance,
            error: format!("{title} ({})", self.detail),
            retryable: self.retryable,
            trace_id,
        };
        let mut response = HttpResponse::build(self.status);
        response.insert_header((header::CONTENT_TYPE, "application/problem+json"));
        // The official clients (Stainless-generated) obey this header over their own status
        // rules, which would retry a 409 twice: say what `retryable` says.
        response.insert_header((
            "x-should-retry",
            if self.retryable { "true" } else { "false" },
        ));
        if let Some(allow) = self.allow {
            response.insert_header((header::ALLOW, allow));
        }
        if let Some(secs) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, secs));
        }
        response.body(serde_json::to_vec(&body).unwrap_or_default())
    }
}

impl ApiError {
    /// The answer to a failure below the HTTP layer, by what it means (`failure::Cause`).
    /// `error` is logged for the failures that are not the client's.
    fn of_cause(cause: Cause<'_>, error: &dyn std::fmt::Display) -> ApiError {
        use runledger_domain::Rejection as R;
        match cause {
            Cause::Rejected(R::NotFound) => ApiError::not_found("no run with this id"),
            Cause::Rejected(r @ R::AlreadyTerminal(_)) => ApiError::bad_request(r.to_string()),
            Cause::Rejected(r @ R::EmptyMessage) => ApiError::bad_request(r.to_string()),
            Cause::Rejected(r) => ApiError::conflict(r.to_string()),
            Cause::Unavailable => ApiError::unavailable("the run is busy; retry shortly"),
            // Queued runs start as slots free up; half a minute is a fair first wait.
            Cause::QueueFull(why) => ApiError::rate_limited(30, why),
            Cause::BadCursor(why) => ApiError::bad_request(format!("cursor: {why}")),
            Cause::Damaged => ApiError::damaged(error),
            Cause::Refused { reason, retryable } => ApiError::refused(&reason, retryable),
            Cause::OutcomeUnknown { words } => ApiError::outcome_unknown(words, error),
            Cause::StorageFailed { words } => ApiError::storage_failed(words, error),
            Cause::Internal => ApiError::internal(error),
        }
    }
}

impl From<runledger_runs::actor::Error> for ApiError {
    fn from(e: runledger_runs::actor::Error) -> ApiError {
        ApiError::of_cause(e.cause(), &e)
    }
}

impl From<runledger_runs::failure::StorageError> for ApiError {
    fn from(e: runledger_runs::failure::StorageError) -> ApiError {
        ApiError::of_cause(e.cause(), &e)
    }
}

impl From<runledger_runs::schedules::Error> for ApiError {
    fn from(e: runledger_runs::schedules::Error) -> ApiError {
        use runledger_domain::ScheduleRejection as R;
        match (&e, e.cause()) {
            (runledger_runs::schedules::Error::Rejected(R::NotFound), _) => {
                ApiError::not_found("no schedule with this id")
            }
            (runledger_runs::schedules::Error::Rejected(r), _) => ApiError::conflict(r.to_string()),
            (runledger_runs::schedules::Error::TooMany(..), _) => {
                ApiError::bad_request(e.to_string())
            }
            (_, Some(cause)) => ApiError::of_cause(cause, &e),
            (_, None) => ApiError::internal(&e),
        }
    }
}
