//! Standard Webhooks signatures: `v1,<base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`,
//! and their check (for tests and for receivers written in Rust).

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length (a long one is hashed); `new_from_slice` fails for none.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` header of one attempt.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let tag = mac(key, id, timestamp, body).finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(tag)
    )
}

/// Whether one of the space-separated signatures of a `webhook-signature` header is a valid
/// `v1` signature of the message (compared in constant time).
pub fn verify(key: &[u8], id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
    header.split(' ').any(|candidate| {
        let Some(encoded) = candidate.strip_prefix("v1,") else {
            return false;
        };
        let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            return false;
        };
        mac(key, id, timestamp, body).verify_slice(&tag).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector the Standard Webhooks specification publishes (and every reference
    /// library tests against).
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn key() -> Vec<u8> {
        runledger_config::webhook_key(SECRET).expect("a whsec_ secret")
    }

    #[test]
    fn the_specification_test_vector_signs_as_published() {
        assert_eq!(signature(&key(), ID, TIMESTAMP, BODY), EXPECTED);
    }

    #[test]
    fn verification_accepts_the_vector_and_refuses_any_change() {
        let key = key();
        assert!(verify(&key, ID, TIMESTAMP, BODY, EXPECTED));
        assert!(verify(
            &key,
            ID,
            TIMESTAMP,
            BODY,
            &format!("v1,bm9wZQ== {EXPECTED}")
        ));
        assert!(!verify(&key, ID, TIMESTAMP + 1, BODY, EXPECTED));
        assert!(!verify(&key, "msg_other", TIMESTAMP, BODY, EXPECTED));
        assert!(!verify(
            &key,
            ID,
            TIMESTAMP,
            br#"{"test": 2432232315}"#,
            EXPECTED
        ));
        assert!(!verify(
            b"another key of 16+ bytes",
            ID,
            TIMESTAMP,
            BODY,
            EXPECTED
        ));
        assert!(!verify(
            &key,
            ID,
            TIMESTAMP,
            BODY,
            &EXPECTED.replace("v1,", "v2,")
        ));
    }
}
