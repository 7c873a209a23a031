//! `GET /api/v1/agent/runs/{id}/export`: the run's team and admin keys get the bundle (which
//! `import --run` takes), another team's key and an unknown id get the 404 of every run read.

use crate::common;

use common::Server;
use serde_json::json;

use super::support::{config, import, target};

async fn key_of_team(s: &Server, name: &str, team: &str) -> String {
    let (status, v) = s
        .post(&s.key, "/admin/teams", json!({ "name": team }))
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = s
        .post(&s.key, "/admin/keys", json!({"name": name, "team": team}))
        .await;
    assert_eq!(status, 200, "{v}");
    v["key"].as_str().expect("key").to_string()
}

async fn export(s: &Server, key: &str, id: &str) -> (u16, Vec<u8>) {
    let r = s
        .client
        .get(s.api(&format!("/agent/runs/{id}/export")))
        .bearer_auth(key)
        .send()
        .await
        .expect("export");
    let status = r.status().as_u16();
    (status, r.bytes().await.expect("body").to_vec())
}

#[tokio::test]
async fn the_runs_team_and_admins_export_it_and_others_get_404() {
    let dir = common::agent_visible_dir();
    let s = Server::start_in(dir.path(), &config(dir.path()));
    s.wait_ready().await;
    let mine = key_of_team(&s, "mine", "alpha").await;
    let theirs = key_of_team(&s, "theirs", "beta").await;
    let (status, v) = s
        .post(
            &mine,
            "/agent/runs",
            json!({"prompt": "p", "config": {"environment_id": "cmd"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let id = v["run_id"].as_str().expect("run_id").to_string();
    // An admin key of another team does not see the run in the runs' reads: its team's does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, v) = s.get(&mine, &format!("/agent/runs/{id}")).await;
        assert_eq!(status, 200, "{v}");
        if v["state"] == "SUCCEEDED" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let (status, team_bundle) = export(&s, &mine, &id).await;
    assert_eq!(status, 200);
    assert!(team_bundle.starts_with(b"runledger-bundle 1\n"));
    let (status, admin_bundle) = export(&s, &s.key, &id).await;
    assert_eq!(status, 200);
    assert_eq!(admin_bundle, team_bundle, "nothing changed between the two");
    let (status, body) = export(&s, &theirs, &id).await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    let (status, _) = export(&s, &mine, "01J0000000000000000000000X").await;
    assert_eq!(status, 404);
    let (status, _) = export(&s, "not-a-key", &id).await;
    assert_eq!(status, 401);

    // What the server sent is a whole bundle: another store takes it.
    let (other, _) = target().await;
    let file = other.path().join("run.bundle");
    std::fs::write(&file, &team_bundle).expect("write");
    let (ok, err) = import(other.path(), &file, &[]);
    assert!(ok, "{err}");
}
