//! Latency histograms and request counters for `/metrics`, rendered in the Prometheus text
//! format. The registry is process-global, like a logger: the store, the sync thread and the
//! HTTP edge record into it without being handed a handle, and recording is a few relaxed
//! atomic adds (plus a shared read lock to find a request series).
//!
//! Series for requests are keyed by route *pattern* (`/api/v1/agent/runs/{run_id}`), method
//! and status, so their number is bounded by the routes we serve, whatever clients send.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

/// Upper bounds in seconds. From 100 µs (an in-memory answer) to 10 s (a stalled disk).
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0,
];

/// A cumulative histogram of durations.
pub struct Histogram {
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Writes the `_bucket`, `_sum` and `_count` lines of one series. `labels` is either empty
    /// or a list like `route="/x",status="200"`.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{braces} {sum:.9}");
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

/// The series of one route: (method, status) → histogram. A handful per route, so a list.
type RouteSeries = Vec<(String, u16, Arc<Histogram>)>;

/// Everything the process records.
#[derive(Default)]
pub struct Registry {
    /// By route pattern; looked up by `&str`, so recording allocates nothing.
    requests: RwLock<BTreeMap<String, RouteSeries>>,
    /// `Store::append`: encoding and inserting a command's events (not the sync).
    pub append: Histogram,
    /// One group commit: flush, fdatasync, blob fsyncs.
    pub sync: Histogram,
    /// From a writer's sync request to its acknowledgement (includes waiting for the
    /// commit in progress).
    pub sync_wait: Histogram,
    /// One batch of the projector (the index updates of the runs waiting for it).
    pub index_batch: Histogram,
    /// Acknowledged commands handed to the projector.
    pub index_submitted: AtomicU64,
    /// Rows the projector applied to the index (fewer than submitted when it coalesced).
    pub index_applied: AtomicU64,
    /// Webhook delivery attempts by subscription and outcome, and their latency by
    /// subscription. Subscriptions come from the configuration, so the series are bounded.
    webhook_attempts: RwLock<BTreeMap<(String, &'static str), u64>>,
    webhook_latency: RwLock<BTreeMap<String, Arc<Histogram>>>,
    /// Webhook deliveries owed (in the outbox, not yet ended).
    pub webhook_owed: AtomicU64,
    /// From a schedule's due time to its run being durable.
    pub schedule_lag: Histogram,
    /// Schedule firings that made their run, and that could not.
    schedule_fired: AtomicU64,
    schedule_failed: AtomicU64,
}

pub static METRICS: LazyLock<Registry> = LazyLock::new(Registry::default);

impl Registry {
    /// Counts one schedule firing: whether its run was made (`fired`) or not (`failed`).
    pub fn schedule_fired(&self, made: bool) {
        let counter = if made {
            &self.schedule_fired
        } else {
            &self.schedule_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Records one webhook delivery attempt: `outcome` is a fixed word (`delivered`,
    /// `http_error`, `refused`, …), so the series stay bounded.
    pub fn webhook_attempt(&self, subscription: &str, outcome: &'static str, took: Duration) {
        *self
            .webhook_attempts
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry((subscription.to_string(), outcome))
            .or_default() += 1;
        let found = self
            .webhook_latency
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(subscription)
            .cloned();
        let histogram = match found {
            Some(h) => h,
            None => self
                .webhook_latency
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(subscription.to_string())
                .or_default()
                .clone(),
        };
        histogram.observe(took);
    }

    /// Records one answered request.
    pub fn request(&self, route: &str, method: &str, status: u16, took: Duration) {
        let find = |series: &RouteSeries| {
            series
                .iter()
                .find(|(m, s, _)| m == method && *s == status)
                .map(|(_, _, h)| h.clone())
        };
        let found = self
            .requests
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(route)
            .and_then(find);
        let histogram = match found {
            Some(h) => h,
            None => {
                let mut requests = self.requests.write().unwrap_or_else(|p| p.into_inner());
                let series = requests.entry(route.to_string()).or_default();
                match find(series) {
                    Some(h) => h,
                    None => {
                        let h = Arc::new(Histogram::default());
                        series.push((method.to_string(), status, h.clone()));
                        series.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
                        h
                    }
                }
            }
        };
        histogram.observe(took);
    }

    /// Appends this registry's series to a Prometheus text exposition.
    pub fn render(&self, out: &mut String) {
        let name = "runledger_http_request_duration_seconds";
        family(
            out,
            name,
            "histogram",
            "HTTP requests by route pattern, method and status, with their latency.",
        );
        for (route, series) in self
            .requests
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            for (method, status, h) in series {
                let labels = format!(
                    "route=\"{}\",method=\"{}\",status=\"{status}\"",
                    escape(route),
                    escape(method)
                );
                h.render(out, name, &labels);
            }
        }
        for (name, help, h) in [
            (
                "runledger_event_append_duration_seconds",
                "Appending one command's events to the log (before the sync).",
                &self.append,
            ),
            (
                "runledger_durable_sync_duration_seconds",
                "One group commit: sled flush, fdatasync and new blob fsyncs.",
                &self.sync,
            ),
            (
                "runledger_durable_sync_wait_seconds",
                "From a writer asking for durability to the commit that covers it.",
                &self.sync_wait,
            ),
            (
                "runledger_index_batch_duration_seconds",
                "One batch of background index updates.",
                &self.index_batch,
            ),
            (
                "runledger_schedule_firing_lag_seconds",
                "From a schedule's due time to its run being durable.",
                &self.schedule_lag,
            ),
        ] {
            family(out, name, "histogram", help);
            h.render(out, name, "");
        }
        let name = "runledger_index_updates_total";
        family(
            out,
            name,
            "counter",
            "Commands whose index update was submitted, and rows applied (coalesced per run).",
        );
        for (kind, n) in [
            ("submitted", &self.index_submitted),
            ("applied", &self.index_applied),
        ] {
            let _ = writeln!(
                out,
                "{name}{{kind=\"{kind}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        let name = "runledger_schedule_firings_total";
        family(
            out,
            name,
            "counter",
            "Schedule firings by outcome: fired (the run was made) or failed.",
        );
        for (outcome, n) in [
            ("fired", &self.schedule_fired),
            ("failed", &self.schedule_failed),
        ] {
            let _ = writeln!(
                out,
                "{name}{{outcome=\"{outcome}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        self.render_webhooks(out);
    }

    fn render_webhooks(&self, out: &mut String) {
        let name = "runledger_webhook_attempts_total";
        family(
            out,
            name,
            "counter",
            "Webhook delivery attempts by subscription and outcome.",
        );
        for ((subscription, outcome), n) in self
            .webhook_attempts
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "{name}{{subscription=\"{}\",outcome=\"{outcome}\"}} {n}",
                escape(subscription)
            );
        }
        let name = "runledger_webhook_attempt_duration_seconds";
        family(
            out,
            name,
            "histogram",
            "Webhook delivery attempts by subscription, with their latency.",
        );
        for (subscription, h) in self
            .webhook_latency
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            h.render(
                out,
                name,
                &format!("subscription=\"{}\"", escape(subscription)),
            );
        }
        let name = "runledger_webhook_deliveries_owed";
        family(
            out,
            name,
            "gauge",
            "Webhook deliveries owed: written to the outbox and not yet ended.",
        );
        let _ = writeln!(out, "{name} {}", self.webhook_owed.load(Ordering::Relaxed));
    }
}

/// Writes the `# HELP` and `# TYPE` lines that open a metric family.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Escapes a label value (backslash, quote, newline), as the text format requires.
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_sum_their_observations() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(30));
        let mut out = String::new();
        h.render(&mut out, "x", "a=\"b\"");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.0001\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.005\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"10\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_count{a=\"b\"} 3\n"), "{out}");
        assert!(out.contains("x_sum{a=\"b\"} 30.003050000\n"), "{out}");
    }

    #[test]
    fn request_series_are_keyed_by_route_method_and_status() {
        let r = Registry::default();
        r.request("/a/{id}", "GET", 200, Duration::from_millis(1));
        r.request("/a/{id}", "GET", 200, Duration::from_millis(1));
        r.request("/a/{id}", "GET", 404, Duration::from_millis(1));
        let mut out = String::new();
        r.render(&mut out);
        assert!(out.contains(
            "runledger_http_request_duration_seconds_count{route=\"/a/{id}\",method=\"GET\",status=\"200\"} 2"
        ), "{out}");
        assert!(out.contains("status=\"404\"} 1"), "{out}");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn webhook_attempts_are_counted_by_subscription_and_outcome() {
        let r = Registry::default();
        r.webhook_attempt("ci", "delivered", Duration::from_millis(3));
        r.webhook_attempt("ci", "http_error", Duration::from_millis(3));
        r.webhook_attempt("ci", "http_error", Duration::from_millis(3));
        r.webhook_owed.store(4, Ordering::Relaxed);
        let mut out = String::new();
        r.render(&mut out);
        assert!(
            out.contains(
                "runledger_webhook_attempts_total{subscription=\"ci\",outcome=\"http_error\"} 2\n"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "runledger_webhook_attempt_duration_seconds_count{subscription=\"ci\"} 3\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("runledger_webhook_deliveries_owed 4\n"),
            "{out}"
        );
    }
}
