//! `request_usage` with the real binary: a `command` agent that burns CPU gets a compute cost
//! only while a compute price is configured (and a later price never rewrites an earlier
//! run's), presets' fake CLIs report tokens and costs the way the real ones do, absurd reports
//! poison neither the wire nor the totals, and `/metrics` keeps the totals per environment
//! across a restart.

use crate::common;

use common::{script, Server};
use serde_json::{json, Value};

const PRICES: &str = "[prices]\ncompute_per_cpu_hour = 360\n\n\
    [prices.models.\"priced-model\"]\ninput_per_mtok = 2\noutput_per_mtok = 10\n\
    cached_input_per_mtok = 1\n";

/// Whether this host lets the server account executions' CPU time (a cgroup it can create:
/// root, or a delegated subtree). Where it cannot, there is no compute cost to test.
fn cpu_accounted(s: &Server) -> bool {
    !s.log_text()
        .contains("executions' CPU time cannot be measured")
}

fn config(dir: &std::path::Path, prices: &str) -> String {
    // About a CPU second of shell arithmetic, in a child process and a grandchild that is not
    // waited for by the agent, so only a whole-tree measure sees it all.
    let burn = dir.join("burn");
    script(
        &burn,
        "spin() { i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; }\n\
         (spin &) ; spin; sleep 0.3\n",
    );
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n{prices}\n\
         [[environments]]\nid = \"burn\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        burn.display()
    )
}

fn usage_events(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "UsageRecorded")
        .collect()
}

fn metric(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test]
async fn compute_cost_needs_a_price_and_a_later_price_does_not_rewrite_history() {
    let dir = common::agent_visible_dir();
    let mut s = Server::start_in(dir.path(), &config(dir.path(), ""));
    s.wait_ready().await;
    if !cpu_accounted(&s) {
        eprintln!("skipped: this host does not let the server account CPU time");
        return;
    }
    let unpriced = s
        .create(json!({"prompt": "burn", "config": {"environment_id": "burn"}}))
        .await;
    let run = s.wait_state(&unpriced, "SUCCEEDED").await;
    // Measured, but without a price there is no cost to tell: nothing is sent.
    assert!(run.get("request_usage").is_none(), "{run}");
    let events = s.events(&unpriced).await;
    let recorded = usage_events(&events);
    assert_eq!(recorded.len(), 1, "{events:?}");
    let cpu_ms = recorded[0]["data"]["cpu_ms"].as_u64().expect("cpu_ms");
    assert!(
        cpu_ms >= 200,
        "the tree's CPU time, children included: {cpu_ms} ms"
    );
    assert!(recorded[0]["data"].get("compute_cost_nano_usd").is_none());
    // Recorded before the end, so it is durable with it.
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Created",
            "Started",
            "Provenance",
            "Changes",
            "UsageRecorded",
            "Succeeded"
        ],
        "{events:?}"
    );

    let key = s.key.clone();
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    let mut s = Server::start_in(dir.path(), &config(dir.path(), PRICES));
    s.key = key.clone();
    s.wait_ready().await;
    let priced = s
        .create(json!({"prompt": "burn", "config": {"environment_id": "burn"}}))
        .await;
    let run = s.wait_state(&priced, "SUCCEEDED").await;
    // $0.10 per CPU second.
    let compute = run["request_usage"]["compute_cost"]
        .as_f64()
        .expect("compute_cost");
    assert!((0.02..6.0).contains(&compute), "{run}");
    assert!(
        run["request_usage"].get("inference_cost").is_none(),
        "{run}"
    );
    let listed = s.get(&key, "/agent/runs?limit=10").await.1;
    let from_list = listed["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|r| r["run_id"] == priced.as_str()))
        .expect("listed")
        .clone();
    assert_eq!(from_list["request_usage"], run["request_usage"]);
    let earlier = s.run(&unpriced).await;
    assert!(
        earlier.get("request_usage").is_none(),
        "the price configured later does not apply to a recorded execution: {earlier}"
    );

    let metrics = s.metrics().await;
    let cost = metric(
        &metrics,
        "runledger_compute_cost_usd_total{environment=\"burn\"}",
    )
    .expect("compute cost series");
    assert!((cost - compute).abs() < 1e-6, "{cost} vs {compute}");
    let cpu = metric(
        &metrics,
        "runledger_cpu_seconds_total{environment=\"burn\"}",
    )
    .expect("cpu series");
    assert!(cpu >= compute * 10.0, "both runs' CPU time: {cpu}");
    // The totals survive a restart (saved at the clean stop) and a crash (summed again).
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    let mut s = Server::start_in(dir.path(), &config(dir.path(), PRICES));
    // /metrics answers an admin key (or the metrics token) only.
    s.key = key.clone();
    s.wait_ready().await;
    assert_eq!(
        metric(
            &s.metrics().await,
            "runledger_compute_cost_usd_total{environment=\"burn\"}"
        ),
        Some(cost)
    );
    s.kill();
    let mut s = Server::start_in(dir.path(), &config(dir.path(), PRICES));
    s.key = key;
    s.wait_ready().await;
    let metrics = s.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "runledger_compute_cost_usd_total{environment=\"burn\"}"
        ),
        Some(cost)
    );
    assert_eq!(
        metric(
            &metrics,
            "runledger_cpu_seconds_total{environment=\"burn\"}"
        ),
        Some(cpu)
    );
}

/// Fake CLIs that print their usage lines as the real ones do (and, for the hostile ones,
/// as no real one would).
/// A server whose `claude`, `codex`, `gemini` and `hostile` environments run fake CLIs that
/// report usage: Claude Code its own cost, Codex tokens only (two turns), and Gemini CLI and a
/// hostile Claude Code absurd figures.
async fn usage_server(dir: &tempfile::TempDir) -> Server {
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let lines = |out: &[&str]| {
        out.iter()
            .map(|l| format!("echo '{l}'\n"))
            .collect::<String>()
    };
    // Claude Code: its own cost wins over any price.
    script(
        &bin.join("claude"),
        &lines(&[
            r#"{"type":"system","subtype":"init","session_id":"s-1","model":"priced-model"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s-1","total_cost_usd":0.0123,"usage":{"input_tokens":100,"cache_read_input_tokens":50,"output_tokens":20}}"#,
        ]),
    );
    // Codex: tokens only, priced by the run's model (two turns add up).
    script(
        &bin.join("codex"),
        &lines(&[
            r#"{"type":"thread.started","thread_id":"t-1"}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":600000,"cached_input_tokens":200000,"output_tokens":50000}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":400000,"cached_input_tokens":0,"output_tokens":50000}}"#,
        ]),
    );
    // Gemini CLI, hostile: negative and absurd counts, then a cost nobody asked for.
    script(
        &bin.join("gemini"),
        &lines(&[
            r#"{"type":"init","session_id":"g-1","model":"priced-model"}"#,
            r#"{"type":"result","status":"success","stats":{"input_tokens":-5,"output_tokens":1e300,"cached":"x"}}"#,
        ]),
    );
    let hostile_claude = bin.join("hostile-claude");
    script(
        &hostile_claude,
        &lines(&[
            r#"{"type":"system","subtype":"init","session_id":"s-2","model":"unpriced"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s-2","total_cost_usd":-1e308,"usage":{"input_tokens":99999999999999999999,"output_tokens":1}}"#,
        ]),
    );
    // Agents get the environment's PATH, never the server's.
    let path = format!(
        "env = {{ PATH = \"{}:/usr/local/bin:/usr/bin:/bin\" }}\n",
        bin.display()
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n{PRICES}\n\
         [[environments]]\nid = \"claude\"\nharness = \"claude\"\n{path}\n\
         [[environments]]\nid = \"codex\"\nharness = \"codex\"\nmodel_id = \"priced-model\"\n{path}\n\
         [[environments]]\nid = \"gemini\"\nharness = \"gemini\"\n{path}\n\
         [[environments]]\nid = \"hostile\"\nharness = \"claude\"\ncommand = [\"{}\"]\n",
        hostile_claude.display()
    );
    let s = Server::start_with(dir.path(), &config, &[]);
    s.wait_ready().await;
    s
}

/// Creates a run in each of `environments` and waits for all to succeed: `(ids, runs)`.
async fn run_in(s: &Server, environments: &[&str]) -> (Vec<String>, Vec<Value>) {
    let mut ids = Vec::new();
    for env in environments {
        ids.push(
            s.create(json!({"prompt": "go", "config": {"environment_id": env}}))
                .await,
        );
    }
    let mut runs = Vec::new();
    for id in &ids {
        runs.push(s.wait_state(id, "SUCCEEDED").await);
    }
    (ids, runs)
}

fn inference(run: &Value) -> Option<f64> {
    run["request_usage"]["inference_cost"].as_f64()
}

fn inference_total(metrics: &str, env: &str) -> Option<f64> {
    metric(
        metrics,
        &format!("runledger_inference_cost_usd_total{{environment=\"{env}\"}}"),
    )
}

#[tokio::test]
async fn claude_code_reports_its_own_cost_which_wins_over_any_price() {
    let dir = common::agent_visible_dir();
    let s = usage_server(&dir).await;
    let (_, runs) = run_in(&s, &["claude"]).await;
    assert_eq!(inference(&runs[0]), Some(0.0123), "{}", runs[0]);
    let metrics = s.metrics().await;
    assert_eq!(
        inference_total(&metrics, "claude"),
        Some(0.0123),
        "{metrics}"
    );
}

#[tokio::test]
async fn codex_reports_tokens_priced_by_the_runs_model() {
    let dir = common::agent_visible_dir();
    let s = usage_server(&dir).await;
    let (ids, runs) = run_in(&s, &["codex"]).await;
    // 800k uncached × $2 + 200k cached × $1 + 100k out × $10, per million.
    let codex = inference(&runs[0]).expect("priced");
    assert!((codex - 2.8).abs() < 1e-9, "{}", runs[0]);
    let recorded = s.events(&ids[0]).await;
    let data = &usage_events(&recorded)[0]["data"];
    assert_eq!(
        data["tokens"],
        json!({"input": 1_000_000, "cached_input": 200_000, "output": 100_000})
    );
    assert_eq!(
        data["inference_cost"],
        json!({"nano_usd": 2_800_000_000u64, "source": "prices"})
    );
    let metrics = s.metrics().await;
    assert_eq!(inference_total(&metrics, "codex"), Some(2.8));
    assert_eq!(
        metric(
            &metrics,
            "runledger_tokens_total{environment=\"codex\",direction=\"input\"}"
        ),
        Some(1_000_000.0)
    );
}

#[tokio::test]
async fn absurd_usage_reports_are_ignored() {
    let dir = common::agent_visible_dir();
    let s = usage_server(&dir).await;
    let (ids, runs) = run_in(&s, &["gemini", "hostile"]).await;
    for run in &runs {
        assert!(
            inference(run).is_none(),
            "an absurd report is ignored, not sent: {run}"
        );
        if let Some(u) = run.get("request_usage") {
            for v in u.as_object().into_iter().flat_map(|o| o.values()) {
                let v = v.as_f64().expect("a number");
                assert!(v.is_finite() && v >= 0.0, "{run}");
            }
        }
    }
    for id in &ids {
        for e in usage_events(&s.events(id).await) {
            assert!(e["data"].get("tokens").is_none(), "{e}");
            assert!(e["data"].get("inference_cost").is_none(), "{e}");
        }
    }
    let metrics = s.metrics().await;
    assert_eq!(inference_total(&metrics, "gemini"), Some(0.0));
    assert_eq!(inference_total(&metrics, "hostile"), Some(0.0));
    assert_eq!(
        metric(
            &metrics,
            "runledger_tokens_total{environment=\"hostile\",direction=\"input\"}"
        ),
        Some(0.0)
    );
}
