//! MCP server credentials at rest: the values of every MCP server's `env` and `headers` are
//! sealed with the instance's credential key (XChaCha20-Poly1305) when a run is admitted, so the
//! log, the events API and a plain export hold only `***` in their place, and are put back into
//! the run's config when an execution is launched. This module owns the key handle, the
//! plaintext's shape and the associated data that binds a sealed blob to its run's team and
//! creator. The key itself is an instance secret of the store (`store::CREDENTIAL_KEY`), kept
//! outside the event log; only `export --with-keys` carries it
//! (docs/decisions/0020-credential-encryption.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};

use runledger_domain::{AgentConfig, Run, RunAdmitted, Sealed, REDACTED};

/// Names the plaintext's format, in the associated data: a later format gets another tag, so
/// a blob is never read as a shape it was not written in.
const FORMAT: &[u8] = b"runledger mcp credentials v1";

/// The credential values of one MCP server.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Values {
    env: BTreeMap<String, String>,
    headers: BTreeMap<String, String>,
}

/// The plaintext of a sealed blob: the values by MCP server name (postcard).
type Plain = BTreeMap<String, Values>;

/// Why a run's credentials cannot be put back. The message names the cause, for the status
/// message of the execution that cannot start without them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsealable {
    #[error(
        "the run's MCP credentials cannot be decrypted with this instance's credential key (a \
         store restored from an export made without --with-keys has another key); the agent \
         was not started. Create the run again with its credentials"
    )]
    WrongKey,
    #[error(
        "the run's sealed MCP credentials are damaged (they decrypt, but not to credentials); \
         the agent was not started. Create the run again with its credentials"
    )]
    Damaged,
    #[error(
        "the run's MCP credentials are not in this store (credentials of a run from before \
         they were sealed are not in a backup): {0} of MCP server {1:?} reads `***`; the \
         agent was not started. Create the run again with its credentials"
    )]
    Missing(String, String),
}

/// The instance's credential key: seals a run's credential values at admission and opens
/// them at launch. Cheap to clone.
#[derive(Clone)]
pub struct Credentials {
    cipher: Arc<XChaCha20Poly1305>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(..)")
    }
}

impl Credentials {
    pub fn new(key: [u8; 32]) -> Credentials {
        Credentials {
            cipher: Arc::new(XChaCha20Poly1305::new(&key.into())),
        }
    }

    /// Moves every MCP `env` and `headers` value of the run into a sealed blob, leaving `***`
    /// in the config. A run without any such value is left as it is (`sealed` stays `None`).
    pub fn seal(&self, mut admitted: RunAdmitted) -> Result<RunAdmitted, SealError> {
        let sealed = self.seal_config(
            &mut admitted.created.config,
            &admitted.team,
            &admitted.created.creator.uid,
        )?;
        if sealed.is_some() {
            admitted.sealed = sealed;
        }
        Ok(admitted)
    }

    /// Moves every MCP `env` and `headers` value of `config` into a blob sealed for runs of
    /// `team` created by the key `creator`, leaving `***` in the config; `None` when there is
    /// no such value. A schedule's config is sealed this way for the runs it makes.
    pub fn seal_config(
        &self,
        config: &mut AgentConfig,
        team: &str,
        creator: &str,
    ) -> Result<Option<Sealed>, SealError> {
        let mut plain = Plain::new();
        for (name, server) in &mut config.mcp_servers {
            if server.env.is_empty() && server.headers.is_empty() {
                continue;
            }
            let values = Values {
                env: std::mem::take(&mut server.env),
                headers: std::mem::take(&mut server.headers),
            };
            server.env = redacted(&values.env);
            server.headers = redacted(&values.headers);
            plain.insert(name.clone(), values);
        }
        if plain.is_empty() {
            return Ok(None);
        }
        let bytes = postcard::to_allocvec(&plain).map_err(|_| SealError)?;
        let mut nonce = [0u8; 24];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut nonce);
        let aad = associated_data(team, creator);
        let ciphertext = self
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &bytes,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError)?;
        Ok(Some(Sealed { nonce, ciphertext }))
    }

    /// Puts the run's credential values back into its config, for the agent. A run without a
    /// sealed blob (a legacy run) keeps its plain values. Fails rather than leave `***` where a
    /// credential should be: an agent never gets the placeholder as if it were the value.
    pub fn restore(&self, run: &mut Run) -> Result<(), Unsealable> {
        if let Some(sealed) = &run.sealed {
            let aad = associated_data(&run.team, &run.creator.uid);
            let bytes = self
                .cipher
                .decrypt(
                    XNonce::from_slice(&sealed.nonce),
                    Payload {
                        msg: &sealed.ciphertext,
                        aad: &aad,
                    },
                )
                .map_err(|_| Unsealable::WrongKey)?;
            let plain: Plain = match postcard::from_bytes::<Plain>(&bytes) {
                Ok(plain) => plain,
                Err(_) => return Err(Unsealable::Damaged),
            };
            for (name, values) in plain {
                if let Some(server) = run.config.mcp_servers.get_mut(&name) {
                    fill(&mut server.env, values.env);
                    fill(&mut server.headers, values.headers);
                }
            }
        }
        missing(&run.config).map_or(Ok(()), |(what, server)| {
            Err(Unsealable::Missing(what, server))
        })
    }
}

/// Sealing failed; with strings in memory this does not happen, but it is not unwrapped.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the run's MCP credentials could not be encrypted")]
pub struct SealError;

/// What binds a blob to its run: the team and the creating key. A blob copied onto a run of
/// another team or key does not open.
fn associated_data(team: &str, creator: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(FORMAT.len() + team.len() + creator.len() + 16);
    for part in [FORMAT, team.as_bytes(), creator.as_bytes()] {
        // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
        aad.extend_from_slice(&(part.len() as u64).to_le_bytes());
        aad.extend_from_slice(part);
    }
    aad
}

fn redacted(values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    values
        .keys()
        .map(|k| (k.clone(), REDACTED.to_string()))
        .collect()
}

/// Sets the values of the names the config holds (as `***`); a name the config does not hold
/// is not added.
fn fill(into: &mut BTreeMap<String, String>, values: BTreeMap<String, String>) {
    for (name, value) in values {
        if let Some(slot) = into.get_mut(&name) {
            *slot = value;
        }
    }
}

/// The first credential that still reads `***` (as "env NAME" or "header NAME", and the
/// server's name).
fn missing(config: &AgentConfig) -> Option<(String, String)> {
    config.mcp_servers.iter().find_map(|(server, s)| {
        let env = s
            .env
            .iter()
            .find(|(_, v)| *v == REDACTED)
            .map(|(k, _)| format!("env {k}"));
        let header = || {
            s.headers
                .iter()
                .find(|(_, v)| *v == REDACTED)
                .map(|(k, _)| format!("header {k}"))
        };
        env.or_else(header).map(|what| (what, server.clone()))
    })
}

/// A config as every output shows it: each MCP `env` and `headers` value replaced by `***`,
/// names kept. (The output types in `format::run` redact as they serialize; this is for the
/// places that hold a config value, such as a backup's round-trip check.)
pub fn redact(config: &mut AgentConfig) {
    for server in config.mcp_servers.values_mut() {
        for value in server.env.values_mut().chain(server.headers.values_mut()) {
            *value = REDACTED.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{Creator, CreatorKind, McpServer, RunCreated, SourceType};

    fn admitted() -> RunAdmitted {
        let server = McpServer {
            command: Some("npx".into()),
            env: BTreeMap::from([("GITHUB_TOKEN".into(), "ghp_secret".into())]),
            headers: BTreeMap::from([("Authorization".into(), "Bearer abc".into())]),
            ..McpServer::default()
        };
        let plain = McpServer {
            url: Some("https://example.com".into()),
            ..McpServer::default()
        };
        RunAdmitted {
            created: RunCreated {
                title: "t".into(),
                prompt: "p".into(),
                config: AgentConfig {
                    mcp_servers: BTreeMap::from([("gh".into(), server), ("open".into(), plain)]),
                    ..AgentConfig::default()
                },
                creator: Creator {
                    kind: CreatorKind::User,
                    uid: "key-1".into(),
                    display_name: "alice".into(),
                },
                source: SourceType::Api,
                metadata: BTreeMap::new(),
            },
            team: "infra".into(),
            sealed: None,
        }
    }

    fn run_of(a: &RunAdmitted) -> Run {
        use runledger_domain::{Event, RunId, Timestamp};
        runledger_domain::evolve(
            None,
            RunId::new(Timestamp(1), 1),
            &Event::Admitted(a.clone()),
            Timestamp(1),
        )
        .expect("an admission starts a run")
    }

    fn key(byte: u8) -> Credentials {
        Credentials::new([byte; 32])
    }

    #[test]
    fn sealing_leaves_only_placeholders_and_names() {
        let sealed = key(1).seal(admitted()).expect("seals");
        let gh = &sealed.created.config.mcp_servers["gh"];
        assert_eq!(gh.env["GITHUB_TOKEN"], REDACTED);
        assert_eq!(gh.headers["Authorization"], REDACTED);
        let blob = sealed.sealed.as_ref().expect("a blob");
        let bytes = format!("{:?}", sealed.created);
        assert!(!bytes.contains("ghp_secret") && !bytes.contains("Bearer abc"));
        assert!(!blob
            .ciphertext
            .windows(b"ghp_secret".len())
            .any(|w| w == b"ghp_secret"));
    }

    #[test]
    fn a_run_without_credentials_gets_no_blob() {
        let mut a = admitted();
        a.created.config.mcp_servers.remove("gh");
        let sealed = key(1).seal(a.clone()).expect("seals");
        assert_eq!(sealed, a);
    }

    #[test]
    fn the_same_key_puts_the_values_back() {
        let original = admitted();
        let sealed = key(1).seal(original.clone()).expect("seals");
        let mut run = run_of(&sealed);
        key(1).restore(&mut run).expect("opens");
        assert_eq!(run.config, original.created.config);
    }

    #[test]
    fn another_key_does_not_open_it() {
        let sealed = key(1).seal(admitted()).expect("seals");
        let mut run = run_of(&sealed);
        assert_eq!(key(2).restore(&mut run), Err(Unsealable::WrongKey));
        assert_eq!(run.config.mcp_servers["gh"].env["GITHUB_TOKEN"], REDACTED);
    }

    #[test]
    fn a_tampered_blob_does_not_open() {
        let sealed = key(1).seal(admitted()).expect("seals");
        let blob = sealed.sealed.clone().expect("a blob");
        for i in [0, blob.ciphertext.len() / 2, blob.ciphertext.len() - 1] {
            let mut run = run_of(&sealed);
            let b = run.sealed.as_mut().expect("a blob");
            b.ciphertext[i] ^= 1;
            assert_eq!(key(1).restore(&mut run), Err(Unsealable::WrongKey));
        }
        let mut run = run_of(&sealed);
        run.sealed.as_mut().expect("a blob").nonce[3] ^= 1;
        assert_eq!(key(1).restore(&mut run), Err(Unsealable::WrongKey));
        let mut run = run_of(&sealed);
        run.sealed.as_mut().expect("a blob").ciphertext.truncate(10);
        assert_eq!(key(1).restore(&mut run), Err(Unsealable::WrongKey));
    }

    #[test]
    fn a_blob_copied_onto_another_team_or_creator_does_not_open() {
        let sealed = key(1).seal(admitted()).expect("seals");
        let mut run = run_of(&sealed);
        run.team = "default".into();
        assert_eq!(key(1).restore(&mut run), Err(Unsealable::WrongKey));
        let mut run = run_of(&sealed);
        run.creator.uid = "key-2".into();
        assert_eq!(key(1).restore(&mut run), Err(Unsealable::WrongKey));
    }

    #[test]
    fn a_legacy_run_keeps_its_plain_values() {
        let a = admitted();
        let mut run = run_of(&a);
        assert_eq!(run.sealed, None);
        key(1).restore(&mut run).expect("nothing to open");
        assert_eq!(run.config, a.created.config);
    }

    #[test]
    fn a_placeholder_without_its_value_is_refused_naming_it() {
        // A legacy run restored from an export: its values were written as `***`.
        let mut a = admitted();
        redact(&mut a.created.config);
        let mut run = run_of(&a);
        assert_eq!(
            key(1).restore(&mut run),
            Err(Unsealable::Missing("env GITHUB_TOKEN".into(), "gh".into()))
        );
        // A blob that lacks a value the config has a placeholder for.
        let mut b = admitted();
        b.created
            .config
            .mcp_servers
            .get_mut("gh")
            .expect("gh")
            .headers
            .clear();
        let mut sealed = key(1).seal(b).expect("seals");
        sealed
            .created
            .config
            .mcp_servers
            .get_mut("gh")
            .expect("gh")
            .headers
            .insert("X-Extra".into(), REDACTED.into());
        let mut run = run_of(&sealed);
        assert_eq!(
            key(1).restore(&mut run),
            Err(Unsealable::Missing("header X-Extra".into(), "gh".into()))
        );
    }

    #[test]
    fn a_blob_that_opens_to_something_else_is_damaged() {
        let sealed = key(1).seal(admitted()).expect("seals");
        let mut run = run_of(&sealed);
        let nonce = [9u8; 24];
        let aad = associated_data(&run.team, &run.creator.uid);
        let ciphertext = key(1)
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &[0xff, 0xff, 0xff],
                    aad: &aad,
                },
            )
            .expect("encrypts");
        run.sealed = Some(Sealed { nonce, ciphertext });
        assert_eq!(key(1).restore(&mut run), Err(Unsealable::Damaged));
    }
}
