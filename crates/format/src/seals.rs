//! A seal's line in an export: every field of the seal in hex, and its leaves (each chain's id,
//! last sequence number and link), written and read back exactly. The seal's signature is not
//! checked here; that is the chain checker's (`runledger_store::seals::Checker`).

use serde::Deserialize;
use serde_json::{json, Value};

use crate::time::{hex, unhex32};
use runledger_domain::{RunId, Timestamp};
use runledger_store::chain::Head;
use runledger_store::seals::{ChainId, Leaf, Seal};

pub fn seal_json(seal: &Seal, leaves: &[Leaf]) -> Value {
    let leaves: Vec<Value> = leaves
        .iter()
        .map(|leaf| {
            let mut v = match &leaf.chain {
                ChainId::Run(run_id) => json!({ "run_id": run_id.to_string() }),
                ChainId::Named(name) => json!({ "chain": name }),
            };
            v["seq"] = json!(leaf.head.seq);
            v["link"] = json!(hex(&leaf.head.link));
            v
        })
        .collect();
    json!({
        "record": "seal",
        "number": seal.number,
        "at_ms": seal.at.0,
        "prev": hex(&seal.prev),
        "root": hex(&seal.root),
        "leaves": seal.leaves,
        "public_key": hex(&seal.public_key),
        "new_key": seal.new_key,
        "signature": hex(&seal.signature),
        "chains": leaves,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SealIn {
    #[allow(dead_code)]
    record: String,
    number: u64,
    at_ms: u64,
    prev: String,
    root: String,
    leaves: u64,
    public_key: String,
    new_key: bool,
    signature: String,
    chains: Vec<LeafIn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LeafIn {
    run_id: Option<String>,
    chain: Option<String>,
    seq: u64,
    link: String,
}

fn unhex64(text: &str) -> Option<[u8; 64]> {
    if text.len() != 128 {
        return None;
    }
    let (a, b) = (unhex32(&text[..64])?, unhex32(&text[64..])?);
    let mut out = [0u8; 64];
    out[..32].copy_from_slice(&a);
    out[32..].copy_from_slice(&b);
    Some(out)
}

pub fn seal_from_json(value: &Value) -> Result<(Seal, Vec<Leaf>), String> {
    let s = SealIn::deserialize(value).map_err(|e| format!("bad seal record: {e}"))?;
    let field = |name: &str| format!("seal {}: {name} is not 64 hex digits", s.number);
    let seal = Seal {
        number: s.number,
        at: Timestamp(s.at_ms),
        prev: unhex32(&s.prev).ok_or_else(|| field("prev"))?,
        root: unhex32(&s.root).ok_or_else(|| field("root"))?,
        leaves: s.leaves,
        public_key: unhex32(&s.public_key).ok_or_else(|| field("public_key"))?,
        new_key: s.new_key,
        signature: unhex64(&s.signature)
            .ok_or_else(|| format!("seal {}: signature is not 128 hex digits", s.number))?,
    };
    let leaves = s
        .chains
        .iter()
        .map(|leaf| {
            let chain = match (&leaf.run_id, &leaf.chain) {
                (Some(id), None) => ChainId::Run(
                    id.parse::<RunId>()
                        .map_err(|_| format!("seal {}: {id:?} is not a run id", s.number))?,
                ),
                (None, Some(name)) => ChainId::Named(name.clone()),
                _ => {
                    return Err(format!(
                        "seal {}: a leaf names a run_id or a chain, one of the two",
                        s.number
                    ))
                }
            };
            Ok(Leaf {
                chain,
                head: Head {
                    seq: leaf.seq,
                    link: unhex32(&leaf.link).ok_or_else(|| field("a leaf's link"))?,
                },
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((seal, leaves))
}
