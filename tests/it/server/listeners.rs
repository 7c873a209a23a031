//! What the server listens on: TLS on any address, plain HTTP off loopback only when allowed.

use super::support::*;
use crate::common;
use common::{cli, Server};
use serde_json::json;

#[tokio::test]
async fn tls_serves_the_api_on_any_address_and_plain_http_gets_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key, pem) = common::self_signed(dir.path());
    // TLS needs no permission to bind every interface; tests only ever talk to loopback.
    let config = format!(
        "[server]\nbind = \"0.0.0.0:0\"\ntls_cert = {cert:?}\ntls_key = {key:?}\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\ndemo_duration_ms = 40\n"
    );
    let mut s = Server::start_in(dir.path(), &config);
    assert!(s.base.starts_with("https://0.0.0.0:"), "{}", s.base);
    s.base = s.base.replace("0.0.0.0", "127.0.0.1");
    s.client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).expect("cert"))
        .build()
        .expect("client");

    let health = s
        .client
        .get(s.url("/healthz"))
        .send()
        .await
        .expect("healthz over https");
    assert_eq!(health.status(), 200);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "over TLS"})).await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    // Links default to the scheme the server speaks.
    let link = run["session_link"].as_str().expect("session_link");
    assert!(link.starts_with("https://0.0.0.0:"), "{link}");
    let page = s
        .client
        .get(link.replace("0.0.0.0", "127.0.0.1"))
        .send()
        .await
        .expect("session page");
    assert_eq!(page.status(), 200);
    let (status, body) = s.get("rl_wrong", "/agent/runs").await;
    assert_problem(status, &body, 401, "authentication_required");

    // The CLI manages keys through the running HTTPS server, trusting the config's certificate.
    let config_path = s.config.to_str().expect("utf-8 path").to_string();
    let data = s.data_dir.to_str().expect("utf-8 path").to_string();
    let key = s.key.clone();
    for host in ["127.0.0.1", "localhost"] {
        let url = s.base.replace("127.0.0.1", host);
        let env = [
            ("RUNLEDGER_ADMIN_KEY", key.as_str()),
            ("RUNLEDGER_URL", url.as_str()),
        ];
        let (ok, listed, err) = cli(
            &[
                "--config",
                &config_path,
                "--data-dir",
                &data,
                "keys",
                "list",
                "--json",
            ],
            &env,
        );
        assert!(ok, "keys list over https via {host}: {err}");
        assert!(listed.contains("\"admin\""), "{listed}");
    }

    // Plain HTTP on the TLS port, and TLS without trusting the certificate, both fail.
    let plain = reqwest::Client::new()
        .get(s.url("/healthz").replacen("https://", "http://", 1))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");
    let untrusted = reqwest::Client::new().get(s.url("/healthz")).send().await;
    assert!(untrusted.is_err(), "an untrusted certificate was accepted");
}

#[tokio::test]
async fn plain_http_binds_off_loopback_only_when_the_config_allows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("refused.toml");
    std::fs::write(&path, "[server]\nbind = \"0.0.0.0:0\"\n").expect("write");
    let config = path.display().to_string();
    let data = dir.path().join("data").display().to_string();
    let serve = ["serve", "--config", &config, "--data-dir", &data];
    let (ok, _, err) = cli(&serve, &[]);
    assert!(!ok);
    assert!(
        err.contains(&config)
            && err.contains("line 2: server.bind: 0.0.0.0:0 is not a loopback address")
            && err.contains("server.tls_cert and server.tls_key")
            && err.contains("server.allow_non_loopback = true")
            && !err.contains("panicked"),
        "{err}"
    );
    // A bad TLS file is a start-up error too, naming the field.
    let (cert, _, _) = common::self_signed(dir.path());
    std::fs::write(
        &path,
        format!("[server]\nbind = \"0.0.0.0:0\"\ntls_cert = {cert:?}\ntls_key = {cert:?}\n"),
    )
    .expect("write");
    let (ok, _, err) = cli(&serve, &[]);
    assert!(!ok);
    assert!(
        err.contains("line 4: server.tls_key:")
            && err.contains("holds no private key")
            && !err.contains("panicked"),
        "{err}"
    );

    let mut s = Server::start_in(
        dir.path(),
        "[server]\nbind = \"0.0.0.0:0\"\nallow_non_loopback = true\n",
    );
    assert!(s.base.starts_with("http://0.0.0.0:"), "{}", s.base);
    s.base = s.base.replace("0.0.0.0", "127.0.0.1");
    s.wait_ready().await;
    let (status, body) = s.get(&s.key.clone(), "/agent/environments").await;
    assert_eq!(status, 200, "{body}");
}
