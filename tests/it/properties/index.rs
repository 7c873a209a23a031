//! The read index against the log: replay equals live, a rebuild equals the incremental index, the
//! tallies equal a fresh count, paging returns every match once, and catch-up and verify after a
//! crash.

use super::support::*;
use proptest::prelude::*;
use runledger::domain::{decide, ArtifactKind, Command, Run, RunId, RunState, Timestamp};
use runledger::projection::{keys, Index, Order, Query, SortBy};
use runledger::store::{self};
use std::collections::BTreeMap;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn replay_equals_live_and_rebuild_equals_incremental(specs in proptest::collection::vec(run_spec(), 1..25)) {
        let (_dir, store, index) = open();
        let live = populate(&store, &index, &specs);
        for run in &live {
            prop_assert_eq!(store.load_run(run.id).expect("load"), Some(run.clone()));
            prop_assert_eq!(index.get(run.id).expect("get"), Some(run.clone()));
            for reported in &run.artifacts {
                let found = index.artifact_run(&reported.artifact.uid).expect("artifact");
                prop_assert_eq!(found.map(|r| r.id), Some(run.id));
            }
        }
        prop_assert_eq!(index.artifact_run("00000000-0000-4000-8000-000000000000").expect("none"), None);
        let incremental = index.dump().expect("dump");
        let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
        prop_assert!(differences.is_empty(), "verify found {:?}", differences);
        index.rebuild(&store).expect("rebuild");
        prop_assert_eq!(index.dump().expect("dump"), incremental);
    }

    /// The usage totals per environment, like the tally: summed once, moved by every write,
    /// saved (as at a clean stop), and exact whatever the next open or a rebuild starts from.
    #[test]
    fn the_usage_totals_kept_by_writes_equal_a_fresh_sum(
        specs in proptest::collection::vec(run_spec(), 1..25),
        counted_after in 0usize..25,
        saved_after in 0usize..25,
    ) {
        let (_dir, store, index) = open();
        let counted = counted_after.min(specs.len());
        let saved = saved_after.clamp(counted, specs.len());
        let mut live = populate(&store, &index, &specs[..counted]);
        index.usage_by_environment().expect("sum");
        live.extend(populate_from(&store, &index, &specs[counted..saved], counted));
        index.save_tally().expect("save");
        live.extend(populate_from(&store, &index, &specs[saved..], saved));
        let mut want: runledger::projection::UsageByEnvironment = BTreeMap::new();
        for run in &live {
            let u = &run.usage;
            let t = want
                .entry(run.config.environment_id.clone().unwrap_or_default())
                .or_default();
            t.inference_nano_usd += u.inference_nano_usd.unwrap_or(0);
            t.compute_nano_usd += u.compute_nano_usd.unwrap_or(0);
            t.input_tokens += u.input_tokens;
            t.output_tokens += u.output_tokens;
            t.cpu_ms += u.cpu_ms;
        }
        want.retain(|_, t| *t != Default::default());
        let kept = |got: runledger::projection::UsageByEnvironment| -> runledger::projection::UsageByEnvironment {
            got.into_iter().filter(|(_, t)| *t != Default::default()).collect()
        };
        prop_assert_eq!(kept(index.usage_by_environment().expect("kept")), want.clone());
        let fresh = Index::open(store.db()).expect("reopen");
        prop_assert_eq!(kept(fresh.usage_by_environment().expect("reopened")), want.clone());
        index.rebuild(&store).expect("rebuild");
        prop_assert_eq!(kept(index.usage_by_environment().expect("after rebuild")), want);
    }

    /// The tally is counted once, moved by every write, saved (as at a clean stop) and kept
    /// writing after; whatever the next open takes, a saved copy or a walk of the ranges, and
    /// whatever a rebuild saves, is exact.
    #[test]
    fn the_state_tally_kept_by_writes_equals_a_fresh_count(
        specs in proptest::collection::vec(run_spec(), 1..25),
        counted_after in 0usize..25,
        saved_after in 0usize..25,
    ) {
        let (_dir, store, index) = open();
        let counted = counted_after.min(specs.len());
        let saved = saved_after.clamp(counted, specs.len());
        let mut live = populate(&store, &index, &specs[..counted]);
        // The first count walks the ranges; the writes after it move the tally.
        index.count_by_state().expect("count");
        live.extend(populate_from(&store, &index, &specs[counted..saved], counted));
        prop_assert!(index.save_tally().expect("save"));
        live.extend(populate_from(&store, &index, &specs[saved..], saved));
        let want: Vec<(RunState, u64)> = RunState::ALL
            .into_iter()
            .map(|s| (s, live.iter().filter(|r| r.state == s).count() as u64))
            .collect();
        prop_assert_eq!(index.count_by_state().expect("tally"), want.clone());
        let copy = Index::saved_counts(store.db()).expect("saved copy");
        if saved == specs.len() {
            prop_assert_eq!(copy, Some(want.clone()));
        } else {
            prop_assert_eq!(copy, None, "the writes after the save removed it");
        }
        let fresh = Index::open(store.db()).expect("reopen");
        prop_assert_eq!(fresh.count_by_state().expect("reopened"), want.clone());
        // `verify` checks the tally a handle holds against the counts of its own rebuild.
        let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
        prop_assert!(differences.is_empty(), "verify found {:?}", differences);
        index.rebuild(&store).expect("rebuild");
        prop_assert_eq!(index.count_by_state().expect("after rebuild"), want.clone());
        prop_assert_eq!(Index::saved_counts(store.db()).expect("rebuilt copy"), Some(want.clone()));
        let fresh = Index::open(store.db()).expect("reopen");
        prop_assert_eq!(fresh.count_by_state().expect("after rebuild, reopened"), want);
    }

    /// For every team (and one without runs), paging through a list with any filters and sort
    /// returns exactly that team's matching runs, in order, once each.
    #[test]
    fn paging_returns_every_match_once_in_order(
        specs in proptest::collection::vec(run_spec(), 1..30),
        states in proptest::collection::vec(0usize..5, 0..3),
        name in proptest::option::of(0u8..3),
        model in proptest::option::of(0u8..3),
        creator in proptest::option::of(0u8..3),
        meta in proptest::option::of(0u8..2),
        q in proptest::option::of(0u8..5),
        sort in 0u8..3,
        asc in any::<bool>(),
        limit in 1usize..6,
        after in proptest::option::of(0u64..400),
        created in (proptest::option::of(0u64..1500), proptest::option::of(0u64..1500)),
        artifact in proptest::option::of(0usize..4),
        schedule in proptest::option::of(0u8..4),
    ) {
        let (_dir, store, index) = open();
        let live = populate(&store, &index, &specs);
        let base = live.first().map_or(0, |r| r.created_at.0);
        for team in 0u8..4 {
            let query = Query {
                team: team_name(team),
                states: states.iter().map(|&s| RunState::ALL[s]).collect(),
                name: name.map(|n| format!("name{n}")),
                model_id: model.map(|m| format!("model{m}")),
                creator: creator.map(|c| format!("key{c}")),
                metadata: meta.map(|m| vec![("team".to_string(), format!("t{m}"))]).unwrap_or_default(),
                q: q.map(|t| format!("BUG {t}")),
                updated_after: after.map(|a| Timestamp(base + a)),
                created_after: created.0.map(|a| Timestamp(base + a)),
                created_before: created.1.map(|b| Timestamp(base + b)),
                sort_by: [SortBy::UpdatedAt, SortBy::CreatedAt, SortBy::Title][sort as usize],
                order: if asc { Order::Asc } else { Order::Desc },
                limit,
                artifact_type: artifact.map(|a| ArtifactKind::TYPE_NAMES[a]),
                // Schedule 3 made no run.
                schedule_id: schedule.map(|n| schedule_id(n).to_string()),
                ..Query::default()
            };
            let mut expected: Vec<&Run> = live
                .iter()
                .filter(|r| r.team == team_name(team) && query.matches(r))
                .collect();
            expected.sort_by_key(|r| match query.sort_by {
                SortBy::UpdatedAt => keys::updated_position(r),
                SortBy::CreatedAt => r.id.to_bytes().to_vec(),
                SortBy::Title => keys::title_position(r),
            });
            if !asc {
                expected.reverse();
            }
            let mut got = Vec::new();
            let mut q = query.clone();
            for _ in 0..100 {
                let page = index.list(&q).expect("list");
                prop_assert!(page.runs.len() <= limit);
                got.extend(page.runs.into_iter().map(|r| r.id));
                match page.next_cursor {
                    Some(c) => q.cursor = Some(c),
                    None => break,
                }
            }
            let expected: Vec<RunId> = expected.iter().map(|r| r.id).collect();
            prop_assert_eq!(got, expected, "team {}", team_name(team));
        }
    }
}

#[test]
fn catch_up_repairs_runs_whose_index_fell_behind_the_log() {
    let (_dir, store, index) = open();
    let live = populate(&store, &index, &[one_queued_run()]);
    let run = &live[0];
    // A crash after the append but before the index update: the log is ahead.
    let decision = decide(Some(run), Command::Start { placement: None }).expect("start");
    let at = Timestamp(run.updated_at.0 + 5);
    store.mark_dirty(run.id).expect("mark");
    store
        .append(&store::envelopes(
            run.id,
            run.next_seq,
            at,
            decision.events,
            None,
        ))
        .expect("append");
    assert_eq!(
        index.get(run.id).expect("get").map(|r| r.state),
        Some(RunState::Queued)
    );

    let fixed = index
        .catch_up(&store, &store.dirty_runs().expect("dirty"))
        .expect("catch up");
    assert_eq!(fixed, 1);
    assert_eq!(
        index.get(run.id).expect("get").map(|r| r.state),
        Some(RunState::InProgress)
    );
    assert!(store.dirty_runs().expect("dirty").is_empty());
    let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
    assert!(differences.is_empty(), "{differences:?}");
}

/// A crash in the middle of an index update leaves entries of the row being applied without
/// the row; by the next start the log may have moved on further. The catch-up removes them.
#[test]
fn catch_up_removes_the_entries_of_an_update_a_crash_cut_short() {
    let (_dir, store, index) = open();
    let live = populate(&store, &index, &[one_queued_run()]);
    let queued = live[0].clone();
    let counts = |index: &Index| -> Vec<u64> {
        let counts = index.count_by_state().expect("count");
        counts.into_iter().map(|(_, n)| n).collect()
    };
    // Queued, in progress, succeeded, failed, cancelled.
    assert_eq!(counts(&index), [1, 0, 0, 0, 0]);
    store.mark_dirty(queued.id).expect("mark");
    // Started is durable, and the projector was writing its entries when the process died.
    let start = decide(Some(&queued), Command::Start { placement: None }).expect("start");
    let at = Timestamp(queued.updated_at.0 + 5);
    store
        .append(&store::envelopes(
            queued.id,
            queued.next_seq,
            at,
            start.events.clone(),
            None,
        ))
        .expect("append");
    let started = start
        .events
        .iter()
        .try_fold(queued.clone(), |r, e| {
            runledger::domain::evolve(Some(r), queued.id, e, at)
        })
        .expect("started");
    index
        .apply_entries_only(Some(&queued), &started)
        .expect("partial update");
    // The finish became durable too before the crash.
    let finish = decide(
        Some(&started),
        Command::Finish {
            execution: started.executions,
            outcome: Ok(()),
        },
    )
    .expect("finish");
    let later = Timestamp(at.0 + 5);
    store
        .append(&store::envelopes(
            queued.id,
            started.next_seq,
            later,
            finish.events,
            None,
        ))
        .expect("append");

    // The tally follows the state ranges, as a fresh count would.
    assert_eq!(counts(&index), [0, 1, 0, 0, 0]);

    let fixed = index
        .catch_up(&store, &store.dirty_runs().expect("dirty"))
        .expect("catch up");
    assert_eq!(fixed, 1);
    assert_eq!(
        index.get(queued.id).expect("get").map(|r| r.state),
        Some(RunState::Succeeded)
    );
    assert_eq!(counts(&index), [0, 0, 1, 0, 0]);
    assert_eq!(
        counts(&Index::open(store.db()).expect("reopen")),
        [0, 0, 1, 0, 0]
    );
    let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
    assert!(differences.is_empty(), "{differences:?}");
}

/// `replay --verify` is a check: it builds its scratch index in a database of its own and
/// leaves the store as it found it (built inside the store, the scratch copy grew its file and
/// its page table; see `Index::verify`).
///
/// The store's file is not byte-for-byte unchanged, and need not be: sled 0.34 writes on its
/// own while we only read. Its flusher thread moves live pages out of sparse segments, and a
/// read that meets a leaf an insert left over-full splits it. So the check is that the contents
/// and the trees are the same, and that the file grew by far less than the index it would have
/// held, measured by building that index in a fresh database.
#[test]
fn verify_writes_nothing_to_the_store() {
    let (_dir, store, index) = open();
    let specs: Vec<RunSpec> = (0..300).map(|_| one_queued_run()).collect();
    populate(&store, &index, &specs);
    let scratch = store.data_dir().join("verify-scratch");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    std::fs::write(scratch.join("left-behind"), b"by an interrupted verify").expect("write");
    let size = |db: &sled::Db| {
        db.flush().expect("flush");
        db.size_on_disk().expect("size")
    };
    let before = size(store.db());
    let names = store.db().tree_names();
    let contents = store.db().checksum().expect("checksum");

    let (runs, _, differences) = index.verify(&store, 8 << 20).expect("verify");
    assert_eq!(runs, 300);
    assert!(differences.is_empty(), "{differences:?}");
    assert!(!scratch.exists(), "the scratch database is removed");
    assert_eq!(store.db().tree_names(), names);
    assert_eq!(store.db().checksum().expect("checksum"), contents);
    // Saturating: sled also truncates its file when the segments at its end become free.
    let growth = size(store.db()).saturating_sub(before);

    let elsewhere = sled::Config::new()
        .temporary(true)
        .open()
        .expect("scratch db");
    let empty = size(&elsewhere);
    Index::open(&elsewhere)
        .expect("index")
        .rebuild(&store)
        .expect("rebuild");
    let index_size = size(&elsewhere).saturating_sub(empty);
    assert!(
        growth * 10 < index_size,
        "verify grew the store by {growth} bytes; the index takes {index_size}"
    );
}
