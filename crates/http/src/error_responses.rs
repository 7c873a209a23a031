//! The reusable problem+json responses of the OpenAPI document
//! (`#/components/responses/<name>`): `BadRequest`, `NotFound`, … that a handler's
//! `#[utoipa::path]` names for each error status it can answer. They describe the answers
//! `problem.rs` renders; they are never constructed, and they must not name a handler (the
//! handlers name them, and `openapi.rs` names the handlers).

use utoipa::openapi::{ContentBuilder, RefOr, Response, ResponseBuilder};
use utoipa::{PartialSchema as _, ToResponse, ToSchema};

use super::problem::Problem;

/// The media type of every error answer.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Declares a reusable problem+json response (`#/components/responses/<name>`). The types are
/// never constructed; a handler's `responses(...)` names them with `response = ...`.
macro_rules! problem_response {
    ($(#[doc = $doc:literal])+ $ty:ident) => {
        $(#[doc = $doc])+
        pub enum $ty {}

        impl<'r> ToResponse<'r> for $ty {
            fn response() -> (&'r str, RefOr<Response>) {
                (stringify!($ty), problem(concat!($($doc),+).trim()))
            }
        }
    };
}

/// A problem+json response described by `description`, with the `x-request-id` header.
pub fn problem(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                    Problem::name(),
                ))))
                .build(),
        )
        .header(
            "x-request-id",
            utoipa::openapi::header::HeaderBuilder::new()
                .schema(String::schema())
                .description(Some("The request id; equals the body's `trace_id`."))
                .build(),
        )
        .into()
}

problem_response! {
    /// Invalid request: a malformed or wrongly typed body, or a value out of range
    /// (`invalid_request`).
    BadRequest
}
problem_response! {
    /// No valid API key: the `Authorization: Bearer <key>` header is missing, malformed,
    /// unknown or revoked (`authentication_required`).
    Unauthorized
}
problem_response! {
    /// The API key may not do this: only admin keys manage keys (`not_authorized`).
    Forbidden
}
problem_response! {
    /// No such resource (`resource_not_found`). Malformed ids are answered the same way.
    NotFound
}
problem_response! {
    /// The request conflicts with the resource's state (`conflict`).
    Conflict
}
problem_response! {
    /// The request body is larger than 1 MiB (`invalid_request`).
    PayloadTooLarge
}
problem_response! {
    /// An operation of the Oz API that runledger deliberately does not offer; `detail` says
    /// what it has instead (`operation_not_supported`). See docs/api.md.
    NotSupported
}
problem_response! {
    /// The service hit an unexpected error; the request may be retried (`internal_error`).
    InternalError
}
problem_response! {
    /// Temporarily unavailable; retry shortly (`resource_unavailable`).
    Unavailable
}
