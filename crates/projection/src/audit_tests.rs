//! The audit index end to end on a real store: what the projector indexes, what a rebuild
//! writes, and what each filter, the cursor and the team scope answer.

use runledger_domain::{evolve, Event, Run, RunAdmitted, RunId, Timestamp};
use runledger_store::{Envelope, Store};

use crate::audit::{AuditItem, AuditQuery, Position};
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
    block_on(projector.audit_caught_up());
    ids
}

/// Every entry of the three trees as (range prefix, entry), blocks expanded: the same set
/// however the entries were split into blocks.
fn dump(index: &Index) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let audit = index.trees().audit;
    // The prefixes' widths: `team`, `team ‖ type`, `team ‖ actor`.
    [(audit.team, 8), (audit.kind, 16), (audit.actor, 16)]
        .iter()
        .map(|(tree, prefix_len)| {
            let mut out = Vec::new();
            for e in tree.iter() {
                let (k, v) = e.expect("entry");
                for entry in crate::blocks::decode(&v).expect("block") {
                    out.push((k[..*prefix_len].to_vec(), entry.to_vec()));
                }
            }
            out
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

/// 40 runs of 15 events each, teams `a` and `b`, every fifth event a cancel by one of three
/// keys, at times that interleave the runs out of their order, indexed in batches of uneven
/// sizes: the ranges span many blocks, split in the middle and at the front as well as at the
/// tail, and every page, filter and follower must still answer exactly the entries in order.
#[test]
fn entries_spread_over_many_blocks_answer_every_page_and_follower_in_order() {
    let (_dir, store, index) = open();
    let mut all: Vec<(String, Envelope)> = Vec::new();
    for r in 0..40u64 {
        let id = RunId::new(Timestamp(1_000 + r), u128::from(r));
        let team = if r % 2 == 0 { "a" } else { "b" };
        let envelopes: Vec<Envelope> = (0..15u64)
            .map(|seq| Envelope {
                run_id: id,
                seq,
                at: Timestamp(10_000 + (seq * 41 + (39 - r) * 7) % 300),
                event: if seq % 5 == 4 {
                    Event::Cancelled {
                        by: format!("key-{}", r % 3),
                    }
                } else {
                    Event::Started {
                        execution: seq as u32,
                    }
                },
                origin: None,
            })
            .collect();
        store.append(&envelopes).expect("append");
        all.extend(envelopes.into_iter().map(|e| (team.to_string(), e)));
    }
    let audit = index.trees().audit;
    let mut rest = all.as_slice();
    for size in [1, 7, 130, 3, 64, 200].iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (batch, tail) = rest.split_at((*size).min(rest.len()));
        audit
            .insert_all(batch.iter().map(|(t, e)| (t.as_str(), e)))
            .expect("insert");
        rest = tail;
    }
    // A second write of some entries changes nothing.
    audit
        .insert_all(all[100..180].iter().map(|(t, e)| (t.as_str(), e)))
        .expect("insert again");
    let queries = [
        AuditQuery::default(),
        AuditQuery {
            team: Some("a".into()),
            ..AuditQuery::default()
        },
        AuditQuery {
            team: Some("b".into()),
            types: vec!["Cancelled".into()],
            ..AuditQuery::default()
        },
        AuditQuery {
            actor: Some("key-1".into()),
            since: Some(Timestamp(10_050)),
            until: Some(Timestamp(10_250)),
            ..AuditQuery::default()
        },
    ];
    for query in &queries {
        let mut expected: Vec<Position> = all
            .iter()
            .filter(|(team, e)| {
                let summary = crate::audit::summary(team, e);
                query.team.as_ref().is_none_or(|t| t == team)
                    && (query.types.is_empty() || query.types.contains(&summary.kind))
                    && query
                        .actor
                        .as_ref()
                        .is_none_or(|a| summary.actor.as_ref() == Some(a))
                    && query.since.is_none_or(|s| e.at >= s)
                    && query.until.is_none_or(|u| e.at < u)
            })
            .map(|(_, e)| Position::of(e))
            .collect();
        expected.sort();
        expected.reverse();
        assert!(expected.len() > 10, "{query:?} answers something");
        let mut paged = Vec::new();
        let mut cursor = None;
        loop {
            let page = index.audit_page(&store, query, cursor, 23).expect("page");
            paged.extend(page.items.iter().map(AuditItem::position));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(paged, expected, "{query:?} newest first");
        let after = expected[expected.len() / 2];
        let followed: Vec<Position> = index
            .audit_after(&store, query, after, Timestamp(u64::MAX - 1), 1_000)
            .expect("after")
            .iter()
            .map(AuditItem::position)
            .collect();
        let mut newer: Vec<Position> = expected.into_iter().filter(|p| *p > after).collect();
        newer.reverse();
        assert_eq!(followed, newer, "{query:?} oldest first after a position");
    }
}
