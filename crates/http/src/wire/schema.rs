//! OpenAPI schemas of the v1 API's own inputs: the metadata of a create and the list query's
//! sort, state and metadata filters, and the tables they are built from, which `http::validate`
//! checks against too — one table serves the parser and the document.

use std::borrow::Cow;

use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

use runledger_domain::RunState;
use runledger_format::string_enum_schema;
use runledger_runs::query::{Order, SortBy};

/// Keys a create's metadata may have.
pub const MAX_METADATA_KEYS: usize = 20;
/// `metadata[key]` filters a list query may have.
pub const MAX_METADATA_FILTERS: usize = 5;

/// `sort_by` values of the list query.
pub const SORT_BY: [(&str, SortBy); 3] = [
    ("updated_at", SortBy::UpdatedAt),
    ("created_at", SortBy::CreatedAt),
    ("title", SortBy::Title),
];

/// `sort_order` values of the list query.
pub const SORT_ORDER: [(&str, Order); 2] = [("desc", Order::Desc), ("asc", Order::Asc)];

/// States of the hosted service that runledger runs never take. As `state` filters they are
/// accepted and match nothing, so a client written for the hosted service gets an empty list
/// rather than a 400.
pub const FOREIGN_STATES: [&str; 4] = ["PENDING", "CLAIMED", "BLOCKED", "ERROR"];

/// Metadata of a create request: at most 20 keys of 1–64 characters `[A-Za-z0-9._-]`, each
/// value at most 256 bytes without NUL.
pub fn metadata_request_schema() -> Schema {
    metadata_map(ObjectBuilder::new())
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(
            "Free-form labels: at most 20 keys of 1-64 characters [A-Za-z0-9._-], each value \
             at most 256 bytes without NUL.",
        ))
        .max_properties(Some(MAX_METADATA_KEYS))
        .into()
}

/// The key and value rules every metadata map shares (checked by `validate::metadata_pair`).
fn metadata_map(object: ObjectBuilder) -> ObjectBuilder {
    object
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(METADATA_KEY_PATTERN)),
        ))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(256)),
        ))
}

/// What a metadata key must match (checked by `validate::metadata_pair`).
pub const METADATA_KEY_PATTERN: &str = "^[A-Za-z0-9._-]{1,64}$";

string_enum_schema! {
    /// Sort field of a list query.
    SortBySchema as "SortBy" = SORT_BY.map(|(name, _)| name)
}

string_enum_schema! {
    /// Sort direction of a list query.
    SortOrderSchema as "SortOrder" = SORT_ORDER.map(|(name, _)| name)
}

string_enum_schema! {
    /// A `state` filter: runledger's states, and the hosted service's others, which match
    /// nothing.
    StateFilterSchema as "RunStateFilter" = RunState::ALL
        .map(RunState::as_str)
        .into_iter()
        .chain(FOREIGN_STATES)
}

/// The `metadata[key]=value` filters of a list query.
pub enum MetadataFilterSchema {}

impl utoipa::PartialSchema for MetadataFilterSchema {
    fn schema() -> RefOr<Schema> {
        metadata_map(ObjectBuilder::new().schema_type(Type::Object))
            .max_properties(Some(MAX_METADATA_FILTERS))
            .into()
    }
}

impl ToSchema for MetadataFilterSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("MetadataFilter")
    }
}
