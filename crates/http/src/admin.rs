//! The admin API: manage API keys on a running server (only admin keys may call it), so a
//! leaked key can be revoked without downtime. Each act is recorded in the admin audit log with
//! the caller's origin (`origin::of`, as every run command's).

use actix_web::{web, HttpRequest, HttpResponse};

use super::error_responses::{
    BadRequest, Conflict, Forbidden, InternalError, NotFound, PayloadTooLarge, Unauthorized,
    Unavailable,
};
use super::problem::ApiError;
use super::wire::{
    ApiKey, ApiKeyList, CreateApiKeyRequest, CreateTeamRequest, CreatedApiKey, Team, TeamList,
};
use super::{validate, AppState, Principal};
use runledger_domain::{valid_team_name, DEFAULT_TEAM, TEAM_NAME_RULE};
use runledger_runs::api_keys::{Key, KeyKind};

fn require_admin(key: &Key) -> Result<(), ApiError> {
    if key.admin {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "only admin keys may manage keys and teams",
        ))
    }
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
    let keys = state.keys.list()?;
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
    req: HttpRequest,
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
    let team = request.team.as_deref().unwrap_or(DEFAULT_TEAM);
    if !valid_team_name(team) {
        return Err(ApiError::bad_request(format!(
            "a team name is {TEAM_NAME_RULE}"
        )));
    }
    if !state.keys.team_exists(team)? {
        return Err(ApiError::bad_request(format!(
            "there is no team {team:?}: create it first (POST /api/v1/admin/teams, or \
             `runledger teams create {team}`)"
        )));
    }
    let (record, secret) = state
        .keys
        .create(
            &request.name,
            kind,
            request.admin.unwrap_or(false),
            team,
            super::origin::of(&req, &key, &state.config.trusted_proxies),
        )
        .await?;
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
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let record = state
        .keys
        .revoke(
            &path,
            super::origin::of(&req, &key, &state.config.trusted_proxies),
        )
        .await?
        .ok_or_else(|| ApiError::not_found("no key with this id"))?;
    Ok(HttpResponse::Ok().json(ApiKey::from(&record)))
}

/// Every team of the instance, `default` first.
#[utoipa::path(
    get,
    path = "/api/v1/admin/teams",
    tag = "admin",
    operation_id = "listTeams",
    responses(
        (status = 200, description = "The teams", body = TeamList),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn teams(
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let teams = state.keys.teams()?;
    Ok(HttpResponse::Ok().json(TeamList {
        teams: teams.iter().map(|(n, at)| Team::from(n, *at)).collect(),
    }))
}

/// Create a team; keys are then created in it (`team` of `POST /api/v1/admin/keys`). Creating
/// a team that exists is a 409.
#[utoipa::path(
    post,
    path = "/api/v1/admin/teams",
    tag = "admin",
    operation_id = "createTeam",
    request_body = CreateTeamRequest,
    responses(
        (status = 201, description = "The new team", body = Team),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn create_team(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    require_admin(&key)?;
    let request: CreateTeamRequest = validate::parse_json(&body)?;
    if !valid_team_name(&request.name) {
        return Err(ApiError::bad_request(format!(
            "a team name is {TEAM_NAME_RULE}"
        )));
    }
    if !state
        .keys
        .create_team(
            &request.name,
            super::origin::of(&req, &key, &state.config.trusted_proxies),
        )
        .await?
    {
        return Err(ApiError::conflict(format!(
            "team {:?} exists already",
            request.name
        )));
    }
    let teams = state.keys.teams()?;
    let at = teams
        .iter()
        .find(|(n, _)| *n == request.name)
        .and_then(|(_, at)| *at);
    Ok(HttpResponse::Created().json(Team::from(&request.name, at)))
}
