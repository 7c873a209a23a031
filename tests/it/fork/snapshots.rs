//! The snapshot each execution leaves: what it holds (workspace, home, session id), what it
//! leaves out, its bound, and `snapshots = false`.

use super::support::*;
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// Writes `state-N` in its workspace and `$HOME/note-N`, for execution N.
const WRITER: &str = r#"echo "execution $RUNLEDGER_EXECUTION" > "state-$RUNLEDGER_EXECUTION"
echo "home $RUNLEDGER_EXECUTION" > "$HOME/note-$RUNLEDGER_EXECUTION"
echo "wrote $RUNLEDGER_EXECUTION followup=$RUNLEDGER_FOLLOWUP""#;

#[tokio::test]
async fn each_execution_keeps_its_own_snapshot_of_the_workspace_and_home() {
    let f = Fixture::new();
    let s = f.server(WRITER, "").await;
    let id = s.create(json!({"prompt": "work"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (status, body) = s.followup(&id, json!({"message": "more"})).await;
    assert_eq!(status, 200, "{body}");
    s.wait_events(&id, "Succeeded", 2).await;
    let first = snapshot(&s, &id, 1);
    let second = snapshot(&s, &id, 2);
    assert_eq!(
        std::fs::read_to_string(first.join("workspace/state-1")).expect("state-1"),
        "execution 1\n"
    );
    assert!(std::fs::read_to_string(first.join("home/note-1")).is_ok());
    // The first snapshot is the workspace as execution 1 left it: nothing of execution 2.
    assert!(!first.join("workspace/state-2").exists());
    assert!(second.join("workspace/state-1").exists());
    assert!(second.join("workspace/state-2").exists());
    assert!(second.join("home/note-2").exists());
    // Only the server reads a snapshot: the agent's users are other uids.
    let snapshots = first.parent().expect("snapshots");
    let meta = std::fs::metadata(snapshots).expect("snapshots dir");
    assert_eq!(meta.mode() & 0o777, 0o700);
    assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
    let text = s.transcript_text(&id).await;
    assert!(text.contains("snapshot of execution 1 kept"), "{text}");
    assert!(text.contains("snapshot of execution 2 kept"), "{text}");
}

#[tokio::test]
async fn snapshots_false_keeps_none() {
    let f = Fixture::new();
    let s = f.server(WRITER, "snapshots = false").await;
    let id = s.create(json!({"prompt": "work"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    assert!(!snapshot(&s, &id, 1).parent().expect("dir").exists());
    let text = s.transcript_text(&id).await;
    assert!(!text.contains("snapshot of execution"), "{text}");
}

#[tokio::test]
async fn a_snapshot_over_snapshot_max_mb_is_not_kept_and_the_transcript_says_so() {
    let f = Fixture::new();
    // 2 MiB of real data, and a file with a hole that claims a terabyte: neither is copied.
    let s = f
        .server(
            r#"if [ "$1" = sparse ]; then truncate -s 1T huge; else head -c 2097152 /dev/urandom > big; fi"#,
            "snapshot_max_mb = 1",
        )
        .await;
    for prompt in ["dense", "sparse"] {
        let started = std::time::Instant::now();
        let id = s.create(json!({"prompt": prompt})).await;
        s.wait_state(&id, "SUCCEEDED").await;
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "{prompt}"
        );
        assert!(!snapshot(&s, &id, 1).exists(), "{prompt}");
        // Nothing half-made is left either.
        let left = walk(snapshot(&s, &id, 1).parent().expect("dir"));
        assert!(left.is_empty(), "{prompt}: {left:?}");
        let text = s.transcript_text(&id).await;
        assert!(
            text.contains(
                "snapshot of execution 1 not kept: it holds more than 1 MiB (snapshot_max_mb)"
            ),
            "{prompt}: {text}"
        );
    }
}

#[tokio::test]
async fn links_fifos_and_files_the_agent_cannot_read_never_bring_the_host_into_a_snapshot() {
    let f = Fixture::new();
    let s = f
        .server(
            r#"if [ "$RUNLEDGER_EXECUTION" = 1 ]; then
  ln -s /etc etc; ln -s /etc/shadow shadow; ln -s / root; mkfifo fifo
  mkdir -p deep/er; ln -s ../../.. deep/er/up; echo mine > deep/er/file
fi"#,
            "",
        )
        .await;
    let id = s.create(json!({"prompt": "plant"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    // A hard link to a file only root may read, planted in the workspace between executions
    // (the kernel's protected_hardlinks keeps an agent from making one itself).
    let secret = f.dir.path().join("host-secret");
    std::fs::write(&secret, "host secret").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::hard_link(&secret, workspace(&s, &id).join("linked")).expect("hard link");
    s.followup(&id, json!({"message": "again"})).await;
    s.wait_events(&id, "Succeeded", 2).await;

    for execution in [1, 2] {
        let kept = snapshot(&s, &id, execution).join("workspace");
        for (link, target) in [
            ("etc", "/etc"),
            ("shadow", "/etc/shadow"),
            ("root", "/"),
            ("deep/er/up", "../../.."),
        ] {
            let meta = std::fs::symlink_metadata(kept.join(link)).expect(link);
            assert!(meta.file_type().is_symlink(), "{link} is a link");
            assert_eq!(
                std::fs::read_link(kept.join(link)).expect(link).to_str(),
                Some(target)
            );
        }
        assert!(!kept.join("fifo").exists());
        assert_eq!(
            std::fs::read_to_string(kept.join("deep/er/file")).expect("file"),
            "mine\n"
        );
        // Nothing beneath the snapshot is a copy of a host file.
        let all = walk(&snapshot(&s, &id, execution));
        assert!(all.len() < 40, "{all:?}");
        for path in &all {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                assert!(!text.contains("root:"), "{path:?}");
                assert!(!text.contains("host secret"), "{path:?}");
            }
        }
        // No setuid bit, nothing the agent's user owns: the snapshot is the server's.
        for path in &all {
            let meta = std::fs::symlink_metadata(path).expect("meta");
            assert_eq!(meta.mode() & 0o7000, 0, "{path:?}");
            assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw(), "{path:?}");
        }
    }
    let text = s.transcript_text(&id).await;
    assert!(
        text.contains("1 FIFO(s), socket(s) or device(s) left out"),
        "{text}"
    );
    assert!(
        text.contains("1 file(s) the agent's user cannot read left out"),
        "{text}"
    );
}
