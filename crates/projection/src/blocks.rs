//! Blocks: how the ranges of the read index are stored. A range is a sorted set of positions
//! under one prefix — `F field team hash` (positions `updated_at ‖ run_id`, 24 bytes), `T team`
//! (positions `lowercased title ‖ 00 00 ‖ run_id`, of any length), `C team` (positions
//! `run_id`, 16 bytes) or `A artifact` (positions `run_id`, 16 bytes). It is kept as a few sled entries, each holding consecutive positions,
//! instead of one sled entry per position.
//!
//! ```text
//! key    prefix  lower             lower: a lower bound of the block's positions
//! value  len(varint) position  len(varint) position  …
//!        sorted, each ≥ lower and < the next block's lower
//! ```
//!
//! A block holds at most `MAX_BLOCK` positions and `MAX_BYTES` bytes (a single longer position
//! gets a block of its own) and is split in halves beyond that.
//!
//! Why: each sled 0.34 write costs CPU, and sled keeps one in-memory page-table entry per
//! leaf of a tree (up to 32 small entries, or 16 large ones such as full blocks). With a key
//! per position, every run cost 6–7 index writes on each transition and 6–7 entries for good.
//! Blocked, the positions of all runs the projector applies in one batch that land in the same
//! block (new runs all land at the tail of each `F` range) cost one write of that block, and a
//! range holds about half a block to a block of positions per sled entry.
//!
//! Writers must be serialised (a block is read, changed and written back); `Index` holds its
//! write lock around `write`. Readers see each block whole, because a sled value is replaced
//! atomically; a walk overlapping a write is handled like any other (see `Writes` in `mod.rs`).

use std::collections::BTreeMap;
use std::ops::Bound;

use super::keys;
use super::Error;

/// The positions of a range as they are read, in the walk's order.
pub type Positions<'a> = Box<dyn Iterator<Item = Result<Vec<u8>, Error>> + 'a>;

/// Bytes of a position in an `F` range.
pub const FILTER_POS: usize = 24;
/// Bytes of a position in a `C` range (a run id).
pub const CREATED_POS: usize = 16;
/// Positions a block may hold before it is split.
const MAX_BLOCK: usize = 32;
/// Encoded bytes a block may hold before it is split (unless it holds one position).
const MAX_BYTES: usize = 1024;
/// How full a rebuild writes blocks, and how full the parts of a split block are: room for some
/// growth before the next split.
const FILL: usize = 24;
const FILL_BYTES: usize = 768;

/// The length of the range prefix a logical entry or a block key starts with (`F field team
/// hash`, `T team` or `C team`); `None` for a key of no range.
pub fn prefix_len(key: &[u8]) -> Option<usize> {
    match *key.first()? {
        keys::FILTER => Some(keys::FILTER_PREFIX),
        keys::TITLE | keys::CREATED => Some(keys::TEAM_PREFIX),
        keys::ARTIFACT => Some(keys::ARTIFACT_PREFIX),
        _ => None,
    }
}

/// The length every position of the range a key belongs to has, if its positions have one.
fn fixed_position(key: &[u8]) -> Option<usize> {
    match *key.first()? {
        keys::FILTER => Some(FILTER_POS),
        keys::CREATED | keys::ARTIFACT => Some(CREATED_POS),
        _ => None,
    }
}

/// Splits a logical entry (`prefix ‖ position`) into its parts.
pub fn split(key: &[u8]) -> Result<(&[u8], &[u8]), Error> {
    match prefix_len(key) {
        Some(n) if key.len() > n && fixed_position(key).is_none_or(|p| key.len() == n + p) => {
            Ok(key.split_at(n))
        }
        _ => Err(corrupt(format!("an index entry of {} bytes", key.len()))),
    }
}

fn corrupt(detail: String) -> Error {
    Error::CorruptRow {
        run_id: String::new(),
        detail,
    }
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// Bytes a position takes in a block.
fn encoded_len(pos: &[u8]) -> usize {
    varint_len(pos.len()) + pos.len()
}

pub(super) fn encode<P: AsRef<[u8]>>(positions: &[P]) -> Vec<u8> {
    let size = positions.iter().map(|p| encoded_len(p.as_ref())).sum();
    let mut out = Vec::with_capacity(size);
    for p in positions {
        let p = p.as_ref();
        let mut n = p.len();
        while n >= 0x80 {
            out.push((n & 0x7F) as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.extend_from_slice(p);
    }
    out
}

/// The positions of a block, as slices of its value.
pub(crate) fn decode(value: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let mut out = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        let (len, tail) = read_len(rest).ok_or_else(|| undecodable(value))?;
        let pos = tail.get(..len).ok_or_else(|| undecodable(value))?;
        out.push(pos);
        rest = &tail[len..];
    }
    Ok(out)
}

/// A position's length prefix (a varint, never 0) and what follows it; `None` if it is
/// malformed.
fn read_len(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let mut len = 0usize;
    let mut shift = 0;
    let mut rest = bytes;
    loop {
        let (&b, tail) = rest.split_first()?;
        rest = tail;
        if shift > 28 {
            return None;
        }
        len |= usize::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (len != 0).then_some((len, rest))
}

fn undecodable(value: &[u8]) -> Error {
    corrupt(format!(
        "an index block of {} bytes does not decode",
        value.len()
    ))
}

/// Consecutive parts of `positions` of at most `count` positions and `bytes` encoded bytes each
/// (a longer position makes a part on its own).
fn parts<P: AsRef<[u8]>>(positions: &[P], count: usize, bytes: usize) -> Vec<&[P]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, p) in positions.iter().enumerate() {
        let len = encoded_len(p.as_ref());
        if i > start && (i - start == count || size + len > bytes) {
            out.push(&positions[start..i]);
            start = i;
            size = 0;
        }
        size += len;
    }
    if start < positions.len() {
        out.push(&positions[start..]);
    }
    out
}

fn block_key(prefix: &[u8], lower: &[u8]) -> Vec<u8> {
    [prefix, lower].concat()
}

/// The first key after every key of the range `prefix`.
fn range_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    match keys::successor(prefix) {
        Some(end) => Bound::Excluded(end),
        None => Bound::Unbounded,
    }
}

/// A stored block: its lower bound and its positions.
type Block = (Vec<u8>, Vec<Vec<u8>>);

/// The block a position belongs to: the last block whose lower bound is at or below it, else
/// the range's first block; its lower bound and positions. `None` if the range has no block.
fn locate(tree: &sled::Tree, prefix: &[u8], pos: &[u8]) -> Result<Option<Block>, Error> {
    let at_or_below = tree
        .range(prefix.to_vec()..=block_key(prefix, pos))
        .next_back()
        .transpose()?;
    let found = match at_or_below {
        Some(block) => Some(block),
        None => tree
            .range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), range_end(prefix)))
            .next()
            .transpose()?,
    };
    let Some((key, value)) = found else {
        return Ok(None);
    };
    let lower = key
        .get(prefix.len()..)
        .ok_or_else(|| corrupt(format!("an index block key of {} bytes", key.len())))?;
    let positions = decode(&value)?.into_iter().map(<[u8]>::to_vec).collect();
    Ok(Some((lower.to_vec(), positions)))
}

/// The lower bound of the block after the one whose lower bound is `lower`, if any.
fn next_lower(tree: &sled::Tree, prefix: &[u8], lower: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    let next = tree
        .range::<Vec<u8>, _>((Bound::Excluded(block_key(prefix, lower)), range_end(prefix)))
        .next()
        .transpose()?;
    Ok(next.and_then(|(k, _)| k.get(prefix.len()..).map(<[u8]>::to_vec)))
}

/// One block being changed: its positions, and whether they changed.
struct Loaded {
    positions: Vec<Vec<u8>>,
    changed: bool,
}

/// One write to the index tree: a value to insert, or `None` to remove the key.
pub type Op = (Vec<u8>, Option<Vec<u8>>);

/// What `write` planned: whether the writes must be journalled, and how many positions each
/// range gains or loses once they are made.
#[derive(Debug, Default)]
pub struct Planned<'a> {
    /// A block was split or re-keyed: that is several writes, and a crash between them would
    /// lose positions of runs that share the block, so the caller journals such a set of writes
    /// before it makes them (see `Trees::commit`).
    pub reshaped: bool,
    /// Per range prefix, positions inserted minus positions removed. A removal of a position the
    /// range does not hold, or an insertion of one it holds, counts for nothing, so these are
    /// exact changes of the ranges' sizes (the runs-per-state tally relies on it).
    pub net: Vec<(&'a [u8], i64)>,
}

/// Adds to `ops` the block writes that apply removals and insertions of logical entries
/// (`prefix ‖ position`); each block they touch is read once and written once.
pub fn write<'a>(
    tree: &sled::Tree,
    removals: &'a [Vec<u8>],
    insertions: &'a [Vec<u8>],
    ops: &mut Vec<Op>,
) -> Result<Planned<'a>, Error> {
    let mut by_range: BTreeMap<&[u8], Vec<(&[u8], bool)>> = BTreeMap::new();
    for (keys, insert) in [(removals, false), (insertions, true)] {
        for key in keys {
            let (prefix, pos) = split(key)?;
            by_range.entry(prefix).or_default().push((pos, insert));
        }
    }
    write_ranges(tree, by_range, &READ_INDEX, ops)
}

/// How large the blocks of a tree grow: at most `max` positions and `max_bytes` encoded bytes
/// (a single longer position gets a block of its own), split into parts of `fill` positions and
/// `fill_bytes` beyond that.
pub struct Shape {
    pub max: usize,
    pub max_bytes: usize,
    pub fill: usize,
    pub fill_bytes: usize,
}

/// The read index's blocks.
const READ_INDEX: Shape = Shape {
    max: MAX_BLOCK,
    max_bytes: MAX_BYTES,
    fill: FILL,
    fill_bytes: FILL_BYTES,
};

/// `write` for changes already split into ranges (`prefix` → (position, insert?)), in blocks
/// of `shape`: for a tree whose prefixes `prefix_len` does not know (the audit index's).
pub fn write_ranges<'a>(
    tree: &sled::Tree,
    by_range: BTreeMap<&'a [u8], Vec<(&'a [u8], bool)>>,
    shape: &Shape,
    ops: &mut Vec<Op>,
) -> Result<Planned<'a>, Error> {
    let mut planned = Planned::default();
    for (prefix, mut changes) in by_range {
        // In position order, a block's changes come one after another: the block and where the
        // next one begins are looked up once per block, not once per change (a backward seek
        // in sled costs as much as a write).
        changes.sort_by(|a, b| a.0.cmp(b.0));
        // The blocks the changes touch, in range order (each is reached once), keyed by their
        // stored lower bound; `None` is a block the range did not have.
        let mut blocks: Vec<(Option<Vec<u8>>, Loaded)> = Vec::new();
        // Where the last of them ends: the next block's lower bound (`None`: it is the last).
        let mut next: Option<Vec<u8>> = None;
        let mut net = 0i64;
        for (pos, insert) in changes {
            let within = !blocks.is_empty() && next.as_deref().is_none_or(|n| pos < n);
            if !within {
                let (lower, positions) = match locate(tree, prefix, pos)? {
                    Some((lower, positions)) => (Some(lower), positions),
                    None => (None, Vec::new()),
                };
                next = match &lower {
                    Some(l) => next_lower(tree, prefix, l)?,
                    None => None,
                };
                blocks.push((
                    lower,
                    Loaded {
                        positions,
                        changed: false,
                    },
                ));
            }
            if let Some((_, block)) = blocks.last_mut() {
                match (
                    block.positions.binary_search_by(|p| p.as_slice().cmp(pos)),
                    insert,
                ) {
                    (Err(at), true) => {
                        block.positions.insert(at, pos.to_vec());
                        block.changed = true;
                        net += 1;
                    }
                    (Ok(at), false) => {
                        block.positions.remove(at);
                        block.changed = true;
                        net -= 1;
                    }
                    _ => {}
                }
            }
        }
        for (lower, block) in blocks {
            if block.changed {
                planned.reshaped |= store(ops, prefix, lower, &block.positions, shape);
            }
        }
        if net != 0 {
            planned.net.push((prefix, net));
        }
    }
    Ok(planned)
}

/// Writes a changed block back: removed when empty, split when over `MAX_BLOCK` positions or
/// `MAX_BYTES`, and stored under its first position when that is below the lower bound it had
/// (the range's first block, given a new smallest position).
/// Returns whether it took more than one write.
fn store(
    ops: &mut Vec<Op>,
    prefix: &[u8],
    lower: Option<Vec<u8>>,
    positions: &[Vec<u8>],
    shape: &Shape,
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
            first.clone()
        }
        None => first.clone(),
    };
    let bytes: usize = positions.iter().map(|p| encoded_len(p)).sum();
    let parts =
        if positions.len() <= shape.max && (bytes <= shape.max_bytes || positions.len() == 1) {
            vec![positions]
        } else {
            parts(positions, shape.fill, shape.fill_bytes)
        };
    for (i, part) in parts.into_iter().enumerate() {
        let part_key = if i == 0 { &key } else { &part[0] };
        ops.push((block_key(prefix, part_key), Some(encode(part))));
        writes += 1;
    }
    writes > 1
}

/// The positions of one range gathered by a rebuild. A rebuild of 1M runs gathers about 8M of
/// them: the 24-byte positions of `F` ranges and the 16-byte ones of `C` ranges are kept and
/// sorted as arrays, the positions of a `T` range in one buffer (a vector per position would
/// double what they take).
pub enum Gathered {
    Fixed(Vec<[u8; FILTER_POS]>),
    Ids(Vec<[u8; CREATED_POS]>),
    Varying { bytes: Vec<u8>, ends: Vec<usize> },
}

impl Gathered {
    /// An empty set of positions for the range `prefix`.
    pub fn new(prefix: &[u8]) -> Gathered {
        match prefix.first() {
            Some(&keys::FILTER) => Gathered::Fixed(Vec::new()),
            Some(&keys::CREATED | &keys::ARTIFACT) => Gathered::Ids(Vec::new()),
            _ => Gathered::Varying {
                bytes: Vec::new(),
                ends: Vec::new(),
            },
        }
    }

    /// Adds a position (as `split` returned it for this range).
    pub fn push(&mut self, pos: &[u8]) -> Result<(), Error> {
        match self {
            Gathered::Fixed(positions) => positions.push(
                pos.try_into()
                    .map_err(|_| corrupt(format!("a filter position of {} bytes", pos.len())))?,
            ),
            Gathered::Ids(positions) => positions.push(
                pos.try_into()
                    .map_err(|_| corrupt(format!("a created position of {} bytes", pos.len())))?,
            ),
            Gathered::Varying { bytes, ends } => {
                bytes.extend_from_slice(pos);
                ends.push(bytes.len());
            }
        }
        Ok(())
    }

    /// How many positions were gathered.
    pub fn len(&self) -> usize {
        match self {
            Gathered::Fixed(positions) => positions.len(),
            Gathered::Ids(positions) => positions.len(),
            Gathered::Varying { ends, .. } => ends.len(),
        }
    }

    /// Writes the range in full blocks (a rebuild, into an empty tree). Returns how many
    /// positions it holds (each gathered position once).
    pub fn build(self, tree: &sled::Tree, prefix: &[u8]) -> Result<u64, Error> {
        match self {
            Gathered::Fixed(mut positions) => {
                positions.sort_unstable();
                positions.dedup();
                build(tree, prefix, &positions)
            }
            Gathered::Ids(mut positions) => {
                positions.sort_unstable();
                positions.dedup();
                build(tree, prefix, &positions)
            }
            Gathered::Varying { bytes, ends } => {
                let mut start = 0;
                let mut sorted: Vec<&[u8]> = ends
                    .iter()
                    .map(|&end| {
                        let pos = &bytes[start..end];
                        start = end;
                        pos
                    })
                    .collect();
                sorted.sort_unstable();
                sorted.dedup();
                build(tree, prefix, &sorted)
            }
        }
    }
}

fn build<P: AsRef<[u8]>>(tree: &sled::Tree, prefix: &[u8], sorted: &[P]) -> Result<u64, Error> {
    for part in parts(sorted, FILL, FILL_BYTES) {
        tree.insert(block_key(prefix, part[0].as_ref()), encode(part))?;
    }
    Ok(sorted.len() as u64)
}

/// The positions of the range `prefix`, in `order`, strictly after (in that order) `after`.
pub fn positions(
    tree: &sled::Tree,
    prefix: &[u8],
    after: Option<&[u8]>,
    descending: bool,
) -> Positions<'static> {
    let full = |suffix: &[u8]| [prefix, suffix].concat();
    let end = range_end(prefix);
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
            Ok((_, value)) => match decode(&value) {
                Err(e) => vec![Err(e)],
                Ok(mut ps) => {
                    if descending {
                        ps.reverse();
                    }
                    ps.into_iter()
                        .filter(|p| match &after {
                            None => true,
                            Some(a) if descending => *p < a.as_slice(),
                            Some(a) => *p > a.as_slice(),
                        })
                        .map(|p| Ok(p.to_vec()))
                        .collect()
                }
            },
        };
        expanded
    }))
}

/// How many positions the range `prefix` holds: a walk of its blocks that reads each block's
/// length prefixes and copies nothing.
#[cfg(test)]
pub fn count(tree: &sled::Tree, prefix: &[u8]) -> Result<u64, Error> {
    let mut n = 0u64;
    for item in tree.scan_prefix(prefix) {
        let (_, value) = item?;
        n += count_block(&value)?;
    }
    Ok(n)
}

/// The number of positions in an encoded block, checked as `decode` checks it.
pub fn count_block(value: &[u8]) -> Result<u64, Error> {
    let mut n = 0;
    let mut rest = value;
    while !rest.is_empty() {
        let (len, tail) = read_len(rest).ok_or_else(|| undecodable(value))?;
        rest = tail.get(len..).ok_or_else(|| undecodable(value))?;
        n += 1;
    }
    Ok(n)
}

/// Every logical entry of an index tree in key order: each block expanded to `prefix ‖
/// position` entries (a key of no range, which no layout writes, as it is).
pub fn logical(tree: &sled::Tree) -> impl Iterator<Item = Result<Vec<u8>, Error>> + '_ {
    tree.iter().flat_map(|item| {
        let expanded: Vec<Result<Vec<u8>, Error>> = match item {
            Err(e) => vec![Err(e.into())],
            Ok((key, value)) => match prefix_len(&key) {
                Some(n) if key.len() >= n => match decode(&value) {
                    Err(e) => vec![Err(e)],
                    Ok(ps) => ps
                        .into_iter()
                        .map(|p| Ok([&key[..n], p].concat()))
                        .collect(),
                },
                _ => vec![Ok(key.to_vec())],
            },
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

    /// Ranges 0 and 1 are `F` ranges (24-byte positions); range 2 is a `T` range, whose
    /// positions have lengths from 2 to 1,301 bytes, so blocks split on bytes as well as counts
    /// and a position longer than a block may hold gets a block of its own (a 256-character
    /// title is up to about 1 KiB); range 3 is a `C` range (16-byte positions).
    fn entry(range: u8, pos: u16) -> Vec<u8> {
        let team = [range; keys::TEAM_LEN];
        if range == 2 {
            let mut key = keys::title_prefix(&team);
            key.extend_from_slice(&pos.to_be_bytes());
            key.resize(keys::TEAM_PREFIX + 2 + (usize::from(pos) * 37) % 1300, b'x');
            return key;
        }
        if range == 3 {
            let mut key = keys::created_prefix(&team);
            let mut p = [0u8; CREATED_POS];
            p[..2].copy_from_slice(&pos.to_be_bytes());
            p[15] = 1;
            key.extend_from_slice(&p);
            return key;
        }
        let mut key = vec![keys::FILTER, range];
        key.extend_from_slice(&team);
        key.extend_from_slice(&[0; 8]);
        let mut p = [0u8; FILTER_POS];
        p[..2].copy_from_slice(&pos.to_be_bytes());
        p[23] = 1;
        key.extend_from_slice(&p);
        key
    }

    fn prefix_of(range: u8) -> Vec<u8> {
        let key = entry(range, 0);
        key[..prefix_len(&key).expect("a range")].to_vec()
    }

    #[test]
    fn positions_round_trip_through_a_block() {
        let positions: Vec<Vec<u8>> = vec![vec![1; 24], vec![2; 127], vec![3; 128], vec![4; 300]];
        let value = encode(&positions);
        assert_eq!(
            value.len(),
            positions.iter().map(|p| encoded_len(p)).sum::<usize>()
        );
        assert_eq!(decode(&value).expect("decode"), positions);
        assert!(
            decode(&value[..value.len() - 1]).is_err(),
            "a cut block is refused"
        );
        assert!(decode(&[0]).is_err(), "an empty position is refused");
    }

    proptest! {
        /// Blocks hold exactly the set a plain set of keys would, whatever the batches, and walk
        /// it in order in both directions from any position.
        #[test]
        fn blocks_behave_like_a_sorted_set(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u8..4, 0u16..300, any::<bool>()), 0..80),
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
                for (range, pos, insert) in batch {
                    let key = entry(range, pos);
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
                    let value = value.expect("value");
                    let n = decode(&value).expect("decode").len();
                    prop_assert!((1..=MAX_BLOCK).contains(&n), "a block of {} positions", n);
                    prop_assert!(n == 1 || value.len() <= MAX_BYTES, "a block of {} bytes", value.len());
                }
            }
            for range in 0u8..4 {
                let p = prefix_of(range);
                let want: Vec<Vec<u8>> = model
                    .iter()
                    .filter(|k| k.starts_with(&p))
                    .map(|k| k[p.len()..].to_vec())
                    .collect();
                prop_assert_eq!(count(&tree, &p).expect("count"), want.len() as u64);
                let asc: Vec<Vec<u8>> = positions(&tree, &p, None, false).collect::<Result<_, _>>().expect("asc");
                prop_assert_eq!(&asc, &want);
                let desc: Vec<Vec<u8>> = positions(&tree, &p, None, true).collect::<Result<_, _>>().expect("desc");
                let mut rev = want.clone();
                rev.reverse();
                prop_assert_eq!(&desc, &rev);
                let a = entry(range, from)[p.len()..].to_vec();
                let after: Vec<Vec<u8>> = positions(&tree, &p, Some(&a), false).collect::<Result<_, _>>().expect("after");
                let want_after: Vec<Vec<u8>> = want.iter().filter(|x| **x > a).cloned().collect();
                prop_assert_eq!(after, want_after);
                let before: Vec<Vec<u8>> = positions(&tree, &p, Some(&a), true).collect::<Result<_, _>>().expect("before");
                let want_before: Vec<Vec<u8>> = rev.iter().filter(|x| **x < a).cloned().collect();
                prop_assert_eq!(before, want_before);
            }
        }

        /// A rebuild writes the same logical entries, in blocks within the limits, and says how
        /// many it wrote to each range.
        #[test]
        fn a_built_range_holds_what_was_gathered(
            gathered in proptest::collection::vec((0u8..4, 0u16..300), 0..400),
        ) {
            let (_db, tree) = tree();
            let mut ranges: BTreeMap<Vec<u8>, Gathered> = BTreeMap::new();
            let mut model = BTreeSet::new();
            for (range, pos) in gathered {
                let key = entry(range, pos);
                let (prefix, position) = split(&key).expect("split");
                ranges
                    .entry(prefix.to_vec())
                    .or_insert_with(|| Gathered::new(prefix))
                    .push(position)
                    .expect("push");
                model.insert(key);
            }
            for (prefix, positions) in ranges {
                let written = positions.build(&tree, &prefix).expect("build");
                prop_assert_eq!(written, count(&tree, &prefix).expect("count"));
            }
            let stored: Vec<Vec<u8>> = logical(&tree).collect::<Result<_, _>>().expect("walk");
            prop_assert_eq!(stored, model.into_iter().collect::<Vec<_>>());
            for value in tree.iter().values() {
                let value = value.expect("value");
                let n = decode(&value).expect("decode").len();
                prop_assert!((1..=FILL).contains(&n));
                prop_assert!(n == 1 || value.len() <= FILL_BYTES);
            }
        }
    }
}
