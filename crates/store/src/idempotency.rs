//! The idempotency records: what an idempotent create remembers about the first request that
//! used a key. It stores and reads them; deciding what a repeated key means is `runs`'s.

use runledger_domain::{RunId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::layout::IDEMPOTENCY;
use crate::{Error, Store, Writer};

/// What an idempotent create remembers about the first request that used a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub run_id: RunId,
    /// Hash of the request body, to refuse the same key with a different request.
    pub fingerprint: [u8; 32],
    pub at: Timestamp,
}

impl Store {
    pub fn idempotency_get(&self, key: &[u8; 32]) -> Result<Option<IdempotencyRecord>, Error> {
        match self.inner.idempotency.get(key)? {
            None => Ok(None),
            Some(bytes) => {
                postcard::from_bytes(&bytes)
                    .map(Some)
                    .map_err(|e| Error::CorruptRecord {
                        tree: IDEMPOTENCY,
                        detail: e.to_string(),
                    })
            }
        }
    }

    pub fn idempotency_put(&self, key: &[u8; 32], record: &IdempotencyRecord) -> Result<(), Error> {
        self.admit(Writer::Client)?;
        let bytes = postcard::to_allocvec(record).map_err(|e| Error::CorruptRecord {
            tree: IDEMPOTENCY,
            detail: e.to_string(),
        })?;
        self.inner
            .idempotency
            .insert(key, bytes)
            .inspect_err(|e| self.failed(e))?;
        Ok(())
    }
}
