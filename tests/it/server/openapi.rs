//! The OpenAPI document describes every route the server answers, each behind the key.

use crate::common;
use common::Server;
use serde_json::Value;

/// The OpenAPI document lists exactly the routes the server serves, each one routed (never the
/// fallback's 404 or a 405), each `/api/v1` operation behind the bearer key.
#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let s = Server::start();
    s.wait_ready().await;
    let r = s
        .client
        .get(s.url("/openapi.json"))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let doc: Value = r.json().await.expect("json");
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            documented.push(format!("{} {path}", method.to_uppercase()));
            let responses = operation["responses"].as_object().expect("responses");
            if path.starts_with("/api/v1/") {
                // The redirect checks, which the current clients call without a key, take one
                // optionally.
                let security = if path.ends_with("/redirect") {
                    serde_json::json!([{}, {"bearerAuth": []}])
                } else {
                    serde_json::json!([{"bearerAuth": []}])
                };
                assert_eq!(operation["security"], security, "{method} {path}");
                assert!(responses.contains_key("401"), "{method} {path}");
            }
            for (status, response) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    let reference = response["$ref"].as_str().map(str::to_string);
                    let media = match reference {
                        Some(r) => {
                            let name = r.rsplit('/').next().expect("name");
                            doc["components"]["responses"][name]["content"].clone()
                        }
                        None => response["content"].clone(),
                    };
                    assert!(
                        media.get("application/problem+json").is_some(),
                        "{method} {path} {status}: {media}"
                    );
                }
            }
        }
    }
    documented.sort();
    let mut served = vec![
        "GET /api/v1/admin/keys",
        "POST /api/v1/admin/keys",
        "POST /api/v1/admin/keys/{key_id}/revoke",
        "GET /api/v1/admin/teams",
        "POST /api/v1/admin/teams",
        "GET /api/v1/admin/export",
        "GET /api/v1/audit/events",
        "GET /api/v1/audit/admin",
        "GET /api/v1/agent",
        "GET /api/v1/agent/events",
        "POST /api/v1/agent/events/{runId}",
        "POST /api/v1/agent/messages",
        "GET /api/v1/agent/messages/{runId}",
        "POST /api/v1/agent/messages/{messageId}/read",
        "POST /api/v1/agent/messages/{messageId}/delivered",
        "GET /api/v1/agent/models",
        "GET /api/v1/agent/conversations/{conversation_id}",
        "GET /api/v1/agent/conversations/{conversation_id}/redirect",
        "GET /api/v1/agent/sessions/{session_uuid}/redirect",
        "GET /api/v1/agent/identities",
        "POST /api/v1/agent/identities",
        "GET /api/v1/agent/identities/{uid}",
        "PUT /api/v1/agent/identities/{uid}",
        "DELETE /api/v1/agent/identities/{uid}",
        "POST /api/v1/agent/runs/{run_id}/session-link/revoke",
        "GET /api/v1/agent/runs/{run_id}/conversation",
        "GET /api/v1/agent/runs/{run_id}/handoff/attachments",
        "GET /api/v1/agent/environments",
        "GET /api/v1/agent/artifacts/{artifactUid}",
        "GET /artifacts/{artifactUid}/download",
        "POST /api/v1/agent/run",
        "GET /api/v1/agent/runs",
        "POST /api/v1/agent/runs",
        "GET /api/v1/agent/runs/{run_id}",
        "POST /api/v1/agent/runs/{run_id}/cancel",
        "POST /api/v1/agent/runs/{run_id}/rerun",
        "GET /api/v1/agent/runs/{run_id}/deliveries",
        "GET /api/v1/agent/runs/{run_id}/events",
        "GET /api/v1/agent/runs/{run_id}/export",
        "GET /api/v1/agent/runs/{run_id}/changes",
        "GET /api/v1/agent/runs/{run_id}/proof",
        "GET /api/v1/agent/runs/{run_id}/states",
        "POST /api/v1/agent/runs/{run_id}/followups",
        "POST /api/v1/agent/runs/{run_id}/fork",
        "GET /api/v1/agent/runs/{run_id}/transcript",
        "GET /api/v1/agent/runs/{run_id}/steps",
        "GET /api/v1/agent/schedules",
        "POST /api/v1/agent/schedules",
        "GET /api/v1/agent/schedules/{schedule_id}",
        "PUT /api/v1/agent/schedules/{schedule_id}",
        "DELETE /api/v1/agent/schedules/{schedule_id}",
        "POST /api/v1/agent/schedules/{schedule_id}/pause",
        "POST /api/v1/agent/schedules/{schedule_id}/resume",
        "GET /healthz",
        "GET /metrics",
        "GET /openapi.json",
        "GET /readyz",
        "GET /sessions/{run_id}",
    ];
    served.sort();
    assert_eq!(documented, served);
    for route in &documented {
        let (method, path) = route.split_once(' ').expect("route");
        let url = s.url(
            &path
                .replace("{run_id}", "01M808HFKP3VA5PZ8KKNFW4921")
                .replace("{schedule_id}", "01M808HFKP3VA5PZ8KKNFW4921")
                .replace("{key_id}", "no-such-key"),
        );
        let request = match method {
            "GET" => s.client.get(url),
            "PUT" => s.client.put(url).body("{}"),
            "DELETE" => s.client.delete(url),
            _ => s.client.post(url).body("{}"),
        };
        let r = request.bearer_auth(&s.key).send().await.expect("req");
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_ne!(status, 405, "{route}: {body}");
        assert_ne!(body["detail"], "no such route", "{route}");
    }
}
