//! The admin API: manage API keys on a running server (only admin keys may call it), so a
//! leaked key can be revoked without downtime.

use actix_web::{web, HttpResponse};

use super::openapi::{
    BadRequest, Forbidden, InternalError, NotFound, PayloadTooLarge, Unauthorized, Unavailable,
};
use super::problem::ApiError;
use super::wire::{ApiKey, ApiKeyList, CreateApiKeyRequest, CreatedApiKey};
use super::{validate, AppState, Principal};
use crate::clock::now;
use crate::store::api_keys::{KeyKind, KeyRecord};

fn require_admin(key: &KeyRecord) -> Result<(), ApiError> {
    if key.admin {
        Ok(())
    } else {
        Err(ApiError::forbidden("only admin keys may manage keys"))
    }
}

/// A key as the admin API and `runledger keys list --json` show it.
pub fn key_json(k: &KeyRecord) -> serde_json::Value {
    // A plain struct of strings and booleans always serialises.
    serde_json::to_value(ApiKey::from(k)).unwrap_or(serde_json::Value::Null)
}

/// Every API key of the instance, revoked ones included.
#[utoipa::path(
    get,
    path = "/api/v1/admin/keys",
    tag = "admin",
    operation_id = "listApiKeys",
    responses(
        (status = 200, description = "The keys, without their secrets", body = ApiKeyList),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn list(
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let keys = state.runs.store().keys().list()?;
    Ok(HttpResponse::Ok().json(ApiKeyList {
        keys: keys.iter().map(ApiKey::from).collect(),
    }))
}

/// Create an API key. Its secret is in this answer only, which is sent once the key is durable.
#[utoipa::path(
    post,
    path = "/api/v1/admin/keys",
    tag = "admin",
    operation_id = "createApiKey",
    request_body = CreateApiKeyRequest,
    responses(
        (status = 200, description = "The new key with its secret", body = CreatedApiKey,
         links(("RevokeApiKey" = (operation_id = "revokeApiKey",
                                  parameters(("key_id" = "$response.body#/id")))))),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 413, response = PayloadTooLarge),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn create(
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let request: CreateApiKeyRequest = validate::parse_json(&body)?;
    if request.name.trim().is_empty() || request.name.len() > 128 {
        return Err(ApiError::bad_request("name must be 1-128 bytes"));
    }
    let kind = match request.kind.as_deref() {
        None => KeyKind::Personal,
        Some(k) => KeyKind::parse(k)
            .ok_or_else(|| ApiError::bad_request("kind must be personal or agent"))?,
    };
    let store = state.runs.store();
    store.admit(crate::store::Writer::Client)?;
    let (record, secret) =
        store
            .keys()
            .create(&request.name, kind, request.admin.unwrap_or(false), now())?;
    store.sync().await?;
    Ok(HttpResponse::Ok().json(CreatedApiKey {
        record: ApiKey::from(&record),
        key: &secret,
    }))
}

/// Revoke an API key; it is refused from its next request on. Revoking twice keeps the first
/// `revoked_at`.
#[utoipa::path(
    post,
    path = "/api/v1/admin/keys/{key_id}/revoke",
    tag = "admin",
    operation_id = "revokeApiKey",
    params(("key_id" = String, Path, description = "The key's `id`.")),
    responses(
        (status = 200, description = "The revoked key", body = ApiKey),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn revoke(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let store = state.runs.store();
    store.admit(crate::store::Writer::Client)?;
    let record = store
        .keys()
        .revoke(&path, now())?
        .ok_or_else(|| ApiError::not_found("no key with this id"))?;
    store.sync().await?;
    Ok(HttpResponse::Ok().json(ApiKey::from(&record)))
}
