//! The service's own probes: liveness (`/healthz`) and readiness (`/readyz`, which a store that
//! refuses writes fails). They read the state; they must not change it or need a key, since
//! load balancers and orchestrators call them without one.

use actix_web::{web, HttpResponse};

use super::error_responses;
use super::problem::ApiError;
use super::wire::{Health, HealthStatus, Ready, ReadyStatus};
use super::AppState;

/// Liveness: the process serves requests.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    operation_id = "health",
    responses((status = 200, description = "Alive", body = Health))
)]
pub(super) async fn health() -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: HealthStatus::Ok,
    })
}

/// Readiness: startup recovery (re-queueing the waiting runs) is done.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "service",
    operation_id = "ready",
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, response = error_responses::Unavailable),
    )
)]
pub(super) async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if !state.ready.load(std::sync::atomic::Ordering::Acquire) {
        return Err(ApiError::unavailable("the service is still recovering"));
    }
    // A store that cannot write takes no new work: a load balancer should send it elsewhere.
    let health = state.status.store_health();
    if let Some(reason) = health.refusal {
        return Err(ApiError {
            retryable: health.refusal_clears,
            ..ApiError::unavailable(format!("the store refuses writes: {reason}"))
        });
    }
    Ok(HttpResponse::Ok().json(Ready {
        status: ReadyStatus::Ready,
    }))
}
