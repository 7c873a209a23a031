//! Each filter of `GET /api/v1/audit/events`, paging with the cursor, the answer's shape (a
//! line of the run's events plus `team`), and team visibility: a key of one team never sees
//! another team's events, whatever it names.

use super::{audit, events, summary, world};
use crate::common::Server;

#[tokio::test]
async fn each_filter_answers_only_its_events_newest_first() {
    let s = Server::start();
    let w = world(&s).await;

    // Alice sees her team's runs only, newest first.
    let (status, all) = audit(&s, &w.alice, "").await;
    assert_eq!(status, 200, "{all}");
    let all_events = events(&all);
    assert!(all_events.iter().all(|e| e["team"] == "default"), "{all}");
    assert!(all_events
        .iter()
        .all(|e| e["run_id"] != w.b_cancelled.as_str()));
    let runs: std::collections::BTreeSet<&str> = all_events
        .iter()
        .map(|e| e["run_id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(runs, [w.a_done.as_str(), w.a_cancelled.as_str()].into());
    let times: Vec<&str> = all_events
        .iter()
        .map(|e| e["at"].as_str().unwrap_or(""))
        .collect();
    assert!(
        times.windows(2).all(|p| p[0] >= p[1]),
        "newest first: {times:?}"
    );
    assert_eq!(all["page_info"]["has_next_page"], false);

    // Each item is the run's own event line, plus its team.
    let (_, history) = s
        .get(
            &w.alice.secret,
            &format!("/agent/runs/{}/events", w.a_cancelled),
        )
        .await;
    let mut theirs: Vec<serde_json::Value> = all_events
        .iter()
        .filter(|e| e["run_id"] == w.a_cancelled.as_str())
        .cloned()
        .map(|mut e| {
            e.as_object_mut().expect("object").remove("team");
            e
        })
        .collect();
    theirs.reverse();
    assert_eq!(&theirs, history["events"].as_array().expect("events"));

    // type, repeatable.
    let (_, v) = audit(&s, &w.alice, "type=Cancelled").await;
    assert_eq!(
        summary(&v),
        vec![(w.a_cancelled.clone(), "Cancelled".into())]
    );
    let (_, v) = audit(&s, &w.alice, "type=Cancelled&type=Created").await;
    assert_eq!(
        summary(&v),
        vec![
            (w.a_cancelled.clone(), "Cancelled".into()),
            (w.a_cancelled.clone(), "Created".into()),
            (w.a_done.clone(), "Created".into()),
        ]
    );
    // actor: the creations are Alice's, the cancel the admin key's.
    let (_, v) = audit(&s, &w.alice, &format!("actor={}", w.alice.id)).await;
    assert_eq!(
        summary(&v),
        vec![
            (w.a_cancelled.clone(), "Created".into()),
            (w.a_done.clone(), "Created".into()),
        ]
    );
    let (_, v) = audit(&s, &w.alice, &format!("actor={}", w.admin.id)).await;
    assert_eq!(
        summary(&v),
        vec![(w.a_cancelled.clone(), "Cancelled".into())]
    );
    // run_id.
    let (_, v) = audit(&s, &w.alice, &format!("run_id={}", w.a_done)).await;
    assert!(!events(&v).is_empty());
    assert!(events(&v).iter().all(|e| e["run_id"] == w.a_done.as_str()));
    assert!(summary(&v).contains(&(w.a_done.clone(), "Succeeded".into())));
    // since and until.
    let (_, v) = audit(&s, &w.alice, "since=2999-01-01T00:00:00Z").await;
    assert!(events(&v).is_empty());
    let (_, v) = audit(&s, &w.alice, "until=1971-01-01T00:00:00Z").await;
    assert!(events(&v).is_empty());
    let newest = all_events[0]["at"].as_str().expect("at").to_string();
    let (_, v) = audit(&s, &w.alice, &format!("since={newest}")).await;
    assert_eq!(events(&v)[0], all_events[0]);
    let (_, v) = audit(&s, &w.alice, &format!("until={newest}")).await;
    assert!(
        !events(&v).contains(&all_events[0]),
        "until excludes its time"
    );

    // Malformed values are refused, naming the parameter.
    for (query, field) in [
        ("since=yesterday", "since"),
        ("until=2026-13-40T00:00:00Z", "until"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("cursor=nope", "cursor"),
        ("run_id=nope", "run_id"),
        ("typo=1", "typo"),
    ] {
        let (status, v) = audit(&s, &w.alice, query).await;
        assert_eq!(status, 400, "{query}: {v}");
        assert!(
            v["detail"].as_str().unwrap_or("").contains(field),
            "{query}: {v}"
        );
    }
}

#[tokio::test]
async fn a_key_never_sees_another_teams_events_and_an_admin_key_sees_all() {
    let s = Server::start();
    let w = world(&s).await;

    // Alice (team default) names Bob's run, Bob's team, Bob's key: nothing of team b.
    let (status, v) = audit(&s, &w.alice, &format!("run_id={}", w.b_cancelled)).await;
    assert_eq!(
        status, 404,
        "another team's run is one that does not exist: {v}"
    );
    let (status, v) = audit(&s, &w.alice, "team=b").await;
    assert_eq!(status, 403, "{v}");
    let (status, v) = audit(&s, &w.alice, &format!("actor={}", w.bob.id)).await;
    assert_eq!(status, 200, "{v}");
    assert!(events(&v).is_empty(), "{v}");
    let (_, v) = audit(&s, &w.alice, "type=Cancelled&limit=1000").await;
    assert!(events(&v).iter().all(|e| e["team"] == "default"), "{v}");
    // Bob sees his team's run only.
    let (_, v) = audit(&s, &w.bob, "").await;
    assert!(!events(&v).is_empty());
    assert!(
        events(&v)
            .iter()
            .all(|e| e["run_id"] == w.b_cancelled.as_str() && e["team"] == "b"),
        "{v}"
    );
    let (status, _) = audit(&s, &w.bob, &format!("run_id={}", w.a_done)).await;
    assert_eq!(status, 404);

    // The admin key sees both teams, and narrows to one with `team`.
    let (_, v) = audit(&s, &w.admin, "type=Cancelled").await;
    let mut cancelled: Vec<String> = summary(&v).into_iter().map(|(run, _)| run).collect();
    cancelled.sort();
    let mut want = vec![w.a_cancelled.clone(), w.b_cancelled.clone()];
    want.sort();
    assert_eq!(cancelled, want);
    let (_, v) = audit(&s, &w.admin, "team=b&type=Cancelled").await;
    assert_eq!(
        summary(&v),
        vec![(w.b_cancelled.clone(), "Cancelled".into())]
    );
    let (status, v) = audit(&s, &w.admin, &format!("run_id={}", w.b_cancelled)).await;
    assert_eq!(status, 200, "{v}");
    assert!(!events(&v).is_empty());

    // Pages of two, followed by their cursor, are the whole answer.
    let (_, whole) = audit(&s, &w.admin, "limit=1000").await;
    let whole = events(&whole);
    assert!(whole.len() > 4, "{whole:?}");
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(c) => format!("limit=2&cursor={c}"),
            None => "limit=2".to_string(),
        };
        let (status, page) = audit(&s, &w.admin, &query).await;
        assert_eq!(status, 200, "{page}");
        let got = events(&page);
        assert!(got.len() <= 2);
        paged.extend(got);
        match page["page_info"]["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(page["page_info"]["has_next_page"], true);
                cursor = Some(next.to_string());
            }
            None => break,
        }
    }
    assert_eq!(paged, whole);
}
