//! The config file as written (SPEC §6): one struct per table, filled by serde and nothing
//! more. Parsing is strict (`deny_unknown_fields`), so a misspelt field is an error naming its
//! line instead of a setting silently ignored. Each section's module checks its table and
//! applies its defaults; nothing here checks a value or knows a default.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use runledger_domain::harness::{AgentPermissions, Harness, OnNodeFailure, RunsOn, Sandbox};

/// The whole file: every table may be left out.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    #[serde(default)]
    pub(crate) server: ServerFile,
    #[serde(default)]
    pub(crate) limits: LimitsFile,
    #[serde(default)]
    pub(crate) environments: Vec<EnvironmentFile>,
    #[serde(default)]
    pub(crate) secrets: BTreeMap<String, SecretSource>,
    #[serde(default)]
    pub(crate) prices: PricesFile,
    #[serde(default)]
    pub(crate) webhooks: Vec<WebhookFile>,
    #[serde(default)]
    pub(crate) schedules: SchedulesFile,
}

/// `[server]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerFile {
    pub(crate) bind: Option<String>,
    pub(crate) public_url: Option<String>,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) allow_non_loopback: Option<bool>,
    pub(crate) tls_cert: Option<PathBuf>,
    pub(crate) tls_key: Option<PathBuf>,
    pub(crate) cache_mb: Option<u64>,
    pub(crate) stop_grace_secs: Option<u64>,
    pub(crate) agent_user: Option<String>,
    pub(crate) agent_uids: Option<String>,
    pub(crate) disk_reserve_mb: Option<u64>,
    pub(crate) body_timeout_secs: Option<u64>,
    pub(crate) transcript_max_mb: Option<u64>,
    pub(crate) metrics_token: Option<String>,
    pub(crate) session_link_ttl_secs: Option<u64>,
    pub(crate) trusted_proxies: Option<Vec<String>>,
    pub(crate) seal_interval_secs: Option<u64>,
    pub(crate) seal_webhook: Option<String>,
    pub(crate) seal_webhook_secret: Option<String>,
    pub(crate) seal_webhook_allow_private: Option<bool>,
}

/// `[limits]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsFile {
    pub(crate) rate_limit: Option<bool>,
    pub(crate) rate_per_sec: Option<f64>,
    pub(crate) burst: Option<u32>,
    pub(crate) max_queued_per_team: Option<usize>,
    pub(crate) artifact_file_mb: Option<u64>,
    pub(crate) artifact_screenshot_mb: Option<u64>,
    pub(crate) artifact_plan_kb: Option<u64>,
    pub(crate) artifact_report_line_kb: Option<u64>,
    pub(crate) artifact_run_total_mb: Option<u64>,
    pub(crate) artifact_link_secs: Option<u64>,
}

/// One `[[environments]]` table as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnvironmentFile {
    pub(crate) id: String,
    pub(crate) harness: Harness,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    #[serde(default)]
    pub(crate) command: Vec<String>,
    #[serde(default)]
    pub(crate) setup: Vec<String>,
    pub(crate) model_id: Option<String>,
    pub(crate) max_concurrent: Option<usize>,
    pub(crate) max_runtime_secs: Option<u64>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) workspace_root: Option<PathBuf>,
    pub(crate) demo_duration_ms: Option<u64>,
    pub(crate) sandbox: Option<Sandbox>,
    pub(crate) network: Option<bool>,
    #[serde(default)]
    pub(crate) inherit_env: Vec<String>,
    #[serde(default)]
    pub(crate) secrets: Vec<String>,
    pub(crate) memory_mb: Option<u64>,
    pub(crate) pids_max: Option<u64>,
    pub(crate) cpu_percent: Option<u64>,
    #[serde(default)]
    pub(crate) repos: Vec<RepoFile>,
    pub(crate) agent_permissions: Option<AgentPermissions>,
    pub(crate) model_base_url: Option<String>,
    pub(crate) teams: Option<Vec<String>>,
    pub(crate) max_queued: Option<usize>,
    pub(crate) snapshots: Option<bool>,
    pub(crate) snapshot_max_mb: Option<u64>,
    pub(crate) changes_max_mb: Option<u64>,
    pub(crate) runs_on: Option<RunsOn>,
    pub(crate) slurm: Option<SlurmFile>,
    pub(crate) on_node_failure: Option<OnNodeFailure>,
}

/// `[environments.slurm]` as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SlurmFile {
    pub(crate) partition: Option<String>,
    pub(crate) constraint: Option<String>,
    pub(crate) account: Option<String>,
    pub(crate) qos: Option<String>,
    pub(crate) gres: Option<String>,
    #[serde(default)]
    pub(crate) extra_args: Vec<String>,
}

/// One `[[environments.repos]]` entry as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RepoFile {
    pub(crate) url: String,
    #[serde(rename = "ref")]
    pub(crate) reference: Option<String>,
    pub(crate) path: Option<PathBuf>,
}

/// Where a secret's value comes from; the file never holds the value itself.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub(crate) enum SecretSource {
    File(PathBuf),
    Env(String),
}

/// `[prices]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PricesFile {
    pub(crate) compute_per_cpu_hour: Option<f64>,
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelPricesFile>,
}

/// One `[prices.models."<id>"]` table as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelPricesFile {
    pub(crate) input_per_mtok: f64,
    pub(crate) output_per_mtok: f64,
    pub(crate) cached_input_per_mtok: Option<f64>,
}

/// One `[[webhooks]]` table as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WebhookFile {
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) secret: Option<String>,
    pub(crate) secret_file: Option<PathBuf>,
    pub(crate) events: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) allow_private: bool,
    pub(crate) teams: Option<Vec<String>>,
    pub(crate) timeout_secs: Option<u64>,
    pub(crate) retry_initial_ms: Option<u64>,
    pub(crate) max_in_flight: Option<usize>,
}

/// `[schedules]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SchedulesFile {
    /// The test mode: cron expressions may have a sixth, leading seconds field.
    pub(crate) seconds: Option<bool>,
    pub(crate) max_per_team: Option<usize>,
}
