//! `runledger audit` against a running server: a table by default, the API's page with
//! `--json`, its filters passed through, and the server's refusal as an exit code.

use super::world;
use crate::common::{self, Server};

#[tokio::test]
async fn runledger_audit_lists_filters_and_prints_json() {
    let s = Server::start();
    let w = world(&s).await;
    let env = [
        ("RUNLEDGER_SERVER", s.base.as_str()),
        ("RUNLEDGER_API_KEY", w.alice.secret.as_str()),
        ("XDG_CONFIG_HOME", "/nonexistent"),
    ];
    let (ok, out, err) = common::cli(&["audit", "--type", "Cancelled", "--json"], &env);
    assert!(ok, "{err}");
    let page: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let events = page["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{page}");
    assert_eq!(events[0]["run_id"], w.a_cancelled.as_str());

    // The table (tab-separated off a terminal): at, type, run, seq, actor, team.
    let (ok, out, err) = common::cli(&["audit", "events", "--run", &w.a_cancelled], &env);
    assert!(ok, "{err}");
    let cancel_line = out
        .lines()
        .find(|l| l.contains("\tCancelled\t"))
        .unwrap_or_else(|| panic!("no Cancelled line in {out}"));
    let cells: Vec<&str> = cancel_line.split('\t').collect();
    assert_eq!(cells[2], w.a_cancelled);
    assert!(cells[4].contains(&w.admin.id), "the actor: {cancel_line}");
    assert_eq!(cells[5], "default");
    let (ok, out, err) = common::cli(
        &[
            "audit",
            "--actor",
            &w.alice.id,
            "--since",
            "1h",
            "--limit",
            "1",
        ],
        &env,
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(err.contains("more: --cursor "), "{err}");

    // Another team's run: refused, with the refusal's exit code (EX_DATAERR).
    let out = std::process::Command::new(common::BIN)
        .args(["audit", "--run", &w.b_cancelled])
        .envs(env)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(65), "{out:?}");
}
