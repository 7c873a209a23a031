//! `GET /api/v1/admin/export`: an admin key reads the store's export from the running server,
//! the same lines `runledger export` writes of the stopped store; other keys are refused, and
//! key records and secrets are never offered over HTTP.

use super::world;
use crate::common::{self, Server};

#[tokio::test]
async fn the_export_of_a_running_server_is_the_stopped_stores_export() {
    let mut s = Server::start();
    let w = world(&s).await;

    let get = |key: &str, query: &str| {
        s.client
            .get(s.api(&format!("/admin/export{query}")))
            .bearer_auth(key)
            .send()
    };
    let r = get(&w.alice.secret, "").await.expect("send");
    assert_eq!(r.status(), 403, "only admin keys export");
    for query in ["?with_keys", "?with_keys=true", "?other=1"] {
        let (status, v) = common::problem(get(&w.admin.secret, query).await.expect("send")).await;
        assert_eq!(status, 400, "{query}: {v}");
    }
    let (_, v) = common::problem(get(&w.admin.secret, "?with_keys").await.expect("send")).await;
    assert!(
        v["detail"].as_str().unwrap_or("").contains("with_keys"),
        "{v}"
    );

    let r = get(&w.admin.secret, "").await.expect("send");
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"].to_str().ok(),
        Some("application/x-ndjson")
    );
    let live = r.text().await.expect("body");
    assert!(live.contains(&w.b_cancelled) && live.contains(&w.a_done));
    assert!(!live.contains(&w.alice.secret) && !live.contains("\"record\":\"key\""));

    s.stop_with(nix::sys::signal::Signal::SIGTERM, 15).await;
    let data_dir = s.data_dir.display().to_string();
    let (ok, offline, err) = common::cli(&["export", "--data-dir", &data_dir], &[]);
    assert!(ok, "{err}");
    // The stop seals what the live export saw unsealed (and its own admin record), so the
    // stopped store's export has the seal lines the live one had and more; its other lines are
    // the same, byte for byte.
    let seal = |l: &&str| l.contains("\"record\":\"seal\"");
    let (live_seals, live_rest): (Vec<&str>, Vec<&str>) = live.lines().partition(seal);
    let (offline_seals, offline_rest): (Vec<&str>, Vec<&str>) = offline.lines().partition(seal);
    assert_eq!(live_rest, offline_rest, "the same lines, byte for byte");
    assert!(offline_seals.len() > live_seals.len(), "{offline}");
    assert_eq!(offline_seals[..live_seals.len()], live_seals[..]);
}
