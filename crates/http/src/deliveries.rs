//! `GET /api/v1/agent/runs/{run_id}/deliveries` (runledger's own, beyond the Oz API): a run's
//! webhook deliveries with their recorded attempts, for the key's team only.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::access::{run_id, visible};
use super::error_responses::{InternalError, NotFound, Unauthorized};
use super::problem::ApiError;
use super::wire::format_time;
use super::{AppState, Principal};
use runledger_runs::webhooks::{Attempt, Delivery};

/// A run's webhook deliveries, in the order of the run's events.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryOut>,
}

/// One delivery: an event of the run announced to one subscription.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryOut {
    /// The `webhook-id` header: the same on every attempt, and after a restart.
    pub webhook_id: String,
    /// The `[[webhooks]]` entry's name.
    pub subscription: String,
    /// The body's `type`, e.g. `run.succeeded`.
    #[serde(rename = "type")]
    pub topic: String,
    /// The sequence number of the event that owes the delivery.
    pub seq: u64,
    /// `pending` (another attempt follows), `delivered` (2xx), `disabled` (410 Gone),
    /// `gave_up` (the retry schedule ran out, or the payload could not be made) or `dropped`.
    #[schema(example = "delivered")]
    pub state: &'static str,
    /// The attempts kept, oldest first: the first and the latest nine.
    pub attempts: Vec<AttemptOut>,
}

/// One attempt of a delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptOut {
    /// From 1.
    pub attempt: u32,
    /// When it began (RFC 3339).
    pub at: String,
    /// The receiver's HTTP status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why the attempt failed, when it did: no answer (refused address, connection, timeout)
    /// or a status other than 2xx.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From the start of the attempt to the receiver's answer (or the failure).
    pub latency_ms: u64,
    /// When the next attempt is due, if one follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<String>,
}

impl AttemptOut {
    fn from(a: &Attempt) -> AttemptOut {
        AttemptOut {
            attempt: a.attempt,
            at: format_time(a.at),
            status: a.status,
            error: a.error.clone(),
            latency_ms: a.latency_ms,
            next_retry_at: a.next_retry_at.map(format_time),
        }
    }
}

impl DeliveryOut {
    fn from(d: &Delivery) -> DeliveryOut {
        let state = match d.attempts.last().map(|a| a.ending) {
            Some(runledger_runs::webhooks::Ending::Retrying) | None => "pending",
            Some(ending) => ending.as_str(),
        };
        DeliveryOut {
            webhook_id: d.webhook_id.clone(),
            subscription: d.subscription.clone(),
            topic: d.topic.map_or("unknown", |t| t.as_str()).to_string(),
            seq: d.seq,
            state,
            attempts: d.attempts.iter().map(AttemptOut::from).collect(),
        }
    }
}

/// A run's webhook deliveries with their attempts (runledger's own endpoint). A delivery is
/// listed from its first attempt on.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/deliveries",
    tag = "runs",
    operation_id = "listRunDeliveries",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's webhook deliveries", body = DeliveryList),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn deliveries(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    visible(&state, &key, id)?;
    let deliveries = state
        .deliveries
        .of_run(id)
        .map_err(|e| ApiError::internal(&e))?;
    Ok(HttpResponse::Ok().json(DeliveryList {
        deliveries: deliveries.iter().map(DeliveryOut::from).collect(),
    }))
}
