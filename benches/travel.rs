//! Time travel on a long history: the state of a run of 100,000 events as of its last event
//! (`GET /agent/runs/{id}?as_of_seq=99999`), folded from the store's log one record at a time
//! by `runledger::actor::state_at`, the fold `History::as_of` runs. Prints the time of each
//! round and the memory the fold added to the process (peak RSS after the fold less RSS before
//! it, the peak reset through `/proc/self/clear_refs`), sled's page cache included.
//!
//! Run with `cargo bench --bench travel` (about a minute: most of it builds the store).
//! `TRAVEL_EVENTS` changes the history's length; `TRAVEL_KEEP=DIR` builds the store in `DIR`
//! and keeps it (a data directory `runledger serve` can open, to time the same read over
//! HTTP). A measurement, not a test: nothing here asserts a time. Described in
//! `docs/performance.md`.

use std::collections::BTreeMap;
use std::time::Instant;

use runledger::actor::state_at;
use runledger::domain::{
    AgentConfig, Creator, CreatorKind, Event, FollowupMode, RunAdmitted, RunCreated, RunId,
    SourceType, Timestamp,
};
use runledger::store::{Envelope, Options, Store};

const T0: u64 = 1_763_000_000_000;

/// The run's first event, as an API create admits it.
fn admitted() -> Event {
    Event::Admitted(RunAdmitted {
        created: RunCreated {
            title: "A run that was followed up fifty thousand times".into(),
            prompt: "Keep the integration tests green while the follow-ups arrive.".into(),
            config: AgentConfig {
                environment_id: Some("demo".into()),
                ..AgentConfig::default()
            },
            creator: Creator {
                kind: CreatorKind::User,
                uid: "01JD2Q7ZK9X4M3N5P6R7S8T9VW".into(),
                display_name: "admin".into(),
            },
            source: SourceType::Api,
            metadata: BTreeMap::new(),
        },
        team: runledger::domain::DEFAULT_TEAM.into(),
        sealed: None,
    })
}

/// Event `seq` of the history: admitted, started, then follow-ups each delivered to the
/// running agent (the events a long conversation with one execution leaves).
fn event(seq: u64) -> Event {
    match seq {
        0 => admitted(),
        1 => Event::Started { execution: 1 },
        n if n % 2 == 0 => Event::FollowupReceived {
            message: format!("follow-up number {n}: also check the retry path"),
            mode: FollowupMode::Normal,
            by: "01JD2Q7ZK9X4M3N5P6R7S8T9VW".into(),
        },
        _ => Event::FollowupsDelivered {
            execution: 1,
            count: 1,
        },
    }
}

/// Resident memory now and at its peak (kB), from `/proc/self/status`.
fn rss_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak RSS to the current RSS (Linux 4.0+); false when the kernel refuses.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn main() {
    let events: u64 = std::env::var("TRAVEL_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let kept = std::env::var_os("TRAVEL_KEEP").map(std::path::PathBuf::from);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = kept.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let id = RunId::new(Timestamp(T0), 0x5EED);
    let started = Instant::now();
    {
        let store = Store::open(&dir, &Options::default()).expect("open store");
        let mut batch = Vec::with_capacity(1000);
        for seq in 0..events {
            batch.push(Envelope {
                run_id: id,
                seq,
                at: Timestamp(T0 + seq),
                event: event(seq),
                origin: None,
            });
            if batch.len() == 1000 || seq + 1 == events {
                store.append(&batch).expect("append");
                batch.clear();
            }
        }
        store.sync_blocking().expect("sync");
    }
    println!(
        "built a run of {events} events in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    // Reopened, so the fold reads through a cold page cache as a server's first read would.
    let store = Store::open(&dir, &Options::default()).expect("reopen store");
    let last = events - 1;
    for round in 1..=5 {
        let peak_reset = reset_peak();
        let (before, _) = rss_kb();
        let t = Instant::now();
        let run = state_at(&store, id, last)
            .expect("fold")
            .expect("the run has the event");
        let elapsed = t.elapsed();
        let (_, peak) = rss_kb();
        assert_eq!(run.next_seq, events);
        let extra = if peak_reset {
            format!("{:.1} MiB", peak.saturating_sub(before) as f64 / 1024.0)
        } else {
            "unknown (peak RSS cannot be reset)".to_string()
        };
        println!(
            "round {round}: as_of_seq={last} in {:.1} ms, extra memory {extra}",
            elapsed.as_secs_f64() * 1000.0
        );
    }
    if kept.is_some() {
        println!("run id {id}");
    }
}
