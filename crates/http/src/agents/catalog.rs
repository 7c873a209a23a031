//! The agents (skills) list and the models list: what can run here, from the environments the
//! key's team may use. They read the configuration only.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};

use crate::error_responses::{BadRequest, Unauthorized};
use crate::problem::ApiError;
use crate::wire::{ListAgentsResponse, ListModelsResponse, ModelInfo, ModelProvider};
use crate::{validate, AppState, Principal};
use runledger_domain::harness::Harness;

/// The agents (skills) that can run here: none, since environments declare no skills
/// (docs/api.md). The query parameters are validated and change nothing.
#[utoipa::path(
    get,
    path = "/api/v1/agent",
    tag = "agents",
    operation_id = "listAgents",
    params(
        ("repo" = Option<String>, Query, pattern = r"^[A-Za-z0-9-]{1,100}/(?!\.\.?$)[A-Za-z0-9._-]{1,100}$",
         description = "`owner/repo`; validated, lists nothing more."),
        ("sort_by" = Option<String>, Query, pattern = "^(name|last_run)$",
         description = "`name` or `last_run`."),
        ("refresh" = Option<bool>, Query, description = "`true` or `false`; nothing is cached."),
        ("include_malformed_skills" = Option<bool>, Query, description = "`true` or `false`."),
    ),
    responses(
        (status = 200, description = "The agents: always an empty list", body = ListAgentsResponse),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
    ),
    security(("bearerAuth" = []))
)]
pub async fn list(req: HttpRequest, _: Principal) -> Result<HttpResponse, ApiError> {
    validate::agents_query(req.query_string())?;
    Ok(HttpResponse::Ok().json(ListAgentsResponse { agents: Vec::new() }))
}

/// The provider of the models a harness runs.
fn provider(harness: Harness) -> ModelProvider {
    match harness {
        Harness::Claude => ModelProvider::Anthropic,
        Harness::Codex => ModelProvider::Openai,
        Harness::Gemini => ModelProvider::Google,
        Harness::Demo | Harness::Command => ModelProvider::Unknown,
    }
}

/// The models the environments the key's team may use declare (`model_id`), each once, in
/// order of id. An environment that leaves the model to its CLI declares none.
#[utoipa::path(
    get,
    path = "/api/v1/agent/models",
    tag = "agents",
    operation_id = "listModels",
    responses(
        (status = 200, description = "The declared models", body = ListModelsResponse),
        (status = 401, response = Unauthorized),
    ),
    security(("bearerAuth" = []))
)]
pub async fn models(
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let config = &state.config;
    // By model id: the providers and environments that declare it.
    let mut declared: BTreeMap<&str, (ModelProvider, Vec<&str>)> = BTreeMap::new();
    for env in config
        .environments
        .iter()
        .filter(|e| e.open_to(&key.team))
        .filter(|e| !e.model_id.is_empty())
    {
        let entry = declared
            .entry(&env.model_id)
            .or_insert((provider(env.harness), Vec::new()));
        // One id under two harnesses of different providers names no one provider.
        if entry.0 != provider(env.harness) {
            entry.0 = ModelProvider::Unknown;
        }
        entry.1.push(&env.id);
    }
    let default_model_id = config
        .environments
        .first()
        .filter(|e| e.open_to(&key.team))
        .map_or("", |e| e.model_id.as_str());
    Ok(HttpResponse::Ok().json(ListModelsResponse {
        default_model_id,
        models: declared
            .into_iter()
            .map(|(id, (provider, environments))| ModelInfo {
                id,
                display_name: id,
                provider,
                vision_supported: false,
                description: format!("declared by the environments {}", environments.join(", ")),
            })
            .collect(),
    }))
}
