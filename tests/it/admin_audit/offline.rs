//! The admin audit log on a stopped store: the acts of `runledger keys`, `teams` and `secrets`
//! recorded with channel `cli`, and the log's way through `export` and `import`, which restores
//! it with its hash chain verified and refuses an export whose admin records were edited,
//! naming the record.

use crate::common::{cli, Server};
use runledger::domain::{AdminEvent, Channel};
use runledger::store::{AdminEntry, ChainCheck, Store};

fn records(data: &std::path::Path) -> Vec<AdminEntry> {
    let store = Store::open(data, &Default::default()).expect("open");
    let all = store
        .admin_records()
        .collect::<Result<Vec<_>, _>>()
        .expect("reads");
    assert!(
        matches!(
            store.verify_admin_chain().expect("verify"),
            ChainCheck::Intact { .. }
        ),
        "the chain verifies"
    );
    all
}

#[tokio::test]
async fn offline_acts_are_recorded_and_the_log_survives_export_and_import() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(dir.path(), crate::common::CONFIG);
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 30).await;
    let data = s.data_dir.to_str().expect("utf-8").to_string();
    let offline = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--data-dir", &data]);
        let (ok, out, err) = cli(&all, &[]);
        assert!(ok, "{args:?}: {err}");
        out
    };
    offline(&["teams", "create", "qa"]);
    offline(&["keys", "create", "--name", "tester", "--team", "qa"]);
    let listed = offline(&["keys", "list", "--json"]);
    let tester = listed
        .lines()
        .find(|l| l.contains("\"tester\""))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|k| k["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no tester in {listed}"));
    offline(&["keys", "revoke", &tester]);
    offline(&["secrets", "rotate-session"]);
    offline(&["replay"]);

    let log = records(&s.data_dir);
    // First key, start, stop; then the five acts of the command line.
    assert_eq!(log.len(), 8);
    let acts: Vec<&AdminEntry> = log[3..].iter().collect();
    assert_eq!(
        acts.iter()
            .map(|e| e.record.event.kind())
            .collect::<Vec<_>>(),
        [
            "TeamCreated",
            "KeyCreated",
            "KeyRevoked",
            "SecretRotated",
            "IndexRebuilt"
        ]
    );
    for (entry, command) in acts.iter().zip([
        "teams create",
        "keys create",
        "keys revoke",
        "secrets rotate-session",
        "replay",
    ]) {
        let origin = &entry.record.origin;
        assert_eq!(origin.channel, Channel::Cli);
        assert_eq!(origin.key, None);
        assert!(
            origin
                .cause
                .as_deref()
                .is_some_and(|c| c.contains(&format!("runledger {command}"))),
            "{origin:?}"
        );
    }
    assert_eq!(
        acts[3].record.event,
        AdminEvent::SecretRotated {
            name: "session_secret".into()
        }
    );
    assert!(matches!(
        &acts[2].record.event,
        AdminEvent::KeyRevoked { key_id, already: false, .. } if *key_id == tester
    ));

    // Export, then import into a new data directory: the same records, the same links.
    let backup = dir.path().join("backup.jsonl");
    let backup_path = backup.to_str().expect("utf-8");
    offline(&["export", "--with-keys", "--output", backup_path]);
    let text = std::fs::read_to_string(&backup).expect("backup");
    assert_eq!(text.matches("\"record\":\"admin\"").count(), 8);
    assert!(text.contains("\"admin\":8"), "the end record counts them");
    let restored = dir.path().join("restored");
    let (ok, _, err) = cli(
        &[
            "import",
            backup_path,
            "--data-dir",
            restored.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(err.contains("8 admin audit records"), "{err}");
    // The records as they were, links and all.
    assert_eq!(records(&restored), log);
    // A plain export is the runs' events only.
    let plain = offline(&["export"]);
    assert!(!plain.contains("\"record\":\"admin\""), "{plain}");

    // An export with one admin record edited (the team renamed) is refused, naming it.
    let edited = text.replacen("\"name\":\"qa\"}", "\"name\":\"qb\"}", 1);
    assert_ne!(edited, text, "the team's record is in the export");
    let edited_path = dir.path().join("edited.jsonl");
    std::fs::write(&edited_path, &edited).expect("write");
    let target = dir.path().join("other");
    let (ok, _, err) = cli(
        &[
            "import",
            edited_path.to_str().expect("utf-8"),
            "--data-dir",
            target.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(!ok, "an edited admin record must be refused");
    assert!(err.contains("admin record 3"), "{err}");
    // A record left out breaks the chain too.
    let without: String = text
        .lines()
        .filter(|l| !l.contains("\"type\":\"KeyRevoked\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&edited_path, without).expect("write");
    let (ok, _, err) = cli(
        &[
            "import",
            edited_path.to_str().expect("utf-8"),
            "--data-dir",
            target.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(!ok, "a missing admin record must be refused");
    assert!(
        err.contains("admin record 6 where admin record 5 was due"),
        "{err}"
    );
}
