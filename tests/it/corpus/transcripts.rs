//! The real agent CLIs' recorded output (`tests/fixtures/transcripts/<cli>-<case>/`: `stdout`,
//! `stderr` and `rc` as the CLI wrote them in the agent-CLI suite, `tests/models/`), read again
//! by the preset observers: each must give the outcome, usage figures and session id recorded
//! in `expected.json`. `RUNLEDGER_WRITE_GOLDEN=1` records `expected.json` for a case that has
//! none; an existing one is never rewritten.

use std::path::PathBuf;

use serde_json::{json, Value};

use runledger::domain::harness::Harness;
use runledger::exec::observe::Observer;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts")
}

/// What the observer of `harness` makes of one case's recorded output.
fn observed(harness: Harness, case: &std::path::Path) -> Value {
    let read = |name: &str| std::fs::read_to_string(case.join(name)).unwrap_or_default();
    let mut observer = Observer::new(harness);
    for line in read("stdout").lines() {
        observer.stdout_line(line);
    }
    for line in read("stderr").lines() {
        observer.stderr_line(line);
    }
    let code: i32 = read("rc").trim().parse().expect("rc");
    let verdict = match observer.verdict(Some(code), &format!("exit code {code}")) {
        Ok(()) => json!({"ok": true}),
        Err(s) => json!({
            "ok": false,
            "message": s.message,
            "error_code": s.error_code,
            "retryable": s.retryable,
        }),
    };
    let u = observer.usage();
    json!({
        "session": observer.session(),
        "usage": {
            "turns": u.turns,
            "input_tokens": u.input_tokens,
            "cached_input_tokens": u.cached_input_tokens,
            "output_tokens": u.output_tokens,
            "cost_usd": u.cost_usd,
            "model": u.model,
        },
        "verdict": verdict,
    })
}

#[test]
fn observers_read_the_recorded_output_of_the_real_clis_as_recorded() {
    let write = std::env::var("RUNLEDGER_WRITE_GOLDEN").is_ok();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/fixtures/transcripts")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    let mut seen = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let cli = name.split('-').next().unwrap_or_default();
        let harness = match cli {
            "claude" => Harness::Claude,
            "codex" => Harness::Codex,
            "gemini" => Harness::Gemini,
            other => panic!("{name}: no preset {other}"),
        };
        seen.insert(cli.to_string());
        let got = observed(harness, case);
        let expected_path = case.join("expected.json");
        if write && !expected_path.exists() {
            let text = serde_json::to_string_pretty(&got).expect("json");
            std::fs::write(&expected_path, format!("{text}\n")).expect("write");
        }
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(&expected_path).expect("expected.json"))
                .expect("expected JSON");
        let mut differences = Vec::new();
        runledger::cli::replay_check::compare_json("", &expected, &got, &mut differences);
        for d in differences {
            failures.push(format!(
                "{name}: {}: recorded {}, now {}",
                d.field, d.stored, d.rebuilt
            ));
        }
    }
    assert_eq!(
        seen,
        ["claude", "codex", "gemini"].map(String::from).into(),
        "recorded output of every preset's CLI"
    );
    assert!(
        failures.is_empty(),
        "an observer reads the real CLIs' recorded output differently (outcome, usage or \
         session id; see docs/debugging.md):\n{}",
        failures.join("\n")
    );
}
