//! `[[webhooks]]`: the subscriptions told about runs' changes (URL, signing key, topics, teams
//! and the timing of deliveries), checked and given their defaults, names unique. Delivering is
//! `runs::webhooks`'s; nothing here opens a connection.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::Error;
use crate::file::WebhookFile;
use crate::names::teams;
use crate::range::Range;
use crate::secrets::Secret;

/// How long one delivery attempt may take when `timeout_secs` is not set.
pub const DEFAULT_WEBHOOK_TIMEOUT_SECS: u64 = 15;
/// The first retry's delay when `retry_initial_ms` is not set (`docs/webhooks.md`).
pub const DEFAULT_WEBHOOK_RETRY_INITIAL_MS: u64 = 5_000;
/// Attempts of one subscription in flight together when `max_in_flight` is not set.
pub const DEFAULT_WEBHOOK_MAX_IN_FLIGHT: usize = 8;

/// A webhook subscription (`[[webhooks]]`), defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The subscription's durable identity: in its deliveries' ids, their records and metrics.
    pub name: String,
    /// `http` or `https`, with a host and no credentials.
    pub url: url::Url,
    /// The HMAC key: a `whsec_` secret decoded from base64, any other value as its bytes.
    pub key: WebhookKey,
    /// The topics delivered, each once, in `Topic::ALL` order.
    pub events: Vec<runledger_domain::Topic>,
    /// Whether the URL may resolve to a loopback, private or link-local address.
    pub allow_private: bool,
    /// Only runs of these teams; empty: every team.
    pub teams: Vec<String>,
    /// One attempt's limit, connection to the end of the answer.
    pub timeout: std::time::Duration,
    /// The delay before the first retry; every later one doubles it (capped).
    pub retry_initial: std::time::Duration,
    /// Attempts of this subscription in flight together.
    pub max_in_flight: usize,
}

/// A webhook's signing key. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookKey(pub Vec<u8>);

impl std::fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookKey(…)")
    }
}

/// The prefix of a Standard Webhooks secret, whose rest is the key in base64.
const WHSEC_PREFIX: &str = "whsec_";

/// The fewest bytes a webhook's key may have: the Standard Webhooks specification asks for
/// 24 to 64 random bytes.
const MIN_WEBHOOK_KEY_BYTES: usize = 16;

/// The key a webhook secret stands for: `whsec_<base64>` decoded as the Standard Webhooks
/// specification says, any other value taken as its UTF-8 bytes.
pub fn webhook_key(secret: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let key = match secret.strip_prefix(WHSEC_PREFIX) {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("the part after {WHSEC_PREFIX} is not base64 ({e})"))?,
        None => secret.as_bytes().to_vec(),
    };
    if key.len() < MIN_WEBHOOK_KEY_BYTES {
        return Err(format!(
            "the key has {} bytes; give at least {MIN_WEBHOOK_KEY_BYTES} (24 to 64 random bytes \
             as whsec_<base64> is what the Standard Webhooks specification asks for)",
            key.len()
        ));
    }
    Ok(key)
}

/// Every `[[webhooks]]` table in order; a name used twice is refused.
pub(crate) fn webhooks(
    files: Vec<WebhookFile>,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Vec<Webhook>, Error> {
    let mut webhooks: Vec<Webhook> = Vec::new();
    for (i, hook) in files.into_iter().enumerate() {
        let resolved = webhook(&format!("webhooks[{i}]"), hook, secrets)?;
        if webhooks.iter().any(|w| w.name == resolved.name) {
            return Err(Error::Invalid(format!(
                "webhooks[{i}].name: {:?} is used by another webhook; names must be unique",
                resolved.name
            )));
        }
        webhooks.push(resolved);
    }
    Ok(webhooks)
}

/// `server.seal_webhook`: where each seal is sent (`runs::seals`), signed with the key of the
/// `[secrets]` entry `server.seal_webhook_secret`, under the same URL and address rules as a
/// `[[webhooks]]` subscription (`seal_webhook_allow_private` as its `allow_private`).
pub(crate) fn seal_webhook(
    url_text: Option<String>,
    secret_name: Option<String>,
    allow_private: Option<bool>,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Option<Webhook>, Error> {
    let at = "server";
    let Some(url_text) = url_text else {
        if secret_name.is_some() || allow_private.is_some() {
            return Err(Error::Invalid(
                "server.seal_webhook_secret and seal_webhook_allow_private need \
                 server.seal_webhook, the receiver's URL"
                    .into(),
            ));
        }
        return Ok(None);
    };
    let url = url(at, &url_text).map_err(|e| {
        Error::Invalid(
            e.to_string()
                .replacen("server.url", "server.seal_webhook", 1),
        )
    })?;
    let Some(secret_name) = secret_name else {
        return Err(Error::Invalid(
            "server.seal_webhook_secret: missing; name the [secrets] entry that signs the seals \
             sent to server.seal_webhook"
                .into(),
        ));
    };
    let secret = secret(at, Some(secret_name), None, secrets).map_err(|e| {
        Error::Invalid(
            e.to_string()
                .replacen("server.secret", "server.seal_webhook_secret", 1),
        )
    })?;
    let key = webhook_key(&secret).map_err(|m| invalid_at(at, "seal_webhook_secret", m))?;
    Ok(Some(Webhook {
        name: "seals".into(),
        url,
        key: WebhookKey(key),
        events: Vec::new(),
        allow_private: allow_private.unwrap_or(false),
        teams: Vec::new(),
        timeout: std::time::Duration::from_secs(DEFAULT_WEBHOOK_TIMEOUT_SECS),
        retry_initial: std::time::Duration::from_millis(DEFAULT_WEBHOOK_RETRY_INITIAL_MS),
        max_in_flight: 1,
    }))
}

/// The error of the field `field` of the table `at` (`webhooks[0]`).
fn invalid_at(at: &str, field: &str, message: String) -> Error {
    Error::Invalid(format!("{at}.{field}: {message}"))
}

/// One `[[webhooks]]` table (`at` names it in errors), defaults applied.
fn webhook(
    at: &str,
    hook: WebhookFile,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Webhook, Error> {
    let invalid = |field: &str, message: String| invalid_at(at, field, message);
    if !runledger_domain::valid_team_name(&hook.name) {
        return Err(invalid(
            "name",
            format!(
                "{:?} is not a webhook name ({})",
                hook.name,
                runledger_domain::TEAM_NAME_RULE
            ),
        ));
    }
    let url = url(at, &hook.url)?;
    let secret = secret(at, hook.secret, hook.secret_file, secrets)?;
    let key = webhook_key(&secret).map_err(|m| invalid("secret", m))?;
    let events = events(at, hook.events)?;
    if hook.teams.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid(
            "teams",
            "an empty list would deliver nothing; leave `teams` out for the runs of every team"
                .into(),
        ));
    }
    let teams = teams(at, hook.teams)?;
    let timeout_secs = Range::between(1, 300, "a time", "seconds").or_default(
        &format!("{at}.timeout_secs"),
        hook.timeout_secs,
        DEFAULT_WEBHOOK_TIMEOUT_SECS,
    )?;
    let retry_initial_ms = Range::between(1, 3_600_000, "a time", "milliseconds").or_default(
        &format!("{at}.retry_initial_ms"),
        hook.retry_initial_ms,
        DEFAULT_WEBHOOK_RETRY_INITIAL_MS,
    )?;
    let max_in_flight = Range::between(1, 256, "a number", "").or_default(
        &format!("{at}.max_in_flight"),
        hook.max_in_flight,
        DEFAULT_WEBHOOK_MAX_IN_FLIGHT,
    )?;
    Ok(Webhook {
        name: hook.name,
        url,
        key: WebhookKey(key),
        events,
        allow_private: hook.allow_private,
        teams,
        timeout: std::time::Duration::from_secs(timeout_secs),
        retry_initial: std::time::Duration::from_millis(retry_initial_ms),
        max_in_flight,
    })
}

/// A webhook's `url`: `http` or `https`, with a host and no credentials.
fn url(at: &str, text: &str) -> Result<url::Url, Error> {
    let invalid = |field: &str, message: String| invalid_at(at, field, message);
    let url = url::Url::parse(text)
        .map_err(|e| invalid("url", format!("{text:?} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid(
            "url",
            format!("{text:?} is not an http:// or https:// URL with a host"),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "url",
            "must not carry credentials (they would be sent in clear in every log line that \
             names the URL); authenticate deliveries by their signature"
                .into(),
        ));
    }
    Ok(url)
}

/// The signing secret of a webhook: the `[secrets]` entry its `secret` names, or the trimmed
/// contents of its `secret_file`; exactly one of the two.
fn secret(
    at: &str,
    name: Option<String>,
    file: Option<PathBuf>,
    secrets: &BTreeMap<String, Secret>,
) -> Result<String, Error> {
    let invalid = |field: &str, message: String| invalid_at(at, field, message);
    Ok(match (name, file) {
        (Some(name), None) => match secrets.get(&name) {
            Some(secret) => secret.value.expose().to_string(),
            None => {
                return Err(invalid(
                    "secret",
                    format!("{name:?} is not defined in [secrets]"),
                ))
            }
        },
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                invalid(
                    "secret_file",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            text.trim().to_string()
        }
        (Some(_), Some(_)) => {
            return Err(invalid(
                "secret",
                "give either secret (a [secrets] entry) or secret_file, not both".into(),
            ))
        }
        (None, None) => {
            return Err(invalid(
                "secret",
                "missing: every delivery is signed; name a [secrets] entry (or set secret_file)"
                    .into(),
            ))
        }
    })
}

/// A webhook's `events`: each a known topic, delivered once, in `Topic::ALL` order; absent
/// means every change of state.
fn events(at: &str, names: Option<Vec<String>>) -> Result<Vec<runledger_domain::Topic>, Error> {
    let invalid = |field: &str, message: String| invalid_at(at, field, message);
    Ok(match names {
        None => runledger_domain::Topic::STATE_CHANGES.to_vec(),
        Some(names) if names.is_empty() => {
            return Err(invalid(
                "events",
                "an empty list would deliver nothing; leave `events` out for every change of \
                 state"
                    .into(),
            ))
        }
        Some(names) => {
            let mut events = Vec::new();
            for (i, name) in names.iter().enumerate() {
                let topic = runledger_domain::Topic::parse(name).ok_or_else(|| {
                    let known: Vec<&str> = runledger_domain::Topic::ALL
                        .iter()
                        .map(|t| t.as_str())
                        .collect();
                    invalid(
                        &format!("events[{i}]"),
                        format!("{name:?} is not an event; known: {}", known.join(", ")),
                    )
                })?;
                if !events.contains(&topic) {
                    events.push(topic);
                }
            }
            events.sort();
            events
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{load_text, Config, Overrides};

    /// A `[secrets]` entry holding a Standard Webhooks secret (the specification's example).
    const HOOK_SECRETS: &str = "[secrets]\nHOOK = { env = \"RUNLEDGER_TEST_WEBHOOK_SECRET\" }\n\n";

    fn with_hook_secret() {
        std::env::set_var(
            "RUNLEDGER_TEST_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        );
    }

    #[test]
    fn webhooks_get_defaults_and_a_decoded_key() {
        with_hook_secret();
        let config = load_text(&format!(
            "{HOOK_SECRETS}[[webhooks]]\nname = \"ci\"\nurl = \"https://hooks.example/x\"\nsecret = \"HOOK\"\n\n\
             [[webhooks]]\nname = \"art\"\nurl = \"http://10.0.0.5:9000/\"\nsecret = \"HOOK\"\n\
             events = [\"run.artifact\", \"run.failed\", \"run.failed\"]\nallow_private = true\n\
             teams = [\"infra\"]\ntimeout_secs = 3\nretry_initial_ms = 50\nmax_in_flight = 2\n"
        ))
        .expect("valid");
        let ci = &config.webhooks[0];
        assert_eq!(ci.name, "ci");
        assert_eq!(ci.events, runledger_domain::Topic::STATE_CHANGES);
        assert!(!ci.allow_private && ci.teams.is_empty());
        assert_eq!(ci.timeout, std::time::Duration::from_secs(15));
        assert_eq!(ci.retry_initial, std::time::Duration::from_secs(5));
        // The base64 after whsec_ is the key.
        assert_eq!(ci.key.0.len(), 24);
        assert!(!format!("{ci:?}").contains("MfKQ"));
        let art = &config.webhooks[1];
        assert_eq!(
            art.events,
            [
                runledger_domain::Topic::Failed,
                runledger_domain::Topic::Artifact
            ]
        );
        assert!(art.allow_private);
        assert_eq!(art.teams, ["infra"]);
        assert_eq!(art.max_in_flight, 2);
        assert_eq!(
            webhook_key("a raw secret of some length").expect("raw"),
            b"a raw secret of some length"
        );
    }

    #[test]
    fn bad_webhooks_are_load_errors_naming_the_field() {
        with_hook_secret();
        let hook = "[[webhooks]]\nname = \"ci\"\nurl = \"https://hooks.example/x\"\n";
        for (extra, want) in [
            (
                "secret = \"HOOK\"\nevents = [\"run.finished\"]\n",
                "webhooks[0].events[0]: \"run.finished\" is not an event",
            ),
            (
                "secret = \"HOOK\"\nevents = []\n",
                "webhooks[0].events: an empty list",
            ),
            (
                "secret = \"NOPE\"\n",
                "webhooks[0].secret: \"NOPE\" is not defined in [secrets]",
            ),
            ("", "webhooks[0].secret: missing"),
            ("secret = \"HOOK\"\nsecret_file = \"/x\"\n", "not both"),
            (
                "secret_file = \"/nonexistent/secret\"\n",
                "webhooks[0].secret_file: cannot read",
            ),
            (
                "secret = \"HOOK\"\nteams = []\n",
                "webhooks[0].teams: an empty list",
            ),
            (
                "secret = \"HOOK\"\nteams = [\"Infra\"]\n",
                "is not a team name",
            ),
            (
                "secret = \"HOOK\"\ntimeout_secs = 0\n",
                "webhooks[0].timeout_secs",
            ),
            (
                "secret = \"HOOK\"\nretry_initial_ms = 0\n",
                "webhooks[0].retry_initial_ms",
            ),
            (
                "secret = \"HOOK\"\nmax_in_flight = 0\n",
                "webhooks[0].max_in_flight",
            ),
            (
                "secret = \"HOOK\"\nsurprise = 1\n",
                "unknown field `surprise`",
            ),
        ] {
            let err = load_text(&format!("{HOOK_SECRETS}{hook}{extra}"))
                .expect_err(extra)
                .to_string();
            assert!(err.contains(want), "{extra:?}: {err}");
        }
        for (url, want) in [
            ("ftp://hooks.example/", "not an http:// or https:// URL"),
            ("not a url", "is not a URL"),
            (
                "https://user:pw@hooks.example/",
                "must not carry credentials",
            ),
        ] {
            let err = load_text(&format!(
                "{HOOK_SECRETS}[[webhooks]]\nname = \"ci\"\nurl = \"{url}\"\nsecret = \"HOOK\"\n"
            ))
            .expect_err(url)
            .to_string();
            assert!(err.contains(want), "{url}: {err}");
        }
        for (name, want) in [
            ("CI", "is not a webhook name"),
            ("", "is not a webhook name"),
        ] {
            let err = load_text(&format!(
                "{HOOK_SECRETS}[[webhooks]]\nname = \"{name}\"\nurl = \"https://h.example/\"\nsecret = \"HOOK\"\n"
            ))
            .expect_err(name)
            .to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
        let twice = format!(
            "{HOOK_SECRETS}[[webhooks]]\nname = \"ci\"\nurl = \"https://a.example/\"\nsecret = \"HOOK\"\n\n\
             [[webhooks]]\nname = \"ci\"\nurl = \"https://b.example/\"\nsecret = \"HOOK\"\n"
        );
        let err = load_text(&twice).expect_err("twice").to_string();
        assert!(
            err.contains("webhooks[1].name: \"ci\" is used by another webhook"),
            "{err}"
        );
        assert!(webhook_key("whsec_not*base64").is_err());
        assert!(webhook_key("short")
            .expect_err("short")
            .contains("at least 16"));
    }

    #[test]
    fn a_bad_webhook_names_its_line() {
        with_hook_secret();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hooks.toml");
        std::fs::write(
            &path,
            format!(
                "{HOOK_SECRETS}[[webhooks]]\nname = \"a\"\nurl = \"https://a.example/\"\nsecret = \"HOOK\"\n\n\
                 [[webhooks]]\nname = \"b\"\nurl = \"https://b.example/\"\nsecret = \"HOOK\"\nevents = [\"run.nope\"]\n"
            ),
        )
        .expect("write");
        let err = Config::load(Some(&path), &Overrides::default())
            .expect_err("bad event")
            .to_string();
        assert!(err.contains("line 13: webhooks[1].events[0]"), "{err}");
    }
}
