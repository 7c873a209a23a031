//! The administrative acts the admin audit log records: keys created and revoked, teams
//! created, instance secrets rotated, the server started and stopped, the read index rebuilt. One `AdminEvent` per act;
//! who did it is the `Origin` the store keeps beside it (as it does beside a run's events), and
//! when is the record's time.
//!
//! This is a stored schema, encoded positionally (postcard) like `Event`: add variants only at
//! the end, never reorder or remove them, and never change a field of an existing variant. The
//! golden-byte fixtures in `tests/fixtures/admin-events` guard this.

use serde::{Deserialize, Serialize};

/// One administrative act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminEvent {
    /// An API key was created (its secret is never recorded).
    KeyCreated {
        key_id: String,
        name: String,
        /// `personal` or `agent`.
        kind: String,
        team: String,
        admin: bool,
    },
    /// An API key was revoked. Revoking a revoked key is recorded too, with `already: true`.
    KeyRevoked {
        key_id: String,
        name: String,
        team: String,
        already: bool,
    },
    /// A team was created.
    TeamCreated { name: String },
    /// An instance secret was replaced by a fresh one (`session_secret`: every session link
    /// signed before stops working). The secret itself is never recorded.
    SecretRotated { name: String },
    /// The server started serving this store.
    ServerStarted {
        /// runledger's version (`CARGO_PKG_VERSION`).
        version: String,
        /// SHA-256 of the configuration file's bytes, or of the embedded defaults when there is
        /// no file, in lowercase hex.
        config_sha256: String,
        /// The configuration file, absolute; `None` when the defaults were used.
        config_file: Option<String>,
    },
    /// The server stopped cleanly (a crash records nothing: the next `ServerStarted` follows a
    /// `ServerStarted`).
    ServerStopped {
        version: String,
        config_sha256: String,
        /// The signal that asked it to stop (`SIGTERM`, `SIGINT`).
        signal: String,
    },
    /// The read index was rebuilt from the log (`runledger replay`); `accepted_loss` when the
    /// store had lost acknowledged writes and the rebuild accepted serving what is left.
    IndexRebuilt {
        runs: u64,
        events: u64,
        accepted_loss: bool,
    },
}

impl AdminEvent {
    /// Every record type's name, in variant order: what `type` answers and filters on.
    pub const TYPES: [&'static str; 7] = [
        "KeyCreated",
        "KeyRevoked",
        "TeamCreated",
        "SecretRotated",
        "ServerStarted",
        "ServerStopped",
        "IndexRebuilt",
    ];

    /// The record type's name (the variant's).
    pub fn kind(&self) -> &'static str {
        match self {
            AdminEvent::KeyCreated { .. } => "KeyCreated",
            AdminEvent::KeyRevoked { .. } => "KeyRevoked",
            AdminEvent::TeamCreated { .. } => "TeamCreated",
            AdminEvent::SecretRotated { .. } => "SecretRotated",
            AdminEvent::ServerStarted { .. } => "ServerStarted",
            AdminEvent::ServerStopped { .. } => "ServerStopped",
            AdminEvent::IndexRebuilt { .. } => "IndexRebuilt",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once() {
        let samples = [
            AdminEvent::KeyCreated {
                key_id: "k".into(),
                name: "n".into(),
                kind: "agent".into(),
                team: "t".into(),
                admin: false,
            },
            AdminEvent::KeyRevoked {
                key_id: "k".into(),
                name: "n".into(),
                team: "t".into(),
                already: false,
            },
            AdminEvent::TeamCreated { name: "t".into() },
            AdminEvent::SecretRotated { name: "s".into() },
            AdminEvent::ServerStarted {
                version: "1".into(),
                config_sha256: "00".into(),
                config_file: None,
            },
            AdminEvent::ServerStopped {
                version: "1".into(),
                config_sha256: "00".into(),
                signal: "SIGTERM".into(),
            },
            AdminEvent::IndexRebuilt {
                runs: 1,
                events: 2,
                accepted_loss: false,
            },
        ];
        let kinds: Vec<_> = samples.iter().map(AdminEvent::kind).collect();
        assert_eq!(kinds, AdminEvent::TYPES);
    }
}
