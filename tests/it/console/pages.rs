//! Console pages: hostile text shown as text, only the key's team's runs, filters, paging and bad
//! filters.

use super::support::*;
use crate::common;
use common::Server;
use serde_json::json;

#[tokio::test]
async fn pages_show_hostile_text_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let title = "<script>alert('title')</script>";
    let prompt = "\"><img src=x onerror=alert(1)> & </pre><script>alert(2)</script>";
    let (status, run) = server
        .post(
            &server.key,
            "/agent/runs",
            json!({"title": title, "prompt": prompt, "config": {"environment_id": "fast"},
                   "metadata": {"k": "<b>v</b>"}}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let id = run["run_id"].as_str().expect("id");
    let session = sign_in(&server, &server.key).await;
    for path in [
        "/runs".to_string(),
        format!("/runs/{id}"),
        format!("/runs?q={}", "%3Cscript%3E\"x"),
    ] {
        let (status, html) = get(&server, &session, &path).await;
        assert_eq!(status, 200, "{path}");
        assert!(!html.contains("<script>alert"), "{path}: {html}");
        assert!(!html.contains("<img src=x"), "{path}");
        assert!(!html.contains("<b>v</b>"), "{path}");
        assert!(!html.contains("\"x\""), "{path}");
        if path.starts_with("/runs?") {
            assert!(html.contains("value=\"&lt;script&gt;&quot;x\""), "{html}");
        } else {
            assert!(
                html.contains("&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;"),
                "{path}"
            );
        }
    }
    let (_, html) = get(&server, &session, &format!("/runs/{id}")).await;
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt; &amp; &lt;/pre&gt;"));
    // A hostile run id in the path is neither echoed raw nor a server error.
    let (status, html) = get(
        &server,
        &session,
        "/runs/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    )
    .await;
    assert_eq!(status, 404);
    assert!(!html.contains("<script>alert"), "{html}");
}

#[tokio::test]
async fn a_key_sees_only_its_teams_runs_in_the_console() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let (status, team) = server
        .post(&server.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201, "{team}");
    let (bob, _) = make_key(&server, "bob", "infra", false).await;
    let (status, run) = server
        .post(
            &server.key,
            "/agent/runs",
            json!({"title": "default's secret", "prompt": "p"}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let theirs = run["run_id"].as_str().expect("id").to_string();
    let (status, run) = server
        .post(
            &bob,
            "/agent/runs",
            json!({"title": "infra's own", "prompt": "p"}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let own = run["run_id"].as_str().expect("id").to_string();

    let session = sign_in(&server, &bob).await;
    let (status, html) = get(&server, &session, "/runs").await;
    assert_eq!(status, 200);
    assert!(
        html.contains(&own) && html.contains("infra&#39;s own"),
        "{html}"
    );
    assert!(
        !html.contains(&theirs) && !html.contains("secret"),
        "{html}"
    );
    let (status, html) = get(&server, &session, &format!("/runs/{theirs}")).await;
    assert_eq!(status, 404);
    assert!(!html.contains("secret"), "{html}");
    assert_eq!(get(&server, &session, &format!("/runs/{own}")).await.0, 200);
    // Through the API with the cookie, the same.
    let (status, _) = get(&server, &session, &format!("/api/v1/agent/runs/{theirs}")).await;
    assert_eq!(status, 404);
    // A non-admin key has no keys page, and the API refuses it the admin calls.
    assert_eq!(get(&server, &session, "/keys").await.0, 403);
    assert_eq!(get(&server, &session, "/api/v1/admin/keys").await.0, 403);
    let (_, html) = get(&server, &session, "/runs").await;
    assert!(
        !html.contains("href=\"/keys\""),
        "no Keys link for a non-admin key"
    );
}

#[tokio::test]
async fn filters_page_and_bad_filters_say_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    for i in 0..25 {
        let env = if i % 5 == 0 { "slow" } else { "fast" };
        let (status, v) = server
            .post(
                &server.key,
                "/agent/runs",
                json!({"title": format!("run {i}"), "prompt": "p", "config": {"environment_id": env}}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let session = sign_in(&server, &server.key).await;
    // By creation time: the fast runs' finishing does not move them between pages.
    let (status, html) = get(&server, &session, "/runs?sort_by=created_at").await;
    assert_eq!(status, 200);
    assert_eq!(html.matches("<tr data-run=").count(), 20);
    let next = html
        .split("id=\"next-page\" rel=\"next\" href=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("next page link")
        .replace("&amp;", "&");
    let (status, html) = get(&server, &session, &next).await;
    assert_eq!(status, 200);
    assert_eq!(html.matches("<tr data-run=").count(), 5);
    assert!(html.contains(">First page</a>"));

    let (status, html) = get(&server, &session, "/runs?environment_id=slow&limit=50").await;
    assert_eq!(status, 200);
    assert_eq!(html.matches("<tr data-run=").count(), 5);
    assert!(html.contains("id=\"f-env\" name=\"environment_id\" list=\"f-envs\" value=\"slow\""));

    let (status, html) = get(&server, &session, "/runs?q=no-such-run-anywhere").await;
    assert_eq!(status, 200);
    assert!(html.contains("No runs match these filters"), "{html}");
    assert!(!html.contains("id=\"runs-empty\" class=\"empty\" hidden"));

    let (status, html) = get(&server, &session, "/runs?created_after=yesterday").await;
    assert_eq!(status, 400);
    assert!(html.contains("These filters cannot be applied"), "{html}");
    assert!(html.contains("created_after"), "{html}");
}
