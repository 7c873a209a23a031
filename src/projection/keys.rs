//! The key layout of the read index — pure functions from a run to the index entries that
//! must exist for it. `apply` in the parent module writes the difference between two runs'
//! entry sets; a rebuild writes the entries of every folded run. Keeping this pure is what
//! lets a property test compare the two.
//!
//! ```text
//! F  field(1)  hash(value)(8)  updated_at(8)  run_id    one per filterable field with a value
//! T  escaped(lowercase(title))  00 00  run_id(16)       title sort
//! ```
//! These are logical entries. The entries of one range (`F field hash`, or `T`) are stored in
//! blocks of positions (`blocks.rs`); layout 4 kept each `T` entry as a sled key of its own.
//! Every run has exactly one state, so the five `F State` ranges together hold every run once
//! in updated-at order: an unfiltered list merges them, and needs no range of its own (layout 2
//! had one, `U`, which cost every transition a removal and an insertion more).
//! Filter values are hashed to fixed width so that any string works as a key part; a hash
//! collision only costs a wasted candidate, because every candidate is re-checked against the
//! full filter before it is returned.

use std::cell::RefCell;

use sha2::{Digest, Sha256};

use crate::domain::{Run, RunId};
use crate::memo::Memo;

pub const FILTER: u8 = b'F';
pub const TITLE: u8 = b'T';

/// The indexed filter fields, with their tag byte in `F` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    State = 1,
    Name = 2,
    Creator = 3,
    ModelId = 4,
    Source = 5,
    EnvironmentId = 6,
}

/// Values remembered per field by `value_hash` before its memo is cleared.
const MEMO_VALUES: usize = 4096;

thread_local! {
    /// `value_hash` of recently seen values, per field tag. Filter values repeat a lot (five
    /// states, a few creators, models and environments), and SHA-256 is not free on a CPU
    /// without SHA instructions: a rebuild hashes 6 values per run and an index update the
    /// fields of two runs. The memo trades up to `MEMO_VALUES` values per field and thread
    /// for those hashes.
    static MEMO: RefCell<[Memo<String, [u8; 8]>; 8]> =
        RefCell::new(std::array::from_fn(|_| Memo::new(MEMO_VALUES)));
}

/// The fixed-width stand-in for a filter value in keys: the first 8 bytes of SHA-256 over the
/// field tag and the value. A cryptographic hash, so that nobody can pick a value whose entries
/// fall in another value's range (a collision costs only wasted candidates, but many of them
/// would slow that range's lists).
pub fn value_hash(field: Field, value: &str) -> [u8; 8] {
    let compute = || {
        let mut h = Sha256::new();
        h.update([field as u8]);
        h.update(value.as_bytes());
        let digest = h.finalize();
        let mut out = [0u8; 8];
        out.copy_from_slice(&digest[..8]);
        out
    };
    MEMO.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return compute();
        };
        memo[field as usize].get_or_compute(value, compute)
    })
}

/// The prefix under which entries of `field = value` live, with room for a position.
pub fn filter_prefix(field: Field, value: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(34);
    key.push(FILTER);
    key.push(field as u8);
    key.extend_from_slice(&value_hash(field, value));
    key
}

/// The position of a run in updated-at order: what follows the prefix in `F` keys.
pub fn updated_position(run: &Run) -> Vec<u8> {
    let mut pos = Vec::with_capacity(24);
    pos.extend_from_slice(&run.updated_at.0.to_be_bytes());
    pos.extend_from_slice(&run.id.to_bytes());
    pos
}

/// The position of a run in title order: alphabetical ignoring case (the lowercased title),
/// ties broken by run id. Zero bytes are escaped as `00 FF` and the title ends with `00 00`, so
/// the byte order of positions is the order of lowercased titles.
pub fn title_position(run: &Run) -> Vec<u8> {
    let folded = run.title.to_lowercase();
    let mut pos = Vec::with_capacity(folded.len() + 18);
    for &b in folded.as_bytes() {
        pos.push(b);
        if b == 0 {
            pos.push(0xFF);
        }
    }
    pos.extend_from_slice(&[0, 0]);
    pos.extend_from_slice(&run.id.to_bytes());
    pos
}

/// The run id at the end of any position.
pub fn id_of_position(pos: &[u8]) -> Option<RunId> {
    let start = pos.len().checked_sub(16)?;
    let bytes: [u8; 16] = pos[start..].try_into().ok()?;
    Some(RunId::from_bytes(bytes))
}

/// The updated-at time at the start of an updated-order position.
pub fn updated_of_position(pos: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(pos.get(..8)?.try_into().ok()?))
}

/// The values of the filter fields of a run (state, name, creator, model, source, environment).
pub fn field_values(run: &Run) -> Vec<(Field, &str)> {
    let mut values = vec![
        (Field::State, run.state.as_str()),
        (Field::Creator, run.creator.uid.as_str()),
        (Field::Source, run.source.as_str()),
    ];
    if let Some(name) = &run.config.name {
        values.push((Field::Name, name));
    }
    if let Some(model) = &run.config.model_id {
        values.push((Field::ModelId, model));
    }
    if let Some(env) = &run.config.environment_id {
        values.push((Field::EnvironmentId, env));
    }
    values
}

/// Every index key that must exist for `run`, sorted.
pub fn entries(run: &Run) -> Vec<Vec<u8>> {
    let updated = updated_position(run);
    let mut keys = Vec::with_capacity(8);
    for (field, value) in field_values(run) {
        let mut k = filter_prefix(field, value);
        k.extend_from_slice(&updated);
        keys.push(k);
    }
    let mut t = vec![TITLE];
    t.extend_from_slice(&title_position(run));
    keys.push(t);
    keys.sort();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(field: Field, value: &str) -> [u8; 8] {
        let digest = Sha256::new()
            .chain_update([field as u8])
            .chain_update(value)
            .finalize();
        digest[..8].try_into().expect("8 bytes")
    }

    /// The memo changes nothing: remembered, forgotten or never seen, a value hashes the same,
    /// and the hash is the layout's (`01 "QUEUED"` below is a key of every stored index).
    #[test]
    fn remembered_hashes_are_the_hashes() {
        for _ in 0..3 {
            assert_eq!(
                value_hash(Field::State, "QUEUED"),
                [0x8d, 0x99, 0x1e, 0x90, 0xbd, 0x45, 0x31, 0x3c]
            );
        }
        for i in 0..=MEMO_VALUES + 1 {
            let value = format!("n{i}");
            assert_eq!(value_hash(Field::Name, &value), sha(Field::Name, &value));
            assert_eq!(value_hash(Field::Name, &value), sha(Field::Name, &value));
        }
        assert_ne!(
            value_hash(Field::Name, "x"),
            value_hash(Field::Creator, "x")
        );
    }
}
