//! Links and seals in exports: an export verifies (`verify --export`) and imports; edited, it is
//! refused by both, naming run and event: a `Failed` turned into `Succeeded` with its link left
//! alone (the link names the event) or with every link of the run recomputed (the seal names
//! it), and a cancel's `by` moved to another key. `import --unverified` takes it all the same
//! and the imported store's `verify` says so. An export from before chains imports, unverified.

use std::path::Path;

use serde_json::{json, Value};

use super::support::{cli_on, config, last_seq, path_str, sealed_proof};
use crate::common::{cli, Server};
use runledger::format::time::hex;
use runledger::store::chain::{envelope_link, GENESIS};

fn lines(export: &str) -> Vec<Value> {
    export
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn write(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write export");
}

/// The index of run `id`'s event of type `kind` among the export's lines.
fn find(lines: &[Value], id: &str, kind: &str) -> usize {
    lines
        .iter()
        .position(|l| l["run_id"] == id && l["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} of {id} in the export"))
}

/// Recomputes the links of run `id`'s events from their content, as someone who knows the
/// rule would after an edit.
fn relink(lines: &mut [Value], id: &str) {
    let mut prev = GENESIS;
    for line in lines.iter_mut().filter(|l| l["run_id"] == id) {
        let mut bare = line.clone();
        bare.as_object_mut().expect("an object").remove("link");
        let envelope = runledger::format::events::event_from_json(&bare).expect("an event");
        prev = envelope_link(&prev, &envelope).expect("a link");
        line["link"] = json!(hex(&prev));
    }
}

/// `verify --export` and `import` of `lines` both fail naming `id` and event `seq`.
fn refused(dir: &Path, name: &str, lines: &[Value], id: &str, seq: u64) {
    let file = dir.join(format!("{name}.jsonl"));
    write(&file, lines);
    let named = format!("run {id}, event {seq}");
    let (ok, out, err) = cli(&["verify", "--export", path_str(&file)], &[]);
    assert!(!ok, "{name}: verify --export passed: {out}{err}");
    assert!(err.contains(&named), "{name}: {err}");
    let target = dir.join(format!("{name}-data"));
    let (ok, out, err) = cli(
        &["import", path_str(&file), "--data-dir", path_str(&target)],
        &[],
    );
    assert!(!ok, "{name}: import passed: {out}{err}");
    assert!(
        err.contains(&named) && err.contains("--unverified"),
        "{name}: {err}"
    );
    assert!(
        !target.exists(),
        "{name}: a refused import left {}",
        target.display()
    );
}

#[tokio::test]
async fn an_edited_export_is_refused_by_import_and_verify() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(tmp.path(), &config(tmp.path()));
    s.wait_ready().await;
    let failed = s
        .create(json!({"prompt": "x", "config": {"environment_id": "fails"}}))
        .await;
    let cancelled = s
        .create(json!({"prompt": "z", "config": {"environment_id": "slow"}}))
        .await;
    s.wait_state(&cancelled, "INPROGRESS").await;
    let (status, v) = s
        .post(
            &s.key,
            &format!("/agent/runs/{cancelled}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    s.wait_state(&failed, "FAILED").await;
    s.wait_state(&cancelled, "CANCELLED").await;
    for id in [&failed, &cancelled] {
        let seq = last_seq(&s, id).await;
        sealed_proof(&s, id, seq, 10).await;
    }
    let status = s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    assert!(status.success(), "{}", s.log_text());

    let dir = tmp.path();
    let file = dir.join("export.jsonl");
    let (ok, _, err) = cli_on(&s.data_dir, &["export", "--output", path_str(&file)]);
    assert!(ok, "{err}");
    let original = lines(&std::fs::read_to_string(&file).expect("export"));
    assert_eq!(
        original[0]["record"], "seal",
        "seals come first: {:?}",
        original[0]
    );
    assert!(original
        .iter()
        .filter(|l| l.get("record").is_none())
        .all(|l| l["link"].is_string()));
    let (ok, out, err) = cli(&["verify", "--export", path_str(&file)], &[]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("verified"), "{out}");

    // A failure turned into a success, its link left alone: the link names the event.
    let at = find(&original, &failed, "Failed");
    let seq = original[at]["seq"].as_u64().expect("seq");
    let mut edited = original.clone();
    edited[at]["type"] = json!("Succeeded");
    edited[at]["data"] = json!({"execution": edited[at]["data"]["execution"]});
    refused(dir, "succeeded", &edited, &failed, seq);
    // The same with every link of the run recomputed: the seal's leaf names the run's sealed
    // event (its last), whose link now differs from the signed one.
    relink(&mut edited, &failed);
    let sealed_seq = original
        .iter()
        .filter(|l| l["run_id"] == failed.as_str())
        .filter_map(|l| l["seq"].as_u64())
        .max()
        .expect("events");
    refused(dir, "relinked", &edited, &failed, sealed_seq);
    // A cancel moved to another key.
    let at = find(&original, &cancelled, "Cancelled");
    let seq = original[at]["seq"].as_u64().expect("seq");
    let mut moved = original.clone();
    moved[at]["data"]["by"] = json!("someone-else");
    refused(dir, "moved", &moved, &cancelled, seq);

    // --unverified imports it, and says so, then and at every verify after.
    let moved_file = dir.join("moved.jsonl");
    let target = dir.join("unverified-data");
    let (ok, _, err) = cli(
        &[
            "import",
            path_str(&moved_file),
            "--unverified",
            "--data-dir",
            path_str(&target),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(err.contains("does not verify"), "{err}");
    let (ok, out, err) = cli_on(&target, &["verify"]);
    assert!(ok, "the imported store's own chains verify: {out}{err}");
    assert!(err.contains("did not verify"), "{err}");

    // The untouched export imports, and the restored store verifies under a new key.
    let restored = dir.join("restored");
    let (ok, _, err) = cli(
        &["import", path_str(&file), "--data-dir", path_str(&restored)],
        &[],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = cli_on(&restored, &["verify"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("new instance key"), "{out}");

    // An export from before chains (no links, no seals) imports, reported as unverified.
    let old: Vec<Value> = original
        .iter()
        .filter(|l| l.get("record").is_none())
        .map(|l| {
            let mut l = l.clone();
            l.as_object_mut().expect("an object").remove("link");
            l
        })
        .collect();
    let old_file = dir.join("old.jsonl");
    write(&old_file, &old);
    let target = dir.join("old-data");
    let (ok, _, err) = cli(
        &[
            "import",
            path_str(&old_file),
            "--data-dir",
            path_str(&target),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(err.contains("unverified"), "{err}");
}
