//! The bundle tests' fixture: a server whose command agent writes a few hundred KB of output
//! and reports a file artifact, a run made with two attachments and a follow-up, the server
//! stopped (its final seal covers the run) and the run exported; and a small reader and writer
//! of the bundle's framing, so a test can edit a section and recompute the manifest as an
//! attacker would.

use crate::common;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use common::{cli, script, Server};
use serde_json::{json, Value};
use sha2::Digest as _;

pub(super) fn config(dir: &Path) -> String {
    let agent = dir.join("agent.sh");
    script(
        &agent,
        r#"set -e
echo "execution $RUNLEDGER_EXECUTION begins"
head -c 200000 /dev/urandom | base64
head -c 1500000 /dev/urandom > "data-$RUNLEDGER_EXECUTION.bin"
echo "{\"type\":\"file\",\"path\":\"data-$RUNLEDGER_EXECUTION.bin\",\"description\":\"the data\"}" >> "$RUNLEDGER_REPORT"
echo "execution $RUNLEDGER_EXECUTION ends""#,
    );
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n\
         [limits]\nartifact_file_mb = 4\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        agent.display()
    )
}

/// A source store holding one finished run, its server stopped.
pub(super) struct Source {
    pub(super) dir: tempfile::TempDir,
    pub(super) id: String,
    /// What the source server answered while it ran.
    pub(super) run: Value,
    pub(super) events: Vec<Value>,
    pub(super) transcript: String,
    pub(super) artifact: Vec<u8>,
}

impl Source {
    pub(super) fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub(super) fn config_path(&self) -> PathBuf {
        self.dir.path().join("runledger.toml")
    }

    /// `runledger export --run` of this run to `file`: (success, stderr).
    pub(super) fn export(&self, file: &Path) -> (bool, String) {
        let (ok, _, err) = cli(
            &[
                "export",
                "--run",
                &self.id,
                "--output",
                path_str(file),
                "--config",
                path_str(&self.config_path()),
                "--data-dir",
                path_str(&self.data_dir()),
            ],
            &[],
        );
        (ok, err)
    }
}

pub(super) fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

pub(super) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Starts a server, makes the run (two attachments, a follow-up), reads what it serves, and
/// stops the server cleanly.
pub(super) async fn source() -> Source {
    let dir = common::agent_visible_dir();
    let mut s = Server::start_in(dir.path(), &config(dir.path()));
    s.wait_ready().await;
    let big: Vec<u8> = (0..600_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let id = s
        .create(json!({
            "prompt": "make the data",
            "title": "bundle me",
            "config": {"environment_id": "cmd"},
            "attachments": [
                {"file_name": "data.bin", "mime_type": "application/octet-stream", "data": b64(&big)},
                {"file_name": "notes é.md", "mime_type": "text/markdown; charset=utf-8",
                 "data": b64("# Notes ✓\n".as_bytes())},
            ],
        }))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (status, v) = s.followup(&id, json!({"message": "again"})).await;
    assert_eq!(status, 200, "{v}");
    let run = s
        .wait_run(&id, "done twice", |v| {
            v["state"] == "SUCCEEDED" && v["artifacts"].as_array().is_some_and(|a| a.len() == 2)
        })
        .await;
    let events = s.events(&id).await;
    let transcript = s.transcript_text(&id).await;
    assert!(transcript.len() > 400_000, "{}", transcript.len());
    let artifact = download_artifact(&s, &s.key, &run).await;
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    Source {
        dir,
        id,
        run,
        events,
        transcript,
        artifact,
    }
}

/// The bytes of the run's first artifact, through its download link.
pub(super) async fn download_artifact(s: &Server, key: &str, run: &Value) -> Vec<u8> {
    let uid = run["artifacts"][0]["data"]["artifact_uid"]
        .as_str()
        .expect("artifact_uid");
    let (status, v) = s.get(key, &format!("/agent/artifacts/{uid}")).await;
    assert_eq!(status, 200, "{v}");
    let url = v["data"]["download_url"].as_str().expect("download_url");
    let r = s.client.get(url).send().await.expect("download");
    assert_eq!(r.status(), 200);
    r.bytes().await.expect("bytes").to_vec()
}

/// A target store: a server started once (its admin key kept) and stopped.
pub(super) async fn target() -> (tempfile::TempDir, String) {
    let dir = common::agent_visible_dir();
    let mut s = Server::start_in(dir.path(), &config(dir.path()));
    s.wait_ready().await;
    let key = s.key.clone();
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    (dir, key)
}

/// `runledger import --run FILE` into `dir`'s store: (success, stderr).
pub(super) fn import(dir: &Path, file: &Path, extra: &[&str]) -> (bool, String) {
    let data = dir.join("data");
    let config = dir.join("runledger.toml");
    let mut args = vec![
        "import",
        "--run",
        path_str(file),
        "--config",
        path_str(&config),
        "--data-dir",
        path_str(&data),
    ];
    args.extend_from_slice(extra);
    let (ok, _, err) = cli(&args, &[]);
    (ok, err)
}

/// A bundle taken apart: its header, its manifest and its sections in order.
pub(super) struct Parts {
    pub(super) header: Vec<u8>,
    pub(super) manifest: Value,
    pub(super) sections: Vec<(String, Vec<u8>)>,
}

fn line<'a>(bytes: &'a [u8], at: &mut usize) -> &'a [u8] {
    let end = bytes[*at..]
        .iter()
        .position(|&b| b == b'\n')
        .expect("a line")
        + *at;
    let line = &bytes[*at..end];
    *at = end + 1;
    line
}

pub(super) fn parse(bytes: &[u8]) -> Parts {
    let mut at = 0;
    let header = line(bytes, &mut at).to_vec();
    let manifest: Value = serde_json::from_slice(line(bytes, &mut at)).expect("manifest");
    let mut sections = Vec::new();
    while at < bytes.len() {
        let head = String::from_utf8(line(bytes, &mut at).to_vec()).expect("utf-8");
        let mut words = head.split(' ');
        assert_eq!(words.next(), Some("section"), "{head}");
        let name = words.next().expect("name").to_string();
        let size: usize = words.next().expect("size").parse().expect("size");
        sections.push((name, bytes[at..at + size].to_vec()));
        at += size + 1;
    }
    Parts {
        header,
        manifest,
        sections,
    }
}

/// The bundle of `parts`, its manifest written afresh from the sections (what an attacker who
/// edits a section does).
pub(super) fn assemble(parts: &Parts) -> Vec<u8> {
    assemble_with(parts, |_| {})
}

/// `assemble`, with `edit` applied to the recomputed manifest (the sections as they are).
pub(super) fn assemble_with(parts: &Parts, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut manifest = parts.manifest.clone();
    manifest["sections"] = parts
        .sections
        .iter()
        .map(|(name, bytes)| {
            json!({"name": name, "size": bytes.len(), "sha256": hex(&sha2::Sha256::digest(bytes))})
        })
        .collect();
    edit(&mut manifest);
    let mut out = parts.header.clone();
    out.push(b'\n');
    out.extend_from_slice(manifest.to_string().as_bytes());
    out.push(b'\n');
    for (name, bytes) in &parts.sections {
        out.extend_from_slice(format!("section {name} {}\n", bytes.len()).as_bytes());
        out.extend_from_slice(bytes);
        out.push(b'\n');
    }
    out
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The section named `name`.
pub(super) fn section<'a>(parts: &'a mut Parts, name: &str) -> &'a mut Vec<u8> {
    &mut parts
        .sections
        .iter_mut()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no section {name}"))
        .1
}
