//! Who reaches what without a key of a run's team: `/metrics` only with the metrics token or
//! an admin key, and a run's `session_link` only until it expires or is revoked.

mod common;

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
