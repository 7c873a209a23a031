//! The agent identity operations, which runledger does not offer (an agent is an API key of
//! kind `agent`): each answers `422 operation_not_supported`, reading nothing.

use actix_web::HttpResponse;

use crate::error_responses::{NotSupported, Unauthorized};
use crate::problem::ApiError;
use crate::Principal;

/// The answer to every agent identity operation.
fn no_identities() -> ApiError {
    ApiError::not_supported(
        "runledger has no agent identities: an agent acts through an API key of kind 'agent' \
         (POST /api/v1/admin/keys), and its defaults live in the server's environments",
    )
}

/// Agent identities (create, list): not offered. An agent is an API key of kind `agent`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/identities",
    tag = "agents",
    operation_id = "listAgentIdentities",
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn identities(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// Creating an agent identity: not offered (see `identities`). The body is not read.
#[utoipa::path(
    post,
    path = "/api/v1/agent/identities",
    tag = "agents",
    operation_id = "createAgentIdentity",
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn create_identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// One agent identity (get): not offered (see `identities`).
#[utoipa::path(
    get,
    path = "/api/v1/agent/identities/{uid}",
    tag = "agents",
    operation_id = "getAgentIdentity",
    params(("uid" = String, Path, description = "Any value: there are no identities.")),
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// Updating an agent identity: not offered (see `identities`). The body is not read.
#[utoipa::path(
    put,
    path = "/api/v1/agent/identities/{uid}",
    tag = "agents",
    operation_id = "updateAgentIdentity",
    params(("uid" = String, Path, description = "Any value: there are no identities.")),
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn update_identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// Deleting an agent identity: not offered (see `identities`).
#[utoipa::path(
    delete,
    path = "/api/v1/agent/identities/{uid}",
    tag = "agents",
    operation_id = "deleteAgentIdentity",
    params(("uid" = String, Path, description = "Any value: there are no identities.")),
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn delete_identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}
