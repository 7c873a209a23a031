//! The audit index end to end on a real store: what the projector indexes, what a rebuild
//! writes, and what each filter, the cursor and the team scope answer.

use runledger_domain::{evolve, Event, Run, RunAdmitted, RunId, Timestamp};
use runledger_store::{Envelope, Store};

use super::{AuditQuery, Position};
use crate::projector::Projector;
use crate::Index;

fn open() -> (tempfile::TempDir, Store, Index) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), &runledger_store::Options::default()).expect("store");
    let index = Index::open(store.db()).expect("index");
    (dir, store, index)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Appends `events` to run `id`'s log from `seq` at times `at, at + 1, …` and hands the new
/// row to the projector, as a run's actor does.
fn command(
    store: &Store,
    projector: &Projector,
    row: Option<Run>,
    id: RunId,
    at: u64,
    events: Vec<Event>,
) -> Run {
    let first = row.as_ref().map_or(0, |r| r.next_seq);
    let envelopes: Vec<Envelope> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Envelope {
            run_id: id,
            seq: first + i as u64,
            at: Timestamp(at + i as u64),
            event,
            origin: None,
        })
        .collect();
    projector.mark(id).expect("mark");
    store.append(&envelopes).expect("append");
    let mut run = row;
    for e in &envelopes {
        run = evolve(run, id, &e.event, e.at);
    }
    let run = run.expect("a run");
    projector.submit(run.clone());
    run
}

/// Six runs, teams `a` (even) and `b` (odd), created by `key-a`/`key-b`; each is started, and
/// runs 0 and 3 are cancelled by `admin`. Times interleave the teams.
fn history(store: &Store, projector: &Projector) -> Vec<RunId> {
    let mut ids = Vec::new();
    let mut rows = Vec::new();
    for i in 0..6u64 {
        let team = if i % 2 == 0 { "a" } else { "b" };
        let mut created = runledger_domain::sample_created(i);
        created.creator.uid = format!("key-{team}");
        let admitted = RunAdmitted {
            created,
            team: team.into(),
            sealed: None,
        };
        let id = RunId::new(Timestamp(1_000 + i), u128::from(i));
        let row = command(
            store,
            projector,
            None,
            id,
            1_000 + 10 * i,
            vec![Event::Admitted(admitted)],
        );
        ids.push(id);
        rows.push(row);
    }
    for (i, row) in rows.into_iter().enumerate() {
        let id = ids[i];
        let mut events = vec![Event::Started { execution: 1 }];
        if i == 0 || i == 3 {
            events.push(Event::Cancelled { by: "admin".into() });
        }
        command(
            store,
            projector,
            Some(row),
            id,
            2_000 + 10 * i as u64,
            events,
        );
    }
    block_on(projector.caught_up());
    ids
}

fn dump(index: &Index) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let audit = index.trees().audit;
    [audit.team, audit.kind, audit.actor]
        .iter()
        .map(|tree| {
            tree.iter()
                .map(|e| {
                    let (k, v) = e.expect("entry");
                    (k.to_vec(), v.to_vec())
                })
                .collect()
        })
        .collect()
}

/// (run index, seq) of every event a page answers, in its order.
fn answered(ids: &[RunId], index: &Index, store: &Store, query: &AuditQuery) -> Vec<(usize, u64)> {
    let page = index.audit_page(store, query, None, 100).expect("page");
    assert_eq!(page.next, None);
    page.items
        .iter()
        .map(|item| {
            let run = ids
                .iter()
                .position(|id| *id == item.envelope.run_id)
                .expect("known run");
            (run, item.envelope.seq)
        })
        .collect()
}

#[test]
fn the_projector_indexes_every_event_and_a_rebuild_writes_the_same_entries() {
    let (_dir, store, index) = open();
    let projector = Projector::start(index.clone(), store.clone());
    history(&store, &projector);
    let incremental = dump(&index);
    // 6 creations + 6 starts + 2 cancels; actors: 6 creators + 2 cancels.
    assert_eq!(incremental[0].len(), 14);
    assert_eq!(incremental[1].len(), 14);
    assert_eq!(incremental[2].len(), 8);
    projector.stop();
    index.rebuild(&store).expect("rebuild");
    assert!(
        dump(&index) == incremental,
        "a rebuild equals the incremental audit index"
    );
}

#[test]
fn each_filter_answers_its_events_newest_first_in_its_team_only() {
    let (_dir, store, index) = open();
    let projector = Projector::start(index.clone(), store.clone());
    let ids = history(&store, &projector);
    let team = |t: &str| AuditQuery {
        team: Some(t.into()),
        ..AuditQuery::default()
    };
    // Team a: runs 0, 2, 4; newest first (the second commands, then the creations).
    assert_eq!(
        answered(&ids, &index, &store, &team("a")),
        vec![(4, 1), (2, 1), (0, 2), (0, 1), (4, 0), (2, 0), (0, 0)]
    );
    let cancels = AuditQuery {
        types: vec!["Cancelled".into()],
        ..AuditQuery::default()
    };
    assert_eq!(
        answered(&ids, &index, &store, &cancels),
        vec![(3, 2), (0, 2)]
    );
    let cancels_of_b = AuditQuery {
        team: Some("b".into()),
        ..cancels.clone()
    };
    assert_eq!(answered(&ids, &index, &store, &cancels_of_b), vec![(3, 2)]);
    let two_types = AuditQuery {
        team: Some("b".into()),
        types: vec!["Cancelled".into(), "Created".into()],
        ..AuditQuery::default()
    };
    assert_eq!(
        answered(&ids, &index, &store, &two_types),
        vec![(3, 2), (5, 0), (3, 0), (1, 0)]
    );
    let by_key_b = AuditQuery {
        actor: Some("key-b".into()),
        ..AuditQuery::default()
    };
    assert_eq!(
        answered(&ids, &index, &store, &by_key_b),
        vec![(5, 0), (3, 0), (1, 0)]
    );
    // Team a's query never reaches team b's entries, whatever else it names.
    let a_asks_for_b = AuditQuery {
        team: Some("a".into()),
        actor: Some("key-b".into()),
        ..AuditQuery::default()
    };
    assert!(answered(&ids, &index, &store, &a_asks_for_b).is_empty());
    let a_asks_for_b_run = AuditQuery {
        team: Some("a".into()),
        run_id: Some(ids[3]),
        ..AuditQuery::default()
    };
    assert!(answered(&ids, &index, &store, &a_asks_for_b_run).is_empty());
    let run = AuditQuery {
        run_id: Some(ids[3]),
        ..AuditQuery::default()
    };
    assert_eq!(
        answered(&ids, &index, &store, &run),
        vec![(3, 2), (3, 1), (3, 0)]
    );
    // since ≤ at < until: the creations of runs 1..=3 (times 1010..=1030).
    let window = AuditQuery {
        since: Some(Timestamp(1_010)),
        until: Some(Timestamp(1_031)),
        ..AuditQuery::default()
    };
    assert_eq!(
        answered(&ids, &index, &store, &window),
        vec![(3, 0), (2, 0), (1, 0)]
    );
}

#[test]
fn pages_follow_the_cursor_and_a_follower_reads_oldest_first() {
    let (_dir, store, index) = open();
    let projector = Projector::start(index.clone(), store.clone());
    history(&store, &projector);
    let all = AuditQuery::default();
    let whole = index
        .audit_page(&store, &all, None, 100)
        .expect("page")
        .items;
    assert_eq!(whole.len(), 14);
    let mut paged = Vec::new();
    let mut cursor = None;
    loop {
        let page = index.audit_page(&store, &all, cursor, 3).expect("page");
        assert!(page.items.len() <= 3);
        paged.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(Position::decode(&next.encode()).expect("cursor")),
            None => break,
        }
    }
    assert!(paged == whole, "the pages together are the whole answer");
    // A follower after the fifth oldest event, up to time 2_010, reads what lies between.
    let mut oldest: Vec<_> = whole.iter().rev().cloned().collect();
    let after = oldest[4].position();
    let next = index
        .audit_after(&store, &all, after, Timestamp(2_010), 100)
        .expect("after");
    oldest.retain(|item| item.position() > after && item.envelope.at <= Timestamp(2_010));
    assert!(next == oldest);
}
