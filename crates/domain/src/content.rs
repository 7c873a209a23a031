//! `Content`: the address of bytes kept beside the log in the content store (attachments,
//! artifacts, an execution's diff). Its own file so that the event payloads that name one
//! (`events`, `changes`) import it without importing each other.

use serde::{Deserialize, Serialize};

/// Bytes kept beside the log in the content store, addressed by their SHA-256. The same bytes
/// are stored once however many runs carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    pub sha256: [u8; 32],
    pub size: u64,
    /// The media type the bytes are served with.
    pub mime_type: String,
}
