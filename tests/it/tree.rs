//! Parent and child runs (issue #41, items 1 and 7), through the real binary: `parent_run_id`
//! on create is recorded (`Parented`) and returned on GET and in lists, the list's
//! `ancestor_run_id` filter finds descendants at any depth, an unknown or another team's
//! parent is refused naming the field, `max_depth` and `max_children` refuse with a 422
//! naming the limit (also when creates race), a cancel cascades to the unfinished
//! descendants unless `{"cascade": false}`, runs without a parent record nothing new, and
//! `runledger runs tree` prints the tree.

use std::collections::BTreeSet;

use crate::common;

use common::{cli, Server};
use serde_json::{json, Value};

/// A slow environment (runs stay unfinished while the test looks at them), a fast one, and
/// one whose runs may have at most two children each; trees at most three deep.
const CONFIG: &str = r#"
[server]
bind = "127.0.0.1:0"

[limits]
max_depth = 3

[[environments]]
id = "slow"
harness = "demo"
demo_duration_ms = 60000

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 50

[[environments]]
id = "narrow"
harness = "demo"
demo_duration_ms = 60000
max_children = 2
"#;

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    (dir, server)
}

/// Creates a run in `env` with `parent` (if any) as the admin key: (status, answer).
async fn create(s: &Server, env: &str, parent: Option<&str>) -> (u16, Value) {
    let mut body = json!({"prompt": "work", "config": {"environment_id": env}});
    if let Some(parent) = parent {
        body["parent_run_id"] = json!(parent);
    }
    s.post(&s.key, "/agent/runs", body).await
}

async fn child(s: &Server, env: &str, parent: &str) -> String {
    let (status, v) = create(s, env, Some(parent)).await;
    assert_eq!(status, 200, "{v}");
    v["run_id"].as_str().expect("run_id").to_string()
}

/// The ids a list answers for `query`.
async fn listed(s: &Server, key: &str, query: &str) -> (u16, BTreeSet<String>, Value) {
    let (status, page) = s.get(key, &format!("/agent/runs?{query}")).await;
    let ids = page["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["run_id"].as_str().map(str::to_string))
        .collect();
    (status, ids, page)
}

fn set(ids: &[&String]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn a_parent_is_recorded_returned_and_its_descendants_listed_at_any_depth() {
    let (_dir, s) = start();
    let root = s
        .create(json!({"prompt": "root", "config": {"environment_id": "slow"}}))
        .await;
    let a = child(&s, "slow", &root).await;
    let b = child(&s, "slow", &a).await;
    // Any case of the id names the same parent, through the other create endpoint too.
    let (status, v) = s
        .post(
            &s.key,
            "/agent/run",
            json!({"prompt": "c", "config": {"environment_id": "slow"},
                   "parent_run_id": b.to_ascii_lowercase()}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let c = v["run_id"].as_str().expect("run_id").to_string();

    // GET returns the parent; the root has none (and no field at all).
    assert_eq!(s.run(&c).await["parent_run_id"], b.as_str());
    assert_eq!(s.run(&a).await["parent_run_id"], root.as_str());
    let root_run = s.run(&root).await;
    assert!(root_run.get("parent_run_id").is_none(), "{root_run}");

    // The child's log records its parent and the line above it, right after its admission;
    // the root's log holds nothing new.
    let events = s.events(&c).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds[..2], ["Created", "Parented"], "{kinds:?}");
    assert_eq!(
        events[1]["data"],
        json!({"parent_run_id": b, "ancestor_run_ids": [a, root]})
    );
    let root_events = s.events(&root).await;
    assert!(
        root_events.iter().all(|e| e["type"] != "Parented"),
        "{root_events:?}"
    );
    assert_eq!(root_events[0]["type"], "Created");
    assert_eq!(root_events[1]["type"], "Started", "{root_events:?}");

    // The ancestor filter: every depth below the run, nothing above or beside it.
    let unrelated = s
        .create(json!({"prompt": "other", "config": {"environment_id": "slow"}}))
        .await;
    let (status, ids, page) = listed(&s, &s.key, &format!("ancestor_run_id={root}")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids, set(&[&a, &b, &c]));
    let (_, ids, _) = listed(&s, &s.key, &format!("ancestor_run_id={a}")).await;
    assert_eq!(ids, set(&[&b, &c]));
    let (_, ids, _) = listed(&s, &s.key, &format!("ancestor_run_id={c}")).await;
    assert!(ids.is_empty());
    let (_, ids, _) = listed(
        &s,
        &s.key,
        &format!("ancestor_run_id={}", root.to_ascii_lowercase()),
    )
    .await;
    assert_eq!(ids.len(), 3);
    // With other filters, and paged one by one: each descendant exactly once.
    let (_, ids, _) = listed(
        &s,
        &s.key,
        &format!("ancestor_run_id={root}&state=QUEUED&state=INPROGRESS"),
    )
    .await;
    assert_eq!(ids.len(), 3);
    let mut paged = BTreeSet::new();
    let mut cursor = String::new();
    loop {
        let (status, ids, page) = listed(
            &s,
            &s.key,
            &format!("ancestor_run_id={root}&limit=1{cursor}"),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(ids.len(), 1);
        assert!(paged.insert(ids.into_iter().next().expect("one")));
        match page["page_info"]["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(paged, set(&[&a, &b, &c]));
    // Each listed run carries its parent.
    let (_, _, page) = listed(&s, &s.key, &format!("ancestor_run_id={a}")).await;
    for run in page["runs"].as_array().expect("runs") {
        let parent = if run["run_id"] == b.as_str() { &a } else { &b };
        assert_eq!(run["parent_run_id"], parent.as_str(), "{run}");
    }
    // The unfiltered list still lists every run, roots without the field.
    let (_, ids, page) = listed(&s, &s.key, "limit=100").await;
    assert!(ids.contains(&unrelated) && ids.contains(&c));
    let listed_root = page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["run_id"] == root.as_str())
        .expect("root listed");
    assert!(listed_root.get("parent_run_id").is_none());

    // c is at depth 3, this environment's max_depth: a child of c is refused naming it.
    let (status, v) = create(&s, "slow", Some(&c)).await;
    assert_eq!(status, 422, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .expect("detail")
            .starts_with("max_depth"),
        "{v}"
    );
    let (_, ids, _) = listed(&s, &s.key, &format!("ancestor_run_id={root}")).await;
    assert_eq!(ids.len(), 3, "the refused create made no run");

    // `runledger runs tree`: the tree drawn, and as JSON.
    let home = tempfile::tempdir().expect("config home");
    let home = home.path().to_str().expect("utf-8");
    let env = [
        ("RUNLEDGER_SERVER", s.base.as_str()),
        ("RUNLEDGER_API_KEY", s.key.as_str()),
        ("XDG_CONFIG_HOME", home),
    ];
    let (ok, out, err) = cli(&["runs", "tree", &root], &env);
    assert!(ok, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with(&format!("{root}  ")), "{out}");
    assert!(lines[1].starts_with(&format!("└── {a}  ")), "{out}");
    assert!(lines[2].starts_with(&format!("    └── {b}  ")), "{out}");
    assert!(lines[3].starts_with(&format!("        └── {c}  ")), "{out}");
    let (ok, out, err) = cli(&["runs", "tree", &a, "--json"], &env);
    assert!(ok, "{out}{err}");
    let tree: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(tree["run"]["run_id"], a.as_str());
    assert_eq!(tree["descendants"].as_array().expect("array").len(), 2);

    // The console's run page shows the parent and the children with their states.
    let page = console_run_page(&s, &a).await;
    assert!(page.contains("Parent and children"), "{page}");
    assert!(page.contains(&format!("href=\"/runs/{root}\"")), "{page}");
    assert!(page.contains(&format!("href=\"/runs/{b}\"")), "{page}");
    assert!(page.contains("Children (1)"), "{page}");
    let page = console_run_page(&s, &unrelated).await;
    assert!(!page.contains("Parent and children"));
}

/// The console's page of run `id`, signed in with the admin key.
async fn console_run_page(s: &Server, id: &str) -> String {
    use reqwest::header::COOKIE;
    let c = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let page = c.get(s.url("/signin")).send().await.expect("signin");
    let token = cookie(&page, "runledger_signin");
    let signed_in = c
        .post(s.url("/signin"))
        .header(COOKIE, format!("runledger_signin={token}"))
        .form(&[("token", token.as_str()), ("key", s.key.as_str())])
        .send()
        .await
        .expect("post signin");
    assert_eq!(signed_in.status(), 303);
    let session = format!(
        "runledger_session={}",
        cookie(&signed_in, "runledger_session")
    );
    let page = c
        .get(s.url(&format!("/runs/{id}")))
        .header(COOKIE, &session)
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    page.text().await.expect("text")
}

/// The value of cookie `name` an answer sets.
fn cookie(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .and_then(|rest| rest.split(';').next())
        .expect("cookie")
        .to_string()
}

#[tokio::test]
async fn an_unknown_or_another_teams_parent_or_ancestor_is_refused_naming_the_field() {
    let (_dir, s) = start();
    let (status, v) = s
        .post(&s.key, "/admin/teams", json!({"name": "infra"}))
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = s
        .post(
            &s.key,
            "/admin/keys",
            json!({"name": "ops", "team": "infra"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let outsider = v["key"].as_str().expect("key").to_string();
    let theirs = s
        .create(json!({"prompt": "ours", "config": {"environment_id": "slow"}}))
        .await;

    let missing = "01KAAAAAAAAAAAAAAAAAAAAAAA";
    let long = "x".repeat(100_000);
    for parent in [json!(missing), json!("not-a-run"), json!(long), json!("")] {
        let (status, v) = s
            .post(
                &s.key,
                "/agent/runs",
                json!({"prompt": "p", "parent_run_id": parent}),
            )
            .await;
        assert_eq!(status, 400, "{v}");
        assert!(
            v["type"]
                .as_str()
                .expect("type")
                .ends_with("/invalid_request"),
            "{v}"
        );
        let detail = v["detail"].as_str().expect("detail");
        assert!(detail.starts_with("parent_run_id"), "{detail}");
        assert!(
            detail.len() < 200,
            "the value is not echoed whole: {detail}"
        );
    }
    // Not a string: refused by type (as every field of a create is).
    let (status, v) = s
        .post(
            &s.key,
            "/agent/runs",
            json!({"prompt": "p", "parent_run_id": 7}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    // Another team's run is answered exactly as a missing one.
    let (status, v) = s
        .post(
            &outsider,
            "/agent/runs",
            json!({"prompt": "p", "parent_run_id": theirs}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(
        v["detail"],
        format!("parent_run_id: no run with id {theirs}")
    );
    let (status, v) = s
        .post(
            &s.key,
            "/agent/runs",
            json!({"prompt": "p", "parent_run_id": missing}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        v["detail"],
        format!("parent_run_id: no run with id {missing}")
    );
    // The list's ancestor filter: the same rule.
    for (key, ancestor) in [
        (&outsider, theirs.as_str()),
        (&s.key, missing),
        (&s.key, "nope"),
    ] {
        let (status, _, v) = listed(&s, key, &format!("ancestor_run_id={ancestor}")).await;
        assert_eq!(status, 400, "{v}");
        assert!(
            v["detail"]
                .as_str()
                .expect("detail")
                .starts_with("ancestor_run_id"),
            "{v}"
        );
    }
    // Nothing was created by the refusals.
    let (_, ids, _) = listed(&s, &s.key, "limit=100").await;
    assert_eq!(ids, set(&[&theirs]));
}

#[tokio::test]
async fn max_children_refuses_a_child_beyond_it_even_when_creates_race() {
    let (_dir, s) = start();
    let parent = s
        .create(json!({"prompt": "p", "config": {"environment_id": "slow"}}))
        .await;
    child(&s, "narrow", &parent).await;
    child(&s, "narrow", &parent).await;
    let (status, v) = create(&s, "narrow", Some(&parent)).await;
    assert_eq!(status, 422, "{v}");
    let detail = v["detail"].as_str().expect("detail");
    assert!(detail.starts_with("max_children"), "{detail}");
    assert!(detail.contains(&parent), "{detail}");
    // In another environment (the default limit, 100), the same parent takes more.
    child(&s, "slow", &parent).await;

    // Eight creates at once under a fresh parent: exactly two are admitted.
    let other = s
        .create(json!({"prompt": "q", "config": {"environment_id": "slow"}}))
        .await;
    let answers =
        futures_util::future::join_all((0..8).map(|_| create(&s, "narrow", Some(&other)))).await;
    let admitted = answers.iter().filter(|(status, _)| *status == 200).count();
    let refused = answers.iter().filter(|(status, _)| *status == 422).count();
    assert_eq!((admitted, refused), (2, 6), "{answers:?}");
    let (_, ids, _) = listed(&s, &s.key, &format!("ancestor_run_id={other}")).await;
    assert_eq!(ids.len(), 2);
}

#[tokio::test]
async fn a_cancel_cascades_to_unfinished_descendants_unless_told_not_to() {
    let (_dir, s) = start();
    let root = s
        .create(json!({"prompt": "root", "config": {"environment_id": "slow"}}))
        .await;
    let a = child(&s, "slow", &root).await;
    let b = child(&s, "slow", &a).await;
    let done = child(&s, "fast", &root).await;
    s.wait_state(&done, "SUCCEEDED").await;
    s.wait_state(&b, "INPROGRESS").await;

    let (status, v) = s
        .post(
            &s.key,
            &format!("/agent/runs/{root}/cancel"),
            json!({"reason": "wrong plan"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    for id in [&root, &a, &b] {
        s.wait_state(id, "CANCELLED").await;
    }
    assert_eq!(
        s.run(&done).await["state"],
        "SUCCEEDED",
        "a finished one stays"
    );
    // Each descendant's cancel names the ancestor's cancel as its cause, with the caller's
    // key and reason.
    for id in [&a, &b] {
        let events = s.events(id).await;
        let cancelled = events
            .iter()
            .find(|e| e["type"] == "Cancelled")
            .expect("Cancelled");
        let origin = &cancelled["origin"];
        assert_eq!(
            origin["cause"],
            format!("cascade: its ancestor run {root} was cancelled"),
            "{origin}"
        );
        assert_eq!(origin["reason"], "wrong plan", "{origin}");
        assert_eq!(origin["channel"], "api", "{origin}");
    }
    let events = s.events(&root).await;
    let cancelled = events
        .iter()
        .find(|e| e["type"] == "Cancelled")
        .expect("Cancelled");
    assert!(cancelled["origin"].get("cause").is_none(), "{cancelled}");
    // A cancelled run takes no more children.
    let (status, v) = create(&s, "slow", Some(&root)).await;
    assert_eq!(status, 422, "{v}");
    assert!(v["detail"]
        .as_str()
        .expect("detail")
        .starts_with("parent_run_id"));

    // `{"cascade": false}`: the children keep running.
    let root = s
        .create(json!({"prompt": "root 2", "config": {"environment_id": "slow"}}))
        .await;
    let kept = child(&s, "slow", &root).await;
    let (status, v) = s
        .post(
            &s.key,
            &format!("/agent/runs/{root}/cancel"),
            json!({"cascade": false}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    s.wait_state(&root, "CANCELLED").await;
    let state = s.run(&kept).await["state"].clone();
    assert!(state == "QUEUED" || state == "INPROGRESS", "{state}");
    // A cascade value that is no boolean is refused, and cancels nothing.
    let (status, v) = s
        .post(
            &s.key,
            &format!("/agent/runs/{kept}/cancel"),
            json!({"cascade": "no"}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    // Through the CLI, without cascade.
    let grandchild = child(&s, "slow", &kept).await;
    let home = tempfile::tempdir().expect("config home");
    let home = home.path().to_str().expect("utf-8");
    let env = [
        ("RUNLEDGER_SERVER", s.base.as_str()),
        ("RUNLEDGER_API_KEY", s.key.as_str()),
        ("XDG_CONFIG_HOME", home),
    ];
    let (ok, out, err) = cli(&["runs", "cancel", &kept, "--no-cascade"], &env);
    assert!(ok, "{out}{err}");
    s.wait_state(&kept, "CANCELLED").await;
    let state = s.run(&grandchild).await["state"].clone();
    assert!(state == "QUEUED" || state == "INPROGRESS", "{state}");
    let (ok, out, err) = cli(&["runs", "cancel", &grandchild], &env);
    assert!(ok, "{out}{err}");
    s.wait_state(&grandchild, "CANCELLED").await;
}
