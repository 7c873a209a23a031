//! An API key as the admin API and `runledger keys list --json` show it: without its secret
//! or the secret's hash.

use serde::Serialize;
use utoipa::ToSchema;

use super::schema::KeyKindSchema;
use super::time::format_time;
use runledger_store::api_keys::Key;

/// An API key, without its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKey<'a> {
    #[schema(value_type = String)]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(value_type = KeyKindSchema)]
    pub kind: &'static str,
    /// Admin keys may call the admin endpoints.
    pub admin: bool,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Null until the key is revoked.
    #[schema(format = DateTime, required = true)]
    pub revoked_at: Option<String>,
    /// The team whose runs the key sees and creates.
    #[schema(value_type = String)]
    pub team: &'a str,
}

impl<'a> ApiKey<'a> {
    pub fn from(k: &'a Key) -> Self {
        ApiKey {
            id: &k.id,
            name: &k.name,
            kind: k.kind.as_str(),
            admin: k.admin,
            created_at: format_time(k.created_at),
            revoked_at: k.revoked_at.map(format_time),
            team: &k.team,
        }
    }
}

/// A key as JSON.
pub fn key_json(k: &Key) -> serde_json::Value {
    // A plain struct of strings and booleans always serialises.
    serde_json::to_value(ApiKey::from(k)).unwrap_or(serde_json::Value::Null)
}
