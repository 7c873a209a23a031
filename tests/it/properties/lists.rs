//! List queries: created-at bounds cut exactly, a cursor belongs to its query, a run changing state
//! during lists is never missed.

use super::support::*;
use proptest::prelude::*;
use runledger::domain::{RunId, RunState, Timestamp};
use runledger::projection::{Order, Query, SortBy};

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, .. ProptestConfig::default() })]

    /// A created-at list starts its walk at a creation bound (ids begin with the creation
    /// time): for a bound at, just before and just after every run's creation, in both orders
    /// and for every team, it returns exactly the runs within the bounds.
    #[test]
    fn created_bounds_cut_a_created_at_list_exactly(
        specs in proptest::collection::vec(run_spec(), 1..12),
        limit in 1usize..4,
    ) {
        let (_dir, store, index) = open();
        let live = populate(&store, &index, &specs);
        let mut bounds: Vec<u64> = live
            .iter()
            .flat_map(|r| [r.created_at.0 - 1, r.created_at.0, r.created_at.0 + 1])
            .collect();
        bounds.extend([0, u64::MAX, 1 << 48, (1 << 48) - 1]);
        for team in 0u8..3 {
            for &bound in &bounds {
                for (after, asc) in [(true, true), (true, false), (false, true), (false, false)] {
                    let query = Query {
                        team: team_name(team),
                        created_after: after.then_some(Timestamp(bound)),
                        created_before: (!after).then_some(Timestamp(bound)),
                        sort_by: SortBy::CreatedAt,
                        order: if asc { Order::Asc } else { Order::Desc },
                        limit,
                        ..Query::default()
                    };
                    let mut expected: Vec<RunId> = live
                        .iter()
                        .filter(|r| r.team == team_name(team))
                        .filter(|r| if after { r.created_at.0 > bound } else { r.created_at.0 < bound })
                        .map(|r| r.id)
                        .collect();
                    expected.sort();
                    if !asc {
                        expected.reverse();
                    }
                    let mut got = Vec::new();
                    let mut q = query.clone();
                    for _ in 0..100 {
                        let page = index.list(&q).expect("list");
                        got.extend(page.runs.into_iter().map(|r| r.id));
                        match page.next_cursor {
                            Some(c) => q.cursor = Some(c),
                            None => break,
                        }
                    }
                    prop_assert_eq!(got, expected, "{:?}", query);
                }
            }
        }
    }
}

#[test]
fn a_cursor_cannot_be_used_with_another_query() {
    let (_dir, store, index) = open();
    let specs: Vec<RunSpec> = (0..5)
        .map(|i| RunSpec {
            team: 0,
            name: Some(0),
            model: 0,
            env: 0,
            creator: 0,
            title: i,
            meta: None,
            schedule: None,
            steps: vec![],
        })
        .collect();
    populate(&store, &index, &specs);
    let query = Query {
        team: team_name(0),
        limit: 2,
        ..Query::default()
    };
    let page = index.list(&query).expect("list");
    let cursor = page.next_cursor.expect("more pages");
    let other = Query {
        team: team_name(0),
        limit: 2,
        cursor: Some(cursor),
        name: Some("name0".into()),
        ..Query::default()
    };
    assert!(index.list(&other).is_err());
}

/// SPEC: a run is listed as soon as its create call has returned — also while its state keeps
/// changing. sled iterators are not snapshots, so a run whose index entries move during a walk
/// could be missed; a list must never answer with such a torn walk.
#[test]
fn a_run_changing_state_during_lists_is_never_missed() {
    let (_dir, store, index) = open();
    let specs: Vec<RunSpec> = (0..3)
        .map(|i| RunSpec {
            team: 0,
            name: Some(i),
            model: 0,
            env: 0,
            creator: 0,
            title: i,
            meta: None,
            schedule: None,
            steps: vec![],
        })
        .collect();
    let live = populate(&store, &index, &specs);
    let moving = live[1].clone();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Every apply moves the run's updated_at (and so its entries) to a new position.
            let mut current = moving.clone();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut next = current.clone();
                next.updated_at = Timestamp(next.updated_at.0 + 1);
                next.state = if current.state == RunState::Queued {
                    RunState::InProgress
                } else {
                    RunState::Queued
                };
                index.apply(Some(&current), &next).expect("apply");
                current = next;
            }
        });
        let queries = [
            Query {
                team: team_name(0),
                q: Some(moving.title.clone()),
                limit: 20,
                ..Query::default()
            },
            Query {
                team: team_name(0),
                states: vec![RunState::Queued, RunState::InProgress],
                limit: 20,
                ..Query::default()
            },
        ];
        for i in 0..3000 {
            let query = &queries[i % queries.len()];
            let page = index.list(query).expect("list");
            let found = page.runs.iter().filter(|r| r.id == moving.id).count();
            if found != 1 {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                panic!("list {i} ({query:?}) returned the moving run {found} times");
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}
