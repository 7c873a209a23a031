//! The admin API: manage API keys on a running server (only admin keys may call it), so a
//! leaked key can be revoked without downtime.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::problem::ApiError;
use super::wire::format_time;
use super::{validate, AppState, Principal};
use crate::actor::now;
use crate::store::keys::{KeyKind, KeyRecord};

fn require_admin(key: &KeyRecord) -> Result<(), ApiError> {
    if key.admin {
        Ok(())
    } else {
        Err(ApiError::forbidden("only admin keys may manage keys"))
    }
}

pub fn key_json(k: &KeyRecord) -> serde_json::Value {
    serde_json::json!({
        "id": k.id,
        "name": k.name,
        "kind": k.kind.as_str(),
        "admin": k.admin,
        "created_at": format_time(k.created_at),
        "revoked_at": k.revoked_at.map(format_time),
    })
}

pub async fn list(
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let keys = state.runs.store().keys().list()?;
    Ok(HttpResponse::Ok()
        .json(serde_json::json!({ "keys": keys.iter().map(key_json).collect::<Vec<_>>() })))
}

#[derive(Deserialize)]
struct CreateKey {
    name: String,
    kind: Option<String>,
    admin: Option<bool>,
}

pub async fn create(
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let request: CreateKey = validate::parse_json(&body)?;
    if request.name.trim().is_empty() || request.name.len() > 128 {
        return Err(ApiError::bad_request("name must be 1-128 bytes"));
    }
    let kind = match request.kind.as_deref() {
        None => KeyKind::Personal,
        Some(k) => KeyKind::parse(k)
            .ok_or_else(|| ApiError::bad_request("kind must be personal or agent"))?,
    };
    let store = state.runs.store();
    let (record, secret) =
        store
            .keys()
            .create(&request.name, kind, request.admin.unwrap_or(false), now())?;
    store.sync().await?;
    let mut body = key_json(&record);
    body["key"] = serde_json::json!(secret);
    Ok(HttpResponse::Ok().json(body))
}

pub async fn revoke(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let store = state.runs.store();
    let record = store
        .keys()
        .revoke(&path, now())?
        .ok_or_else(|| ApiError::not_found("no key with this id"))?;
    store.sync().await?;
    Ok(HttpResponse::Ok().json(key_json(&record)))
}
