//! Who reaches what without a key of a run's team: `/metrics` only with the metrics token or
//! an admin key, and a run's `session_link` only until it expires or is revoked.

use crate::common;

use common::Server;
use serde_json::{json, Value};

/// The metrics token of the configs below, handed to the server through its environment.
const METRICS_TOKEN: &str = "m3trics-t0ken-0123456789abcdef";

fn config(server_extra: &str) -> String {
    format!(
        r#"
[server]
bind = "127.0.0.1:0"
{server_extra}

[secrets]
METRICS = {{ env = "RUNLEDGER_TEST_METRICS_TOKEN" }}

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 200
"#
    )
}

fn start(dir: &std::path::Path, server_extra: &str) -> Server {
    Server::start_with(
        dir,
        &config(server_extra),
        &[("RUNLEDGER_TEST_METRICS_TOKEN", METRICS_TOKEN.to_string())],
    )
}

/// `GET /metrics` with `authorization` as the whole header value (none when `None`): the
/// status, and the problem type's last segment for a problem or the first line of the exposition.
async fn scrape(s: &Server, authorization: Option<&str>) -> (u16, String) {
    let mut request = s.client.get(s.url("/metrics"));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let r = request.send().await.expect("scrape");
    let status = r.status().as_u16();
    let problem = r
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    let text = r.text().await.expect("text");
    if problem {
        let body: Value = serde_json::from_str(&text).expect("problem json");
        let kind = body["type"].as_str().unwrap_or_default();
        (
            status,
            kind.rsplit('/').next().unwrap_or_default().to_string(),
        )
    } else {
        (status, text.lines().next().unwrap_or_default().to_string())
    }
}

/// A key of the default team that is not an admin's.
async fn member_key(s: &Server) -> String {
    let (status, v) = s
        .post(&s.key, "/admin/keys", json!({"name": "member"}))
        .await;
    assert_eq!(status, 200, "{v}");
    v["key"].as_str().expect("key").to_string()
}

#[tokio::test]
async fn metrics_answer_only_the_metrics_token_and_admin_keys() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = start(tmp.path(), "metrics_token = \"METRICS\"");
    s.wait_ready().await;
    let member = member_key(&s).await;
    for (authorization, want) in [
        (None, 401),
        (Some("Bearer wrong-token-0123456789abcdef".to_string()), 401),
        // The token with one more character, and cut short: no prefix of it passes.
        (Some(format!("Bearer {METRICS_TOKEN}x")), 401),
        (
            Some(format!(
                "Bearer {}",
                &METRICS_TOKEN[..METRICS_TOKEN.len() - 1]
            )),
            401,
        ),
        // Not a bearer credential at all.
        (Some(format!("Basic {METRICS_TOKEN}")), 401),
        (Some(format!("Bearer {member}")), 403),
    ] {
        let (status, code) = scrape(&s, authorization.as_deref()).await;
        assert_eq!(status, want, "{authorization:?}: {code}");
        let expected = if want == 401 {
            "authentication_required"
        } else {
            "not_authorized"
        };
        assert_eq!(code, expected, "{authorization:?}");
    }
    // What Prometheus' `authorization: {type: Bearer, credentials_file: …}` sends.
    for authorization in [
        format!("Bearer {METRICS_TOKEN}"),
        format!("Bearer {}", s.key),
    ] {
        let (status, first) = scrape(&s, Some(&authorization)).await;
        assert_eq!(status, 200, "{first}");
        assert!(first.starts_with("# HELP runledger_"), "{first}");
    }
}

#[tokio::test]
async fn without_a_metrics_token_only_admin_keys_read_metrics() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = start(tmp.path(), "");
    s.wait_ready().await;
    let member = member_key(&s).await;
    assert_eq!(scrape(&s, None).await.0, 401);
    // The secret exists in [secrets] but is not the metrics token: it opens nothing.
    assert_eq!(
        scrape(&s, Some(&format!("Bearer {METRICS_TOKEN}"))).await.0,
        401
    );
    assert_eq!(scrape(&s, Some(&format!("Bearer {member}"))).await.0, 403);
    assert_eq!(scrape(&s, Some(&format!("Bearer {}", s.key))).await.0, 200);
}

/// Opens a session link on `s` (whatever address the server that handed it out had): its
/// status.
async fn open(s: &Server, link: &str) -> u16 {
    let path = &link[link.find("/sessions/").expect("a session link")..];
    s.client
        .get(s.url(path))
        .send()
        .await
        .expect("open link")
        .status()
        .as_u16()
}

/// The `session_link` of a run as a get answers it now.
async fn link_of(s: &Server, id: &str) -> String {
    let run = s.run(id).await;
    run["session_link"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_link: {run}"))
        .to_string()
}

/// A finished run of the default environment.
async fn finished_run(s: &Server, prompt: &str) -> String {
    let id = s.create(json!({ "prompt": prompt })).await;
    s.wait_state(&id, "SUCCEEDED").await;
    id
}

/// The `expires` of a link.
fn expires_of(link: &str) -> u64 {
    let query = link.split_once('?').expect("query").1;
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("expires="))
        .expect("expires")
        .parse()
        .expect("a number")
}

#[tokio::test]
async fn an_expired_session_link_answers_404_and_the_next_get_carries_a_fresh_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = start(tmp.path(), "session_link_ttl_secs = 2");
    s.wait_ready().await;
    let id = finished_run(&s, "expire me").await;
    let first = link_of(&s, &id).await;
    assert_eq!(open(&s, &first).await, 200, "{first}");
    // Polled rather than slept: the link is valid for 2 to 3 seconds after the get.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while open(&s, &first).await == 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "{first} never expired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(open(&s, &first).await, 404);
    let fresh = link_of(&s, &id).await;
    assert!(
        expires_of(&fresh) > expires_of(&first),
        "{first} then {fresh}"
    );
    assert_eq!(open(&s, &fresh).await, 200, "{fresh}");
}

#[tokio::test]
async fn a_revoked_session_link_answers_404_across_a_restart_and_the_new_one_opens() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut s = start(tmp.path(), "");
    s.wait_ready().await;
    let id = finished_run(&s, "revoke me").await;
    let other = finished_run(&s, "keep me").await;
    let old = link_of(&s, &id).await;
    let kept = link_of(&s, &other).await;
    assert_eq!(open(&s, &old).await, 200);

    // Another team's key cannot revoke (nor learn the run exists).
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
    let revoke = format!("/agent/runs/{id}/session-link/revoke");
    let (status, v) = s.post(&outsider, &revoke, json!({})).await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(
        open(&s, &old).await,
        200,
        "a refused revoke changes nothing"
    );

    // A member of the run's team revokes; the answer carries the new link.
    let member = member_key(&s).await;
    let (status, run) = s.post(&member, &revoke, json!({})).await;
    assert_eq!(status, 200, "{run}");
    let new = run["session_link"].as_str().expect("new link").to_string();
    assert_ne!(new, old);
    assert_eq!(open(&s, &old).await, 404, "the revoked link");
    assert!(new.contains("&epoch=1&"), "{new}");
    // The old link moved to the new epoch is no link: its token signs the old one.
    let moved = old.replace("&epoch=0&", "&epoch=1&");
    assert_eq!(open(&s, &moved).await, 404, "{moved}");
    assert_eq!(open(&s, &new).await, 200, "the new link");
    assert_eq!(
        link_of(&s, &id).await,
        new,
        "the next get carries the new link"
    );
    assert_eq!(
        open(&s, &kept).await,
        200,
        "another run's link is untouched"
    );
    // The audit trail names the key that revoked.
    let events = s.wait_events(&id, "SessionLinkRevoked", 1).await;
    let revoked = events
        .iter()
        .find(|e| e["type"] == "SessionLinkRevoked")
        .expect("event");
    let member_id = member.split('_').nth(1).unwrap_or_default();
    assert!(
        revoked["data"]["by"]
            .as_str()
            .is_some_and(|by| !by.is_empty()),
        "{revoked} ({member_id})"
    );

    // The revoke is in the log: a restart keeps the old link dead and the new one alive.
    let key = s.key.clone();
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 30).await;
    let mut s = start(tmp.path(), "");
    s.key = key;
    s.wait_ready().await;
    assert_eq!(
        open(&s, &old).await,
        404,
        "after the restart, the revoked link"
    );
    assert_eq!(open(&s, &new).await, 200, "after the restart, the new link");

    // The CLI revokes too, and prints the link that replaces the last one.
    let server = s.base.clone();
    let (ok, out, err) = common::cli(
        &["runs", "revoke-link", &id],
        &[("RUNLEDGER_SERVER", &server), ("RUNLEDGER_API_KEY", &s.key)],
    );
    assert!(ok, "{err}");
    let printed = out.trim();
    assert!(
        printed.contains(&format!("/sessions/{id}?expires=")),
        "{out}"
    );
    assert_eq!(open(&s, &new).await, 404, "revoked by the CLI");
    assert_eq!(open(&s, printed).await, 200, "the link the CLI printed");
}

#[tokio::test]
async fn a_link_opens_only_its_own_run_and_only_untampered() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = start(tmp.path(), "");
    s.wait_ready().await;
    let a = finished_run(&s, "run a").await;
    let b = finished_run(&s, "run b").await;
    let link = link_of(&s, &a).await;
    assert_eq!(open(&s, &link).await, 200);
    let (base, query) = link.split_once('?').expect("query");
    let expires = expires_of(&link);
    let token = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .expect("token");
    // Run A's query on run B's page.
    assert_eq!(
        open(&s, &format!("{}?{query}", base.replace(&a, &b))).await,
        404
    );
    // One hex digit of the token changed.
    let mut flipped = token.to_string();
    let last = if flipped.ends_with('0') { "1" } else { "0" };
    flipped.replace_range(flipped.len() - 1.., last);
    let page = |query: String| format!("{base}?{query}");
    // The genuine link rebuilt from its parts opens: the variants below differ in one part.
    let e = expires;
    assert_eq!(
        open(&s, &page(format!("expires={e}&epoch=0&token={token}"))).await,
        200
    );
    for tampered in [
        page(format!("expires={e}&epoch=0&token={flipped}")),
        // A later or earlier expiry, or another epoch, under the same token.
        page(format!("expires={}&epoch=0&token={token}", e + 86_400)),
        page(format!("expires={}&epoch=0&token={token}", e - 1)),
        page(format!("expires={e}&epoch=1&token={token}")),
        // Parts missing or doubled, and the earlier form of link.
        page(format!("token={token}")),
        page(format!("expires={e}&epoch=0")),
        page(format!("epoch=0&token={token}")),
        page(format!("expires={e}&token={token}")),
        page(format!("expires={e}&expires={e}&epoch=0&token={token}")),
        page(format!("expires={e}&epoch=0&epoch=0&token={token}")),
        page(format!("token={}", &token[..32])),
    ] {
        assert_eq!(open(&s, &tampered).await, 404, "{tampered}");
    }
    assert_eq!(open(&s, &link).await, 200, "the genuine link still opens");
}
