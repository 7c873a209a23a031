//! Idempotent creates: the `Idempotency-Key` a client sends with a create, and the handle that
//! remembers which run a key created. A key is scoped to the API key that used it and bound to
//! the request body it came with (a fingerprint of the parsed JSON), so a retry of the same
//! request answers the first run and the same key with another body is refused. Records live in
//! the store beside the log; this module alone reads and writes them.

use sha2::{Digest, Sha256};

use crate::failure::StorageError;
use runledger_domain::{RunId, Timestamp};
use runledger_store::{IdempotencyRecord, Store};

/// How long an idempotency key is remembered.
pub const TTL_MS: u64 = 24 * 3600 * 1000;

/// Creates with keys of the same hash stripe wait for each other; 64 stripes keep unrelated
/// keys from waiting on one lock.
const STRIPES: usize = 64;

/// A valid `Idempotency-Key`: 1–255 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

/// Why a header value is not an idempotency key.
#[derive(Debug, thiserror::Error)]
#[error("Idempotency-Key must be 1-255 visible ASCII characters")]
pub struct InvalidKey;

impl IdempotencyKey {
    /// Parses a header's raw bytes.
    pub fn parse(raw: &[u8]) -> Result<IdempotencyKey, InvalidKey> {
        // Visible ASCII, tab and space: what a header value may hold as text.
        let text = std::str::from_utf8(raw)
            .ok()
            .filter(|v| v.bytes().all(|b| b == b'\t' || (b' '..0x7f).contains(&b)))
            .ok_or(InvalidKey)?;
        if text.is_empty() || text.len() > 255 {
            return Err(InvalidKey);
        }
        Ok(IdempotencyKey(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The request this key names for the API key `owner` with `body`.
    pub fn request(&self, owner: &str, body: &[u8]) -> Request {
        // Keys are scoped to the API key that used them.
        let scope: [u8; 32] = Sha256::new()
            .chain_update(owner.as_bytes())
            .chain_update([0])
            .chain_update(self.0.as_bytes())
            .finalize()
            .into();
        // The fingerprint is of the parsed body (object keys sorted), so a retry that formats
        // the same JSON differently is still the same request.
        let canonical = serde_json::from_slice::<serde_json::Value>(body)
            .map(|v| v.to_string().into_bytes())
            .unwrap_or_else(|_| body.to_vec());
        Request {
            scope,
            fingerprint: Sha256::digest(&canonical).into(),
        }
    }
}

/// A key scoped to its owner, with the fingerprint of the body it came with.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    scope: [u8; 32],
    fingerprint: [u8; 32],
}

/// What is remembered of a request's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recall {
    /// Unknown, or older than the TTL: the request is new.
    New,
    /// The same request was seen: it names this run (which may not have become durable).
    Same(RunId),
    /// The key was used with a different body.
    Conflict,
}

/// A cheap-to-clone handle on the idempotency records, with the locks that serialise the
/// creates of one key.
#[derive(Clone)]
pub struct Idempotency {
    store: Store,
    locks: std::sync::Arc<[tokio::sync::Mutex<()>]>,
}

impl Idempotency {
    pub fn new(store: Store) -> Idempotency {
        Idempotency {
            store,
            locks: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }

    /// Holds off the other creates of the same key until the guard is dropped, so that a
    /// concurrent retry finds the first request's record instead of creating a second run.
    pub async fn lock(&self, request: &Request) -> tokio::sync::MutexGuard<'_, ()> {
        self.locks[usize::from(request.scope[0]) % self.locks.len()]
            .lock()
            .await
    }

    /// What is remembered of `request`'s key at `at`.
    pub fn recall(&self, request: &Request, at: Timestamp) -> Result<Recall, StorageError> {
        let Some(seen) = self.store.idempotency_get(&request.scope)? else {
            return Ok(Recall::New);
        };
        if at.0.saturating_sub(seen.at.0) >= TTL_MS {
            return Ok(Recall::New);
        }
        if seen.fingerprint != request.fingerprint {
            return Ok(Recall::Conflict);
        }
        Ok(Recall::Same(seen.run_id))
    }

    /// Remembers that `request` creates run `run_id`. Written before the run's events, so the
    /// create's sync covers both and a crash can never leave a durable run without its key.
    pub fn record(
        &self,
        request: &Request,
        run_id: RunId,
        at: Timestamp,
    ) -> Result<(), StorageError> {
        self.store.idempotency_put(
            &request.scope,
            &IdempotencyRecord {
                run_id,
                fingerprint: request.fingerprint,
                at,
            },
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_to_255_visible_characters() {
        assert!(IdempotencyKey::parse(b"").is_err());
        assert!(IdempotencyKey::parse(&[b'a'; 256]).is_err());
        assert!(IdempotencyKey::parse(b"caf\xc3\xa9").is_err());
        assert_eq!(
            IdempotencyKey::parse(&[b'a'; 255])
                .map(|k| k.as_str().len())
                .ok(),
            Some(255)
        );
    }

    #[test]
    fn the_fingerprint_ignores_formatting_but_not_content() {
        let key = IdempotencyKey::parse(b"k").unwrap_or_else(|_| unreachable!());
        let a = key.request("owner", br#"{"a":1,"b":2}"#);
        let b = key.request("owner", b"{ \"b\": 2, \"a\": 1 }");
        let c = key.request("owner", br#"{"a":1,"b":3}"#);
        let d = key.request("other", br#"{"a":1,"b":2}"#);
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_ne!(a.fingerprint, c.fingerprint);
        assert_eq!(a.scope, b.scope);
        assert_ne!(a.scope, d.scope);
    }
}
