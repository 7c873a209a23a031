//! `server.seal_webhook`: each seal reaches a receiver off the host, signed like every webhook
//! and carrying the seal's fields (the same seal `GET …/proof` shows); a receiver on a loopback
//! address is refused unless `seal_webhook_allow_private` says otherwise; a URL with
//! credentials is refused at start.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{last_seq, path_str, sealed_proof};
use crate::common::{cli, Server};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What the receiver got: each request's webhook id, whether its signature held, its body.
type Got = Arc<Mutex<Vec<(String, bool, Value)>>>;

async fn receiver() -> (String, Got) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/seals", listener.local_addr().expect("addr"));
    let got: Got = Arc::default();
    let kept = got.clone();
    let key = runledger::config::webhook_key(SECRET).expect("key");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = kept.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let Some((headers, body)) = read_request(&mut conn).await else {
                    return;
                };
                let header = |name: &str| headers.get(name).cloned().unwrap_or_default();
                let id = header("webhook-id");
                let timestamp: i64 = header("webhook-timestamp").parse().unwrap_or(0);
                let signed = runledger::webhooks::sign::verify(
                    &key,
                    &id,
                    timestamp,
                    &body,
                    &header("webhook-signature"),
                );
                let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                kept.lock().expect("lock").push((id, signed, value));
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (url, got)
}

async fn read_request(
    conn: &mut tokio::net::TcpStream,
) -> Option<(BTreeMap<String, String>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let headers: BTreeMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((headers, body))
}

/// A config that seals every second and sends each seal to `url`, its key in a file of `dir`.
fn config(dir: &std::path::Path, url: &str, allow_private: bool) -> String {
    let secret = dir.join("seals.secret");
    std::fs::write(&secret, SECRET).expect("write secret");
    let secret = secret.display();
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\nseal_interval_secs = 1\nseal_webhook = \"{url}\"\n\
         seal_webhook_secret = \"SEALS\"\nseal_webhook_allow_private = {allow_private}\n\n\
         [secrets]\nSEALS = {{ file = \"{secret}\" }}\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\ndemo_duration_ms = 100\n"
    )
}

#[tokio::test]
async fn each_seal_reaches_the_receiver_signed() {
    let (url, got) = receiver().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = Server::start_in(tmp.path(), &config(tmp.path(), &url, true));
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "send the seal"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let seq = last_seq(&s, &id).await;
    let proof = sealed_proof(&s, &id, seq, 10).await;
    let number = proof["seal"]["number"].as_u64().expect("number");
    let wanted = format!("seal_{number}");
    crate::common::eventually(10, "the seal's delivery", || {
        got.lock()
            .expect("lock")
            .iter()
            .any(|(id, _, _)| *id == wanted)
    })
    .await;
    let got = got.lock().expect("lock").clone();
    let (_, signed, body) = got
        .iter()
        .find(|(id, _, _)| *id == wanted)
        .expect("delivered");
    assert!(signed, "the delivery's signature does not verify");
    assert_eq!(body["type"], "seal", "{body}");
    assert_eq!(
        body["data"], proof["seal"],
        "the delivery is not the proof's seal"
    );
}

#[tokio::test]
async fn a_loopback_receiver_is_refused_without_allow_private() {
    let (url, got) = receiver().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = Server::start_in(tmp.path(), &config(tmp.path(), &url, false));
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "seal, not sent"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let seq = last_seq(&s, &id).await;
    sealed_proof(&s, &id, seq, 10).await;
    crate::common::eventually(10, "the refusal in the log", || {
        s.log_text().contains("seal webhook's address is refused")
    })
    .await;
    assert!(
        got.lock().expect("lock").is_empty(),
        "a refused address was sent to"
    );

    // A URL with credentials is refused when the configuration loads.
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        config(tmp.path(), "https://user:pw@audit.example/seals", false),
    )
    .expect("write");
    let (ok, _, err) = cli(
        &[
            "verify",
            "--config",
            path_str(&bad),
            "--data-dir",
            path_str(&s.data_dir),
        ],
        &[],
    );
    assert!(!ok && err.contains("server.seal_webhook"), "{err}");
}
