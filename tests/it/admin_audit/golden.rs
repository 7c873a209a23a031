//! Golden bytes of the admin audit log's records: one fixture per `AdminEvent` variant under
//! `tests/fixtures/admin-events/`, in the store's framing. An accidental change to the format
//! (a reordered variant, a changed field) fails here. To add a fixture for a NEW variant, run
//! with `RUNLEDGER_WRITE_GOLDEN=1`; existing fixtures are never rewritten.

use std::path::PathBuf;

use runledger::domain::{AdminEvent, Channel, Origin, OriginKey, Timestamp};
use runledger::store::admin_log::{decode, encode};
use runledger::store::AdminRecord;

fn samples() -> Vec<(&'static str, AdminEvent)> {
    vec![
        (
            "key_created",
            AdminEvent::KeyCreated {
                key_id: "01KAKZ0000000000000000000K".into(),
                name: "ci-bot".into(),
                kind: "agent".into(),
                team: "infra".into(),
                admin: false,
            },
        ),
        (
            "key_revoked",
            AdminEvent::KeyRevoked {
                key_id: "01KAKZ0000000000000000000K".into(),
                name: "ci-bot".into(),
                team: "infra".into(),
                already: true,
            },
        ),
        (
            "team_created",
            AdminEvent::TeamCreated {
                name: "infra".into(),
            },
        ),
        (
            "secret_rotated",
            AdminEvent::SecretRotated {
                name: "session_secret".into(),
            },
        ),
        (
            "server_started",
            AdminEvent::ServerStarted {
                version: "0.1.0".into(),
                config_sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                    .into(),
                config_file: Some("/etc/runledger.toml".into()),
            },
        ),
        (
            "server_stopped",
            AdminEvent::ServerStopped {
                version: "0.1.0".into(),
                config_sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                    .into(),
                signal: "SIGTERM".into(),
            },
        ),
        (
            "index_rebuilt",
            AdminEvent::IndexRebuilt {
                runs: 1_150_000,
                events: 4_600_000,
                accepted_loss: true,
            },
        ),
    ]
}

/// A record with every field of its origin set, so that a change to any of them shows.
fn record(event: AdminEvent) -> AdminRecord {
    AdminRecord {
        seq: 7,
        at: Timestamp(1_763_768_489_123),
        event,
        origin: Origin {
            channel: Channel::Api,
            key: Some(OriginKey {
                id: "01KEY".into(),
                name: "alice".into(),
                kind: "personal".into(),
                team: "default".into(),
                admin: true,
            }),
            request_id: Some("01REQUEST".into()),
            client_addr: Some("203.0.113.7".into()),
            user_agent: Some("curl/8.5.0".into()),
            cause: Some("a test".into()),
            reason: Some("a reason".into()),
        },
        prev: [0x5a; 32],
    }
}

#[test]
fn every_admin_record_type_has_a_fixture_and_matches_it() {
    let write = std::env::var("RUNLEDGER_WRITE_GOLDEN").is_ok();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admin-events");
    let mut kinds = Vec::new();
    for (name, event) in samples() {
        kinds.push(event.kind());
        let (bytes, link) = encode(&record(event.clone())).expect("encodes");
        let path = dir.join(format!("{name}.bin"));
        if !path.exists() && write {
            std::fs::create_dir_all(&dir).expect("fixture dir");
            std::fs::write(&path, &bytes).expect("write fixture");
        }
        let golden =
            std::fs::read(&path).unwrap_or_else(|_| panic!("missing fixture {}", path.display()));
        assert_eq!(
            bytes, golden,
            "encoding of {name} changed; the admin log's format must not change"
        );
        let read = decode(&golden).expect("decodes");
        assert_eq!(read.record, record(event), "{name} decodes differently");
        assert_eq!(read.link, link, "{name}'s link changed");
    }
    // A new variant must come with a sample above: this list is every type.
    assert_eq!(kinds, AdminEvent::TYPES);
}
