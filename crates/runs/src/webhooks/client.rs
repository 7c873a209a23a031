//! The HTTP side of a subscription: its client (no redirects, no proxy, the SSRF rule's
//! resolver), the fingerprint a 410 disabling is tied to, and one signed attempt sent to its
//! receiver. It records nothing and decides no retry; that is the dispatcher's (`dispatch`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::error::Error;
use super::{address, sign};
use runledger_config::Webhook;

/// A configured subscription, as the dispatcher uses it.
pub(super) struct Subscription {
    pub(super) config: Webhook,
    /// What a 410 disabling is tied to: the URL, key and filters it was given under.
    pub(super) fingerprint: [u8; 32],
    pub(super) disabled: AtomicBool,
    pub(super) client: reqwest::Client,
    pub(super) slots: Arc<tokio::sync::Semaphore>,
}

pub(super) fn fingerprint(hook: &Webhook) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(hook.url.as_str().as_bytes());
    h.update([0]);
    h.update(&hook.key.0);
    h.update([0, u8::from(hook.allow_private)]);
    for t in &hook.events {
        h.update([t.code()]);
    }
    for team in &hook.teams {
        h.update(team.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

pub(crate) fn client(hook: &Webhook) -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .use_rustls_tls()
        // A 3xx is a failed attempt: following it would reach an address the SSRF rule never
        // saw.
        .redirect(reqwest::redirect::Policy::none())
        // A proxy from the environment would take the connection out of the resolver's hands.
        .no_proxy()
        .dns_resolver(Arc::new(address::Guard {
            allow_private: hook.allow_private,
        }))
        .timeout(hook.timeout)
        .user_agent(concat!("runledger-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|source| Error::Client {
            name: hook.name.clone(),
            source,
        })
}

/// Why an attempt got no answer.
pub(crate) enum Failure {
    /// The SSRF rule refused the address.
    Refused(String),
    /// Connection, TLS, timeout.
    Transport(String),
    /// The payload could not be made.
    Payload(String),
}

/// Sends one signed attempt; the receiver's status, or why there was none.
pub(super) async fn send(sub: &Subscription, id: &str, body: Arc<Vec<u8>>) -> Result<u16, Failure> {
    post_signed(&sub.client, &sub.config, id, body).await
}

/// One signed POST of `body` to `hook` with `client` (made by `client`), the literal-address
/// rule checked first: what every webhook attempt is, the seal webhook's included.
pub(crate) async fn post_signed(
    client: &reqwest::Client,
    hook: &Webhook,
    id: &str,
    body: Arc<Vec<u8>>,
) -> Result<u16, Failure> {
    // A literal address never reaches the resolver, so it is checked here.
    let literal = match hook.url.host() {
        Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
        _ => None,
    };
    if let Some(ip) = literal.filter(|_| !hook.allow_private) {
        if let Some(why) = address::forbidden(ip) {
            return Err(Failure::Refused(
                address::Refused {
                    host: ip.to_string(),
                    ip,
                    why,
                }
                .to_string(),
            ));
        }
    }
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let signature = sign::signature(&hook.key.0, id, timestamp, &body);
    let sent = client
        .post(hook.url.clone())
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body.as_ref().clone())
        .send()
        .await;
    match sent {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) => Err(match address::refusal_in(&e) {
            Some(refused) => Failure::Refused(refused),
            None => Failure::Transport(describe(&e, hook.timeout)),
        }),
    }
}

/// A transport error in one line: its kind and the chain of its causes.
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("no answer within {} s", timeout.as_secs());
    }
    let mut text = String::from(if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    });
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
