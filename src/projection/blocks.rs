//! Blocks: how the `F` ranges of the read index are stored. A range (`F field hash`) is a sorted
//! set of 24-byte positions (`updated_at ‖ run_id`); it is kept as a few sled entries, each
//! holding up to `MAX_BLOCK` consecutive positions, instead of one sled entry per position.
//!
//! ```text
//! key    F  field(1)  hash(8)  lower(24)      lower: a lower bound of the block's positions
//! value  position(24) position(24) …          sorted, each ≥ lower and < the next block's lower
//! ```
//!
//! Why: sled 0.34 costs 6–15 µs of CPU per write and keeps one in-memory page-table entry per
//! 16 entries of a tree. With a key per position, every run cost 5–6 index writes on each
//! transition and 5–6 entries for good. Blocked, the positions of all runs the projector applies
//! in one batch that land in the same block (new runs all land at the tail of each range) cost
//! one write of that block, and a range holds about `MAX_BLOCK / 2` to `MAX_BLOCK` positions per
//! sled entry.
//!
//! Writers must be serialised (a block is read, changed and written back); `Index` holds its
//! write lock around `write`. Readers see each block whole, because a sled value is replaced
//! atomically; a walk overlapping a write is handled like any other (see `Writes` in `mod.rs`).

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::ops::Bound;

use super::Error;

/// Bytes of a range prefix: `F`, the field tag and the value hash.
pub const PREFIX: usize = 10;
/// Bytes of a position.
pub const POS: usize = 24;
/// Positions a block may hold before it is split.
const MAX_BLOCK: usize = 32;
/// Positions per block written by a rebuild: room for some growth before the first split.
pub const BUILD_BLOCK: usize = 24;

type Prefix = [u8; PREFIX];
type Position = [u8; POS];

/// Splits a logical `F` entry (`prefix ‖ position`) into its parts.
pub fn split(key: &[u8]) -> Option<(Prefix, Position)> {
    if key.len() != PREFIX + POS {
        return None;
    }
    Some((
        key[..PREFIX].try_into().ok()?,
        key[PREFIX..].try_into().ok()?,
    ))
}

fn positions_of(value: &[u8]) -> Result<Vec<Position>, Error> {
    if value.len() % POS != 0 {
        return Err(Error::CorruptRow {
            run_id: String::new(),
            detail: format!("an index block of {} bytes", value.len()),
        });
    }
    Ok(value
        .chunks_exact(POS)
        .map(|c| {
            let mut p = [0u8; POS];
            p.copy_from_slice(c);
            p
        })
        .collect())
}

fn block_key(prefix: &Prefix, lower: &Position) -> Vec<u8> {
    [&prefix[..], &lower[..]].concat()
}

/// The lower bound of the block a position belongs to: the last block whose lower bound is at
/// or below it, else the range's first block. `None` if the range has no block.
fn locate(tree: &sled::Tree, prefix: &Prefix, pos: &Position) -> Result<Option<Position>, Error> {
    let at_or_below = tree
        .range(prefix.to_vec()..=block_key(prefix, pos))
        .next_back()
        .transpose()?;
    let found = match at_or_below {
        Some((k, _)) => Some(k),
        None => tree
            .range::<Vec<u8>, _>((
                Bound::Included(prefix.to_vec()),
                match super::query::successor(prefix) {
                    Some(end) => Bound::Excluded(end),
                    None => Bound::Unbounded,
                },
            ))
            .next()
            .transpose()?
            .map(|(k, _)| k),
    };
    Ok(found.and_then(|k| k.get(PREFIX..)?.try_into().ok()))
}

/// One block being changed: its key as stored (`None`: not stored yet) and its positions.
struct Loaded {
    positions: Vec<Position>,
    changed: bool,
}

/// One write to the index tree: a value to insert, or `None` to remove the key.
pub type Op = (Vec<u8>, Option<Vec<u8>>);

/// Adds to `ops` the block writes that apply removals and insertions of logical `F` entries
/// (`prefix ‖ position`); each block they touch is read once and written once. Returns whether
/// a block was split or re-keyed: that is several writes, and a crash between them would lose
/// positions of runs that share the block, so the caller journals such a set of writes before
/// it makes them (see `Trees::commit`).
pub fn write(
    tree: &sled::Tree,
    removals: &[Vec<u8>],
    insertions: &[Vec<u8>],
    ops: &mut Vec<Op>,
) -> Result<bool, Error> {
    let mut reshaped = false;
    let mut by_range: BTreeMap<Prefix, Vec<(Position, bool)>> = BTreeMap::new();
    for (keys, insert) in [(removals, false), (insertions, true)] {
        for key in keys {
            let (prefix, pos) = split(key).ok_or_else(|| Error::CorruptRow {
                run_id: String::new(),
                detail: format!("an index entry of {} bytes", key.len()),
            })?;
            by_range.entry(prefix).or_default().push((pos, insert));
        }
    }
    for (prefix, changes) in by_range {
        // Keyed by the block's stored lower bound; `None` is a block the range did not have.
        let mut blocks: BTreeMap<Option<Position>, Loaded> = BTreeMap::new();
        for (pos, insert) in changes {
            let block = match blocks.entry(locate(tree, &prefix, &pos)?) {
                Entry::Occupied(loaded) => loaded.into_mut(),
                Entry::Vacant(slot) => {
                    let positions = match slot.key() {
                        Some(l) => match tree.get(block_key(&prefix, l))? {
                            Some(v) => positions_of(&v)?,
                            None => Vec::new(),
                        },
                        None => Vec::new(),
                    };
                    slot.insert(Loaded {
                        positions,
                        changed: false,
                    })
                }
            };
            match (block.positions.binary_search(&pos), insert) {
                (Err(at), true) => {
                    block.positions.insert(at, pos);
                    block.changed = true;
                }
                (Ok(at), false) => {
                    block.positions.remove(at);
                    block.changed = true;
                }
                _ => {}
            }
        }
        for (lower, block) in blocks {
            if block.changed {
                reshaped |= store(ops, &prefix, lower, &block.positions);
            }
        }
    }
    Ok(reshaped)
}

/// Writes a changed block back: removed when empty, split in halves when over `MAX_BLOCK`, and
/// stored under its first position when that is below the lower bound it had (the range's
/// first block, given a new smallest position).
/// Returns whether it took more than one write.
fn store(
    ops: &mut Vec<Op>,
    prefix: &Prefix,
    lower: Option<Position>,
    positions: &[Position],
) -> bool {
    let Some(first) = positions.first() else {
        if let Some(l) = lower {
            ops.push((block_key(prefix, &l), None));
        }
        return false;
    };
    let mut writes = 0;
    let key = match lower {
        Some(l) if l <= *first => l,
        Some(l) => {
            ops.push((block_key(prefix, &l), None));
            writes += 1;
            *first
        }
        None => *first,
    };
    let chunks = if positions.len() <= MAX_BLOCK {
        1
    } else {
        positions.len().div_ceil(MAX_BLOCK / 2)
    };
    let per = positions.len().div_ceil(chunks);
    for (i, chunk) in positions.chunks(per).enumerate() {
        let chunk_key = if i == 0 { key } else { chunk[0] };
        ops.push((block_key(prefix, &chunk_key), Some(chunk.concat())));
        writes += 1;
    }
    writes > 1
}

/// Writes a whole range from sorted positions (a rebuild, into an empty tree).
pub fn build(tree: &sled::Tree, prefix: &Prefix, sorted: &[Position]) -> Result<(), Error> {
    for chunk in sorted.chunks(BUILD_BLOCK) {
        tree.insert(block_key(prefix, &chunk[0]), chunk.concat())?;
    }
    Ok(())
}

/// The positions of the range `prefix`, in `order`, strictly after (in that order) `after`.
pub fn positions(
    tree: &sled::Tree,
    prefix: &[u8],
    after: Option<&[u8]>,
    descending: bool,
) -> super::query::Positions<'static> {
    let full = |suffix: &[u8]| [prefix, suffix].concat();
    let end = match super::query::successor(prefix) {
        Some(end) => Bound::Excluded(end),
        None => Bound::Unbounded,
    };
    let after: Option<Vec<u8>> = after.map(<[u8]>::to_vec);
    let blocks: Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>> =
        match (&after, descending) {
            (None, false) => {
                Box::new(tree.range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), end)))
            }
            (None, true) => Box::new(
                tree.range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), end))
                    .rev(),
            ),
            (Some(a), false) => {
                // Start at the block that holds `a` (its positions after `a` come first).
                let start = tree
                    .range(prefix.to_vec()..=full(a))
                    .next_back()
                    .and_then(Result::ok)
                    .map(|(k, _)| k.to_vec())
                    .unwrap_or_else(|| prefix.to_vec());
                Box::new(tree.range::<Vec<u8>, _>((Bound::Included(start), end)))
            }
            // Every position below `a` is in a block whose lower bound is at or below `a`.
            (Some(a), true) => Box::new(tree.range(prefix.to_vec()..=full(a)).rev()),
        };
    Box::new(blocks.flat_map(move |item| {
        let expanded: Vec<Result<Vec<u8>, Error>> = match item {
            Err(e) => vec![Err(e.into())],
            Ok((_, value)) => match positions_of(&value) {
                Err(e) => vec![Err(e)],
                Ok(mut ps) => {
                    if descending {
                        ps.reverse();
                    }
                    ps.into_iter()
                        .filter(|p| match &after {
                            None => true,
                            Some(a) if descending => p.as_slice() < a.as_slice(),
                            Some(a) => p.as_slice() > a.as_slice(),
                        })
                        .map(|p| Ok(p.to_vec()))
                        .collect()
                }
            },
        };
        expanded
    }))
}

/// How many positions the range `prefix` holds.
pub fn count(tree: &sled::Tree, prefix: &[u8]) -> Result<u64, Error> {
    let mut n = 0u64;
    for item in tree.scan_prefix(prefix) {
        let (_, value) = item?;
        n += (value.len() / POS) as u64;
    }
    Ok(n)
}

/// Every logical entry of an index tree in key order: each block expanded to `prefix ‖
/// position` entries, every other key as it is.
pub fn logical(tree: &sled::Tree) -> impl Iterator<Item = Result<Vec<u8>, Error>> + '_ {
    tree.iter().flat_map(|item| {
        let expanded: Vec<Result<Vec<u8>, Error>> = match item {
            Err(e) => vec![Err(e.into())],
            Ok((key, value)) if key.first() == Some(&super::keys::FILTER) => {
                match positions_of(&value) {
                    Err(e) => vec![Err(e)],
                    Ok(ps) => ps
                        .into_iter()
                        .map(|p| Ok([&key[..PREFIX.min(key.len())], &p[..]].concat()))
                        .collect(),
                }
            }
            Ok((key, _)) => vec![Ok(key.to_vec())],
        };
        expanded
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn tree() -> (sled::Db, sled::Tree) {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let tree = db.open_tree("t").expect("tree");
        (db, tree)
    }

    fn entry(prefix: u8, pos: u16) -> Vec<u8> {
        let mut key = vec![super::super::keys::FILTER, prefix];
        key.extend_from_slice(&[0; 8]);
        let mut p = [0u8; POS];
        p[..2].copy_from_slice(&pos.to_be_bytes());
        p[23] = 1;
        key.extend_from_slice(&p);
        key
    }

    proptest! {
        /// Blocks hold exactly the set a plain set of keys would, whatever the batches, and walk
        /// it in order in both directions from any position.
        #[test]
        fn blocks_behave_like_a_sorted_set(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u8..2, 0u16..300, any::<bool>()), 0..80),
                1..12,
            ),
            from in 0u16..300,
        ) {
            let (_db, tree) = tree();
            let mut model = BTreeSet::new();
            for batch in batches {
                let mut removals = Vec::new();
                let mut insertions = Vec::new();
                let mut seen = BTreeSet::new();
                for (prefix, pos, insert) in batch {
                    let key = entry(prefix, pos);
                    // One operation per entry per batch, as `Index` produces them.
                    if !seen.insert(key.clone()) {
                        continue;
                    }
                    if insert {
                        model.insert(key.clone());
                        insertions.push(key);
                    } else {
                        model.remove(&key);
                        removals.push(key);
                    }
                }
                let mut ops = Vec::new();
                write(&tree, &removals, &insertions, &mut ops).expect("write");
                for (key, value) in ops {
                    match value {
                        Some(v) => tree.insert(key, v).map(|_| ()),
                        None => tree.remove(key).map(|_| ()),
                    }
                    .expect("apply");
                }
                let stored: Vec<Vec<u8>> = logical(&tree).collect::<Result<_, _>>().expect("walk");
                prop_assert_eq!(&stored, &model.iter().cloned().collect::<Vec<_>>());
                for value in tree.iter().values() {
                    let n = value.expect("value").len() / POS;
                    prop_assert!((1..=MAX_BLOCK).contains(&n), "a block of {} positions", n);
                }
            }
            for prefix in 0u8..2 {
                let p = &entry(prefix, 0)[..PREFIX];
                let want: Vec<Vec<u8>> = model
                    .iter()
                    .filter(|k| &k[..PREFIX] == p)
                    .map(|k| k[PREFIX..].to_vec())
                    .collect();
                prop_assert_eq!(count(&tree, p).expect("count"), want.len() as u64);
                let asc: Vec<Vec<u8>> = positions(&tree, p, None, false).collect::<Result<_, _>>().expect("asc");
                prop_assert_eq!(&asc, &want);
                let desc: Vec<Vec<u8>> = positions(&tree, p, None, true).collect::<Result<_, _>>().expect("desc");
                let mut rev = want.clone();
                rev.reverse();
                prop_assert_eq!(&desc, &rev);
                let a = entry(prefix, from)[PREFIX..].to_vec();
                let after: Vec<Vec<u8>> = positions(&tree, p, Some(&a), false).collect::<Result<_, _>>().expect("after");
                let want_after: Vec<Vec<u8>> = want.iter().filter(|x| **x > a).cloned().collect();
                prop_assert_eq!(after, want_after);
                let before: Vec<Vec<u8>> = positions(&tree, p, Some(&a), true).collect::<Result<_, _>>().expect("before");
                let want_before: Vec<Vec<u8>> = rev.iter().filter(|x| **x < a).cloned().collect();
                prop_assert_eq!(before, want_before);
            }
        }
    }
}
