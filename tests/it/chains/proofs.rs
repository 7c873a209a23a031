//! `GET …/proof` saved to a file checks offline with `runledger verify --proof --pubkey` and the
//! key `runledger audit pubkey` prints (while the server runs); a proof with a forged
//! signature, a wrong Merkle path, a changed leaf or checked against another key is refused.
//! Another team's key is not shown the proof.

use serde_json::{json, Value};

use super::support::{cli_on, config, last_seq, path_str, sealed_proof};
use crate::common::{cli, Server};

/// Flips the first hex digit of a string field of `proof` at `pointer`.
fn flip(proof: &Value, pointer: &str) -> Value {
    let mut forged = proof.clone();
    let field = forged.pointer_mut(pointer).expect("the field");
    let text = field.as_str().expect("a string").to_string();
    let first = if text.starts_with('0') { "1" } else { "0" };
    *field = json!(format!("{first}{}", &text[1..]));
    forged
}

fn check(dir: &std::path::Path, proof: &Value, pubkey: &str) -> (bool, String) {
    let file = dir.join("proof.json");
    std::fs::write(&file, proof.to_string()).expect("write proof");
    let (ok, out, err) = cli(
        &["verify", "--proof", path_str(&file), "--pubkey", pubkey],
        &[],
    );
    (ok, format!("{out}{err}"))
}

#[tokio::test]
async fn a_proof_checks_offline_with_the_public_key_and_a_forged_one_does_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = Server::start_in(tmp.path(), &config(tmp.path()));
    s.wait_ready().await;
    // Several runs, so that most seals have more than one leaf and paths are not empty.
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(s.create(json!({"prompt": format!("run {i}")})).await);
    }
    for id in &ids {
        s.wait_state(id, "SUCCEEDED").await;
    }
    let id = &ids[3];
    let seq = last_seq(&s, id).await;
    let proof = sealed_proof(&s, id, seq, 10).await;
    assert_eq!(proof["run_id"], *id, "{proof}");
    assert_eq!(proof["head_seq"], seq, "{proof}");

    // The public key, asked while the server holds the store.
    let (ok, pubkey, err) = cli_on(&s.data_dir, &["audit", "pubkey"]);
    assert!(ok, "{err}");
    let pubkey = pubkey.trim().to_string();
    assert_eq!(pubkey.len(), 64, "{pubkey}");
    assert_eq!(proof["seal"]["public_key"], pubkey, "{proof}");
    let (ok, base64, err) = cli_on(&s.data_dir, &["audit", "pubkey", "--base64"]);
    assert!(ok, "{err}");

    let dir = tmp.path();
    let (ok, said) = check(dir, &proof, &pubkey);
    assert!(ok, "{said}");
    assert!(said.contains("sealed by seal"), "{said}");
    let (ok, said) = check(dir, &proof, base64.trim());
    assert!(ok, "the base64 key is refused: {said}");

    // Hostile: each forgery is refused.
    let other = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    let (ok, said) = check(dir, &proof, other);
    assert!(!ok && said.contains("another key"), "{said}");
    let (ok, said) = check(dir, &flip(&proof, "/seal/signature"), &pubkey);
    assert!(!ok && said.contains("signature"), "{said}");
    let (ok, said) = check(dir, &flip(&proof, "/leaf_link"), &pubkey);
    assert!(!ok && said.contains("Merkle path"), "{said}");
    let mut wrong_path = proof.clone();
    match wrong_path["path"].as_array_mut().expect("a path") {
        path if path.is_empty() => path.push(json!("00".repeat(32))),
        _ => wrong_path = flip(&proof, "/path/0"),
    }
    let (ok, said) = check(dir, &wrong_path, &pubkey);
    assert!(!ok && said.contains("Merkle path"), "{said}");
    let mut root_swapped = flip(&proof, "/seal/root");
    root_swapped["seal"]["hash"] = proof["seal"]["hash"].clone();
    let (ok, said) = check(dir, &root_swapped, &pubkey);
    assert!(!ok, "a changed root passed: {said}");
    let (ok, said) = check(dir, &json!({"run_id": id}), &pubkey);
    assert!(!ok && said.contains("not a runledger proof"), "{said}");

    // Another team's key sees no such run.
    let (status, team) = s
        .post(&s.key, "/admin/teams", json!({"name": "other"}))
        .await;
    assert_eq!(status, 201, "{team}");
    let (status, key) = s
        .post(&s.key, "/admin/keys", json!({"name": "o", "team": "other"}))
        .await;
    assert_eq!(status, 200, "{key}");
    let other_key = key["key"].as_str().expect("key");
    let (status, v) = s.get(other_key, &format!("/agent/runs/{id}/proof")).await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = s
        .get(&s.key, "/agent/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/proof")
        .await;
    assert_eq!(status, 404, "{v}");
}
