//! `server.seal_webhook`: each seal sent, once durable, to a receiver off the host, signed like
//! every webhook (Standard Webhooks: `webhook-id` `seal_<number>`, `webhook-timestamp`,
//! `webhook-signature`), through the webhooks' client and its address rules. A few attempts
//! with the webhooks' backoff; nothing is kept on disk: a receiver that misses one sees the gap
//! in the next seal's `prev`, and every seal is in the store and its exports.

use std::sync::Arc;

use runledger_config::Webhook;
use runledger_store::seals::{ProofSeal, Seal};

use crate::webhooks::client::{client, post_signed, Failure};
use crate::webhooks::{backoff, Error};

/// Attempts per seal.
const ATTEMPTS: u32 = 5;

/// The configured receiver of seals.
#[derive(Clone)]
pub struct SealWebhook {
    hook: Arc<Webhook>,
    client: reqwest::Client,
}

/// The body of a seal's delivery: `{"type":"seal","data":{…every field of the seal…}}`.
fn body(seal: &Seal) -> Vec<u8> {
    let data = serde_json::to_value(ProofSeal::of(seal)).unwrap_or(serde_json::Value::Null);
    serde_json::json!({ "type": "seal", "data": data })
        .to_string()
        .into_bytes()
}

impl SealWebhook {
    pub fn new(hook: Webhook) -> Result<SealWebhook, Error> {
        Ok(SealWebhook {
            client: client(&hook)?,
            hook: Arc::new(hook),
        })
    }

    /// Sends a seal in the background, retrying a few times.
    pub fn send(&self, seal: &Seal) {
        let id = format!("seal_{}", seal.number);
        let body = Arc::new(body(seal));
        let this = self.clone();
        tokio::spawn(async move {
            for attempt in 1..=ATTEMPTS {
                let why = match post_signed(&this.client, &this.hook, &id, body.clone()).await {
                    Ok(status) if (200..300).contains(&status) => return,
                    Ok(status) => format!("HTTP {status}"),
                    Err(Failure::Refused(why)) => {
                        // The address rule does not change between attempts.
                        tracing::warn!(id, why, "the seal webhook's address is refused");
                        return;
                    }
                    Err(Failure::Transport(why) | Failure::Payload(why)) => why,
                };
                tracing::warn!(
                    id,
                    attempt,
                    why,
                    "sending a seal to server.seal_webhook failed"
                );
                if attempt < ATTEMPTS {
                    tokio::time::sleep(backoff::next_delay(this.hook.retry_initial, attempt)).await;
                }
            }
        });
    }
}
