//! The Prometheus text of `/metrics`: the gauges and counters read from the runs, the store and
//! the rate limiter at scrape time, then `runledger_base::metrics`' registry of the request and run
//! series. Who may read it is `scrape`'s decision, asked first; this module renders, and must
//! not keep series of its own (those belong in the registry).

use std::collections::BTreeMap;
use std::fmt::Write;

use actix_web::{web, HttpRequest, HttpResponse};
use runledger_base::metrics::{escape, family};
use runledger_runs::actor::{Status, StoreHealth};
use runledger_runs::query::UsageTotals;

use super::problem::{self, ApiError};
use super::ratelimit::RateLimiter;
use super::wire::usd;
use super::{scrape, AppState};

/// Prometheus text exposition of the service's gauges and counters.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    operation_id = "metrics",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String,
         content_type = "text/plain"),
        (status = 401, description = "Neither the metrics token (`server.metrics_token`) nor a live API key was sent as `Authorization: Bearer …`",
         content_type = "application/problem+json", body = problem::Problem),
        (status = 403, description = "A live API key that is not an admin's",
         content_type = "application/problem+json", body = problem::Problem),
    ),
    security(("bearerAuth" = []))
)]
pub(super) async fn metrics(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    scrape::authorize(&req, &state)?;
    let status = &state.status;
    let store = status.store_health();
    let mut out = String::new();
    runs(&mut out, status).await;
    let load = status.load();
    if let Ok(mut usage) = status.usage_by_environment().await {
        // Every configured environment has its series, at 0 until a run of it records usage;
        // runs of an environment since removed from the configuration keep theirs.
        for (env, _, _) in &load {
            usage.entry(env.clone()).or_default();
        }
        usage_series(&mut out, &usage);
    }
    load_series(&mut out, &load);
    store_series(&mut out, &store);
    rate_limited(&mut out, state.rate_limiter.as_ref());
    runledger_base::metrics::METRICS.render(&mut out);
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(out))
}

/// The live run actors, and the runs per state (left out when the index cannot count them).
async fn runs(out: &mut String, status: &Status) {
    family(
        out,
        "runledger_live_run_actors",
        "gauge",
        "Run actors alive (active runs only).",
    );
    let _ = writeln!(out, "runledger_live_run_actors {}", status.live_actors());
    if let Ok(counts) = status.count_by_state().await {
        family(out, "runledger_runs", "gauge", "Runs by state.");
        for (state, n) in counts {
            let _ = writeln!(out, "runledger_runs{{state=\"{}\"}} {n}", state.as_str());
        }
    }
}

/// The runs' usage per environment: costs, CPU time and tokens.
fn usage_series(out: &mut String, usage: &BTreeMap<String, UsageTotals>) {
    for (name, help, value) in [
        (
            "runledger_inference_cost_usd_total",
            "Inference cost of the runs' executions, per environment (US dollars).",
            (|t| usd(t.inference_nano_usd)) as fn(&UsageTotals) -> f64,
        ),
        (
            "runledger_compute_cost_usd_total",
            "Compute cost (CPU time at the configured price) of the runs' executions, per \
             environment (US dollars).",
            |t| usd(t.compute_nano_usd),
        ),
        (
            "runledger_cpu_seconds_total",
            "CPU time of the runs' executions' process trees, per environment.",
            |t| t.cpu_ms as f64 / 1000.0,
        ),
    ] {
        family(out, name, "counter", help);
        for (env, totals) in usage {
            let _ = writeln!(
                out,
                "{name}{{environment=\"{}\"}} {}",
                escape(env),
                value(totals)
            );
        }
    }
    let name = "runledger_tokens_total";
    family(
        out,
        name,
        "counter",
        "Tokens the agents' CLIs reported, per environment and direction.",
    );
    for (env, totals) in usage {
        for (direction, n) in [
            ("input", totals.input_tokens),
            ("output", totals.output_tokens),
        ] {
            let _ = writeln!(
                out,
                "{name}{{environment=\"{}\",direction=\"{direction}\"}} {n}",
                escape(env)
            );
        }
    }
}

/// The queues' load per environment: runs waiting for a slot and executions holding one.
fn load_series(out: &mut String, load: &[(String, usize, usize)]) {
    family(
        out,
        "runledger_queue_depth",
        "gauge",
        "Runs waiting for a slot, per environment.",
    );
    for (env, queued, _) in load {
        let _ = writeln!(
            out,
            "runledger_queue_depth{{environment=\"{}\"}} {queued}",
            escape(env)
        );
    }
    family(
        out,
        "runledger_running_executions",
        "gauge",
        "Executions holding a slot, per environment.",
    );
    for (env, _, running) in load {
        let _ = writeln!(
            out,
            "runledger_running_executions{{environment=\"{}\"}} {running}",
            escape(env)
        );
    }
}

/// The store's group-commit syncs, whether it accepts writes, and the writes it refused.
fn store_series(out: &mut String, store: &StoreHealth) {
    let (syncs, sync_micros) = store.syncs;
    family(
        out,
        "runledger_durable_syncs_total",
        "counter",
        "Group-commit syncs (flush, fdatasync, new blob fsyncs).",
    );
    let _ = writeln!(out, "runledger_durable_syncs_total {syncs}");
    family(
        out,
        "runledger_durable_sync_seconds_total",
        "counter",
        "Time spent in group-commit syncs.",
    );
    let _ = writeln!(
        out,
        "runledger_durable_sync_seconds_total {:.6}",
        sync_micros as f64 / 1e6
    );
    family(
        out,
        "runledger_store_writable",
        "gauge",
        "1 while the store accepts writes; 0 while it refuses them (/readyz names why).",
    );
    let _ = writeln!(
        out,
        "runledger_store_writable {}",
        u8::from(store.refusal.is_none())
    );
    family(
        out,
        "runledger_store_refused_writes_total",
        "counter",
        "Writes refused because the store could not durably write.",
    );
    let _ = writeln!(
        out,
        "runledger_store_refused_writes_total {}",
        store.refused_writes
    );
}

/// The requests the per-key rate limit refused (0 when it is off).
fn rate_limited(out: &mut String, limiter: Option<&RateLimiter>) {
    family(
        out,
        "runledger_rate_limited_total",
        "counter",
        "Requests refused with 429 by the per-key rate limit.",
    );
    let _ = writeln!(
        out,
        "runledger_rate_limited_total {}",
        limiter.map_or(0, RateLimiter::refused)
    );
}
