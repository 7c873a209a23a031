//! Golden bytes of the event encoding: one fixture per event variant under
//! `tests/fixtures/events/`. An accidental change to the format (a reordered variant, a changed
//! field, another postcard version) fails here. To add a fixture for a NEW variant, run with
//! `RUNLEDGER_WRITE_GOLDEN=1`; existing fixtures are never rewritten. The sample of each
//! variant is in `golden/samples.rs`.

mod samples;

pub(crate) use samples::samples;
use samples::schedule_samples;

use std::path::PathBuf;

use runledger::domain::{Channel, Origin, OriginKey};
use runledger::domain::{Event, RunId, Timestamp};
use runledger::store::codec::{decode_run, encode, encode_run, Envelope, LegacyEnvelope};

/// A run record as schema version 1 wrote it (the fixtures under `events/`).
fn legacy(event: Event) -> LegacyEnvelope {
    LegacyEnvelope {
        run_id: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a),
        seq: 5,
        at: Timestamp(1_763_768_489_123),
        event,
    }
}

/// A run record as this build writes it (the fixtures under `events-v2/`): every field of the
/// origin set, so that a change to any of them shows.
fn envelope(event: Event) -> Envelope {
    Envelope {
        run_id: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a),
        seq: 5,
        at: Timestamp(1_763_768_489_123),
        event,
        origin: Some(Origin {
            channel: Channel::Console,
            key: Some(OriginKey {
                id: "01KEY".into(),
                name: "alice".into(),
                kind: "personal".into(),
                team: "platform".into(),
                admin: true,
            }),
            request_id: Some("01REQUEST".into()),
            client_addr: Some("203.0.113.7".into()),
            user_agent: Some("curl/8.5.0".into()),
            cause: Some("a test".into()),
            reason: Some("not needed any more".into()),
        }),
    }
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events")
}

fn fixture_dir_v2() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events-v2")
}

/// The fixture `name` of `dir`, written first when it is missing and `write` is set.
fn fixture(dir: &std::path::Path, name: &str, bytes: &[u8], write: bool) -> Vec<u8> {
    let path = dir.join(format!("{name}.bin"));
    if !path.exists() && write {
        std::fs::create_dir_all(dir).expect("fixture dir");
        std::fs::write(&path, bytes).expect("write fixture");
    }
    std::fs::read(&path).unwrap_or_else(|_| panic!("missing fixture {}", path.display()))
}

#[test]
fn every_variant_has_a_current_fixture_and_matches_it() {
    let write = std::env::var("RUNLEDGER_WRITE_GOLDEN").is_ok();
    let dir = fixture_dir_v2();
    for (name, event) in samples() {
        // A version 2 record stores its run's previous chain link; any 32 bytes do here.
        let bytes = encode_run(&envelope(event.clone()), &[0xab; 32]).expect("encodes");
        let golden = fixture(&dir, name, &bytes, write);
        assert_eq!(
            bytes, golden,
            "encoding of {name} changed; the stored log format must not change"
        );
        assert_eq!(
            decode_run(&golden).expect("decodes"),
            envelope(event),
            "{name} decodes differently"
        );
    }
}

#[test]
fn every_variant_has_a_fixture_and_matches_it() {
    let write = std::env::var("RUNLEDGER_WRITE_GOLDEN").is_ok();
    let dir = fixture_dir();
    let mut kinds = Vec::new();
    for (name, event) in samples() {
        kinds.push(event.kind());
        // Stores written before origins hold version 1 records: they read as they always did,
        // with no origin.
        let bytes = encode(&legacy(event.clone())).expect("encodes");
        let golden = fixture(&dir, name, &bytes, write);
        assert_eq!(
            bytes, golden,
            "encoding of {name} changed; the stored log format must not change"
        );
        let read = decode_run(&golden).expect("decodes");
        assert_eq!(read.event, event, "{name} decodes differently");
        assert_eq!(read.origin, None, "{name} grew an origin");
    }
    // A new variant must come with a sample above (and so a fixture): this match stops
    // compiling when one is added.
    for (_, event) in samples() {
        match event {
            Event::Created(_)
            | Event::Started { .. }
            | Event::FollowupReceived { .. }
            | Event::Succeeded { .. }
            | Event::Failed { .. }
            | Event::Cancelled { .. }
            | Event::FollowupsDelivered { .. }
            | Event::Requeued { .. }
            | Event::UsageRecorded { .. }
            | Event::Admitted(_)
            | Event::ArtifactReported { .. }
            | Event::Attached { .. }
            | Event::Scheduled { .. }
            | Event::StartedOn { .. }
            | Event::Lost { .. }
            | Event::SessionLinkRevoked { .. }
            | Event::Derived(_)
            | Event::Provenance { .. }
            | Event::Parented(_)
            | Event::MessageSent { .. }
            | Event::MessageReceived(_)
            | Event::MessageDelivered { .. }
            | Event::MessageRead { .. }
            | Event::LifecycleReported(_)
            | Event::Changes { .. } => {}
        }
    }
    let all = [
        "Created",
        "Started",
        "FollowupReceived",
        "Succeeded",
        "Failed",
        "Cancelled",
        "FollowupsDelivered",
        "Requeued",
        "UsageRecorded",
        // `Admitted` is a `Created` with a team, and is named so on the wire.
        "Created",
        // One per kind of artifact: each kind is a positional variant of its own.
        "ArtifactReported",
        "ArtifactReported",
        "ArtifactReported",
        "ArtifactReported",
        "Attached",
        "Scheduled",
        // `StartedOn` is a `Started` with a placement, and is named so on the wire.
        "Started",
        "Lost",
        "SessionLinkRevoked",
        // One per kind of derivation: each is a positional variant of its own.
        "Derived",
        "Derived",
        "Provenance",
        "Parented",
        "MessageSent",
        "MessageReceived",
        "MessageDelivered",
        "MessageRead",
        "LifecycleReported",
        "Changes",
    ];
    assert_eq!(kinds, all);
}

#[test]
fn every_schedule_event_variant_has_a_fixture_and_matches_it() {
    use runledger::domain::schedule::ScheduleEvent;
    let write = std::env::var("RUNLEDGER_WRITE_GOLDEN").is_ok();
    let dir = fixture_dir().with_file_name("schedule_events");
    for (name, event) in schedule_samples() {
        let bytes = postcard::to_allocvec(&event).expect("encodes");
        let path = dir.join(format!("{name}.bin"));
        if !path.exists() && write {
            std::fs::create_dir_all(&dir).expect("fixture dir");
            std::fs::write(&path, &bytes).expect("write fixture");
        }
        let golden =
            std::fs::read(&path).unwrap_or_else(|_| panic!("missing fixture {}", path.display()));
        assert_eq!(bytes, golden, "encoding of {name} changed");
        assert_eq!(
            postcard::from_bytes::<ScheduleEvent>(&golden).expect("decodes"),
            event,
            "{name} decodes differently"
        );
    }
    // A new variant does not compile until it has a sample above.
    for (_, event) in schedule_samples() {
        match event {
            ScheduleEvent::Created { .. }
            | ScheduleEvent::Updated { .. }
            | ScheduleEvent::Paused { .. }
            | ScheduleEvent::Resumed { .. }
            | ScheduleEvent::Deleted { .. }
            | ScheduleEvent::Fired { .. }
            | ScheduleEvent::FireFailed { .. } => {}
        }
    }
}
