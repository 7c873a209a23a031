//! The admin audit log of a running server: the acts of the admin API with their actor
//! context, the server's own start and stop, `GET /api/v1/audit/admin`'s filters and paging,
//! its refusal of every key that is not an admin's, and `runledger audit --admin`.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::{cli, Server, CONFIG};
use runledger::store::{ChainCheck, Store};

/// Sends an admin act with a user agent of its own; returns its status, body and request id.
async fn act(s: &Server, key: &str, path: &str, body: Value) -> (u16, Value, String) {
    let r = s
        .client
        .post(s.api(path))
        .bearer_auth(key)
        .header("user-agent", "audit-test/1")
        .json(&body)
        .send()
        .await
        .expect("request");
    let id = r.headers()["x-request-id"]
        .to_str()
        .expect("id")
        .to_string();
    (r.status().as_u16(), r.json().await.expect("json"), id)
}

async fn page(s: &Server, key: &str, query: &str) -> (u16, Value) {
    s.get(key, &format!("/audit/admin{query}")).await
}

fn types(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["type"].as_str().expect("type").to_string())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn every_admin_act_is_recorded_with_who_did_it_and_read_only_by_admins() {
    let mut s = Server::start();
    let admin = s.key.clone();
    let (_, keys) = s.get(&admin, "/admin/keys").await;
    let admin_id = keys["keys"][0]["id"].as_str().expect("id").to_string();
    let digest = hex(&Sha256::digest(CONFIG.as_bytes()));

    // The first start: the server made the first key itself, then recorded its start.
    let (status, first) = page(&s, &admin, "").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(types(&first), ["ServerStarted", "KeyCreated"]);
    let started = &first["items"][0];
    assert_eq!(started["data"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(started["data"]["config_sha256"], digest.as_str());
    assert!(started["data"]["config_file"]
        .as_str()
        .is_some_and(|f| f.ends_with("runledger.toml")));
    assert_eq!(started["origin"]["channel"], "system");
    assert_eq!(first["items"][1]["data"]["key_id"], admin_id.as_str());
    assert_eq!(first["items"][1]["origin"]["channel"], "system");

    // The acts of the admin API.
    let (status, _, team_request) = act(&s, &admin, "/admin/teams", json!({"name": "ops"})).await;
    assert_eq!(status, 201);
    let (status, bob, _) = act(
        &s,
        &admin,
        "/admin/keys",
        json!({"name": "bob", "team": "ops"}),
    )
    .await;
    assert_eq!(status, 200, "{bob}");
    let bob_key = bob["key"].as_str().expect("key").to_string();
    let bob_id = bob["id"].as_str().expect("id").to_string();
    let (_, carol, _) = act(&s, &admin, "/admin/keys", json!({"name": "carol"})).await;
    let carol_id = carol["id"].as_str().expect("id").to_string();
    let (status, _, revoke_request) = act(
        &s,
        &admin,
        &format!("/admin/keys/{carol_id}/revoke"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200);

    let (status, all) = page(&s, &admin, "").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        types(&all),
        [
            "KeyRevoked",
            "KeyCreated",
            "KeyCreated",
            "TeamCreated",
            "ServerStarted",
            "KeyCreated"
        ]
    );
    let items = all["items"].as_array().expect("items").clone();
    let revoked = &items[0];
    assert_eq!(revoked["data"]["key_id"], carol_id.as_str());
    assert_eq!(revoked["data"]["name"], "carol");
    assert_eq!(revoked["data"]["already"], false);
    assert_eq!(revoked["origin"]["request_id"], revoke_request.as_str());
    assert_eq!(items[2]["data"]["key_id"], bob_id.as_str());
    assert_eq!(items[2]["data"]["team"], "ops");
    assert_eq!(items[2]["data"]["admin"], false);
    let team = &items[3];
    assert_eq!(team["data"]["name"], "ops");
    let origin = &team["origin"];
    assert_eq!(origin["channel"], "api");
    assert_eq!(origin["key"]["id"], admin_id.as_str());
    assert_eq!(origin["key"]["name"], "admin");
    assert_eq!(origin["key"]["admin"], true);
    assert_eq!(origin["request_id"], team_request.as_str());
    assert_eq!(origin["client_addr"], "127.0.0.1");
    assert_eq!(origin["user_agent"], "audit-test/1");
    // Sequence numbers count down, and each record chains onto the one before it.
    let seqs: Vec<u64> = items
        .iter()
        .map(|i| i["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, [5, 4, 3, 2, 1, 0]);
    for pair in items.windows(2) {
        assert_eq!(pair[0]["prev"], pair[1]["link"], "{}", pair[0]);
    }
    assert_eq!(items[5]["prev"], "0".repeat(64));

    // Filters.
    let (_, only) = page(&s, &admin, "?type=TeamCreated").await;
    assert_eq!(types(&only), ["TeamCreated"]);
    let (_, keys_only) = page(&s, &admin, "?type=KeyRevoked&type=KeyCreated").await;
    assert_eq!(types(&keys_only).len(), 4);
    let (_, by_admin) = page(&s, &admin, &format!("?actor={admin_id}")).await;
    assert_eq!(types(&by_admin).len(), 4, "the four acts through the API");
    let (_, by_bob) = page(&s, &admin, &format!("?actor={bob_id}")).await;
    assert_eq!(types(&by_bob).len(), 0);
    let (_, future) = page(&s, &admin, "?since=2999-01-01T00:00:00Z").await;
    assert_eq!(types(&future).len(), 0);
    let (_, past) = page(&s, &admin, "?until=2000-01-01T00:00:00Z").await;
    assert_eq!(types(&past).len(), 0);
    let at = items[3]["at"].as_str().expect("at");
    let (_, window) = page(
        &s,
        &admin,
        &format!("?since={at}&until={at}&type=TeamCreated"),
    )
    .await;
    assert_eq!(types(&window), ["TeamCreated"]);
    for (query, field) in [
        ("?since=yesterday", "since"),
        ("?until=2026-02-30", "until"),
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?type=KeyDeleted", "type"),
        ("?cursor=abc", "cursor"),
    ] {
        let (status, problem) = page(&s, &admin, query).await;
        assert_eq!(status, 400, "{query}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains(field)),
            "{query}: {problem}"
        );
    }

    // Paging: two at a time, the pages together are the whole log, newest first.
    let mut paged = Vec::new();
    let mut query = "?limit=2".to_string();
    loop {
        let (status, p) = page(&s, &admin, &query).await;
        assert_eq!(status, 200, "{p}");
        assert!(p["items"].as_array().expect("items").len() <= 2);
        paged.extend(p["items"].as_array().expect("items").iter().cloned());
        match p["page_info"]["next_cursor"].as_str() {
            Some(cursor) => {
                assert_eq!(p["page_info"]["has_next_page"], true);
                query = format!("?limit=2&cursor={cursor}");
            }
            None => break,
        }
    }
    assert_eq!(paged, items);

    // Hostile: a team key reads nothing, whatever it asks, even with a malformed filter.
    for query in [
        "".to_string(),
        "?type=KeyCreated".to_string(),
        format!("?actor={bob_id}"),
        "?since=not-a-time".to_string(),
        "?limit=1000&cursor=3".to_string(),
    ] {
        let (status, problem) = page(&s, &bob_key, &query).await;
        assert_eq!(status, 403, "{query}: {problem}");
        assert!(!problem.to_string().contains("KeyCreated"), "{problem}");
    }
    let anonymous = s
        .client
        .get(s.api("/audit/admin"))
        .send()
        .await
        .expect("request");
    assert_eq!(anonymous.status().as_u16(), 401);

    // The command line reads the same log from the running server.
    let server_args = ["--server", s.base.as_str()];
    let mut args = vec!["audit", "--admin", "--json", "--type", "TeamCreated"];
    args.extend_from_slice(&server_args);
    let (ok, out, err) = cli(&args, &[("RUNLEDGER_API_KEY", admin.as_str())]);
    assert!(ok, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines, [items[3].clone()]);
    let mut args = vec!["audit", "--admin", "--actor", admin_id.as_str()];
    args.extend_from_slice(&server_args);
    let (ok, out, err) = cli(&args, &[("RUNLEDGER_API_KEY", admin.as_str())]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(
        out.contains("TeamCreated") && out.contains("team ops"),
        "{out}"
    );
    let mut args = vec!["audit", "--admin"];
    args.extend_from_slice(&server_args);
    let out = std::process::Command::new(crate::common::BIN)
        .args(&args)
        .env("RUNLEDGER_API_KEY", &bob_key)
        .output()
        .expect("run cli");
    assert_eq!(out.status.code(), Some(77), "a refused key exits 77");

    // A clean stop is recorded last, with the version and the configuration's digest.
    let status = s.stop_with(nix::sys::signal::Signal::SIGTERM, 30).await;
    assert!(status.success());
    let store = Store::open(&s.data_dir, &Default::default()).expect("open");
    let last = store
        .admin_records_rev(None)
        .next()
        .expect("a record")
        .expect("reads");
    match &last.record.event {
        runledger::domain::AdminEvent::ServerStopped {
            version,
            config_sha256,
            signal,
        } => {
            assert_eq!(version, env!("CARGO_PKG_VERSION"));
            assert_eq!(config_sha256, &digest);
            assert_eq!(signal, "SIGTERM");
        }
        other => panic!("the last record is {other:?}"),
    }
    assert_eq!(last.record.seq, 6);
    assert!(matches!(
        store.verify_admin_chain().expect("verify"),
        ChainCheck::Intact { records: 7, .. }
    ));
}
