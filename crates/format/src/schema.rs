//! OpenAPI schemas of string enums: types never constructed that lend `#[schema(value_type =
//! ...)]` a schema listing the values the service sends or accepts, taken from the code that
//! produces or parses them.

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use runledger_domain::{FollowupMode, RunState, SourceType};
use runledger_store::api_keys::KeyKind;

/// A string schema listing `values`.
pub fn string_enum(description: &str, values: impl IntoIterator<Item = &'static str>) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(values))
        .into()
}

/// Declares a type that is never constructed: it only lends a string-enum schema to
/// `#[schema(value_type = ...)]`. The values come from the code that produces or parses them
/// (a domain enum's `ALL` and `as_str`, or a parser's table), so the document cannot list a
/// value the service never sends or refuses.
#[macro_export]
macro_rules! string_enum_schema {
    ($(#[doc = $doc:literal])+ $ty:ident as $name:literal = $values:expr) => {
        $(#[doc = $doc])+
        pub enum $ty {}

        impl utoipa::PartialSchema for $ty {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::schema::string_enum(concat!($($doc),+).trim(), $values).into()
            }
        }

        impl utoipa::ToSchema for $ty {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed($name)
            }
        }
    };
}

string_enum_schema! {
    /// State of a run. runledger's runs take only these states of the OpenAPI `RunState`.
    RunStateSchema as "RunState" = RunState::ALL.map(RunState::as_str)
}

string_enum_schema! {
    /// Source that created the run (OpenAPI `RunSourceType`).
    SourceTypeSchema as "RunSourceType" = SourceType::ALL.map(SourceType::as_str)
}

string_enum_schema! {
    /// How the agent should treat a follow-up message.
    FollowupModeSchema as "FollowupMode" = FollowupMode::ALL.map(FollowupMode::as_str)
}

string_enum_schema! {
    /// Kind of an API key: `personal` keys attribute runs to their user, `agent` keys to a
    /// service account.
    KeyKindSchema as "ApiKeyKind" = KeyKind::ALL.map(KeyKind::as_str)
}

/// The OpenAPI `PlatformErrorCode` values. runledger's failures use `environment_setup_failed`
/// and `internal_error`; its problem responses use the codes in `http/problem.rs`.
pub const PLATFORM_ERROR_CODES: [&str; 16] = [
    "insufficient_credits",
    "feature_not_available",
    "external_authentication_required",
    "not_authorized",
    "invalid_request",
    "resource_not_found",
    "budget_exceeded",
    "integration_disabled",
    "integration_not_configured",
    "operation_not_supported",
    "environment_setup_failed",
    "content_policy_violation",
    "conflict",
    "authentication_required",
    "resource_unavailable",
    "internal_error",
];

string_enum_schema! {
    /// Machine-readable error code (OpenAPI `PlatformErrorCode`).
    PlatformErrorCodeSchema as "PlatformErrorCode" = PLATFORM_ERROR_CODES
}
