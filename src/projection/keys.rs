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

use sha2::{Digest, Sha256};

use crate::domain::{Run, RunId};

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

pub fn value_hash(field: Field, value: &str) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update([field as u8]);
    h.update(value.as_bytes());
    let digest = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// The prefix under which entries of `field = value` live.
pub fn filter_prefix(field: Field, value: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(10);
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
