//! What the index counts as it writes: the runs in each state (from the state ranges) and the
//! usage totals per environment (from the rows), kept in memory under the write lock, moved by
//! every write, and saved in sled's default tree at a clean stop so that the next open need not
//! count them again. A saved copy is removed by the first write after it, so one that is there
//! always matches the index. The entry writes that move the tally (`Trees::write_entries`) are
//! made here, through the trees of `trees.rs`, so that the trees need not know the tally.

use std::sync::LazyLock;

use super::trees::{current_generation, Trees};
use super::{blocks, decode_row, keys, Error, Index, SAVED_TALLY_KEY, SAVED_USAGE_KEY};
use runledger_domain::{Run, RunId, RunState};

/// What the runs of one environment used, summed over their recorded executions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UsageTotals {
    pub inference_nano_usd: u64,
    pub compute_nano_usd: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cpu_ms: u64,
}

/// Usage totals by environment id.
pub type UsageByEnvironment = std::collections::BTreeMap<String, UsageTotals>;

impl UsageTotals {
    pub(super) fn of(run: &Run) -> UsageTotals {
        let u = &run.usage;
        UsageTotals {
            inference_nano_usd: u.inference_nano_usd.unwrap_or(0),
            compute_nano_usd: u.compute_nano_usd.unwrap_or(0),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cpu_ms: u.cpu_ms,
        }
    }

    pub(super) fn is_zero(&self) -> bool {
        *self == UsageTotals::default()
    }

    /// Adds (`sign` +1) or takes away (-1) `other`; `None` if taking away would go below 0,
    /// which cannot happen while the totals match the rows. Adding saturates.
    pub(super) fn moved(self, other: UsageTotals, add: bool) -> Option<UsageTotals> {
        let f = |a: u64, b: u64| {
            if add {
                Some(a.saturating_add(b))
            } else {
                a.checked_sub(b)
            }
        };
        Some(UsageTotals {
            inference_nano_usd: f(self.inference_nano_usd, other.inference_nano_usd)?,
            compute_nano_usd: f(self.compute_nano_usd, other.compute_nano_usd)?,
            input_tokens: f(self.input_tokens, other.input_tokens)?,
            output_tokens: f(self.output_tokens, other.output_tokens)?,
            cpu_ms: f(self.cpu_ms, other.cpu_ms)?,
        })
    }
}

/// The environment a run's usage counts for.
pub(super) fn environment_of(run: &Run) -> &str {
    run.config.environment_id.as_deref().unwrap_or_default()
}

/// Moves the usage totals from `old` rows to `new` ones; on a contradiction, forgets them so
/// the next ask sums the rows again rather than report a wrong figure.
pub(super) fn move_usage(
    usage: &mut Option<UsageByEnvironment>,
    old: Option<&Run>,
    new: Option<&Run>,
) {
    let Some(totals) = usage else { return };
    let mut step = |run: &Run, add: bool| -> Option<()> {
        let part = UsageTotals::of(run);
        if part.is_zero() {
            return Some(());
        }
        let slot = totals.entry(environment_of(run).to_string()).or_default();
        *slot = slot.moved(part, add)?;
        Some(())
    };
    let moved = old
        .map_or(Some(()), |o| step(o, false))
        .and_then(|()| new.map_or(Some(()), |n| step(n, true)));
    if moved.is_none() {
        *usage = None;
    }
}

/// The usage totals as saved in sled's default tree, with the generation of the trees they sum.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SavedUsage {
    generation: u64,
    totals: Vec<(String, UsageTotals)>,
}

pub(super) fn read_saved_usage(
    db: &sled::Db,
    generation: u64,
) -> Result<Option<UsageByEnvironment>, Error> {
    let Some(bytes) = db.get(SAVED_USAGE_KEY)? else {
        return Ok(None);
    };
    Ok(postcard::from_bytes::<SavedUsage>(&bytes)
        .ok()
        .filter(|saved| saved.generation == generation)
        .map(|saved| saved.totals.into_iter().collect()))
}

/// The tally as saved in sled's default tree: the generation of the trees it counts, and the
/// runs per state in `RunState::ALL` order.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SavedTally {
    generation: u64,
    counts: Vec<u64>,
}

/// The saved tally, if there is one for the trees of `generation` that decodes.
///
/// Every writer of this layout removes the saved tally before it writes, which is why the
/// layout version went up with it: a version from before would write the index and leave a
/// stale copy, and it rebuilds an index of another layout instead of writing to it.
pub(super) fn read_saved_tally(db: &sled::Db, generation: u64) -> Result<Tally, Error> {
    let Some(bytes) = db.get(SAVED_TALLY_KEY)? else {
        return Ok(None);
    };
    // One that does not decode, or counts another generation or a different list of states,
    // is not used; the ranges are counted instead, and the next save replaces it.
    Ok(postcard::from_bytes::<SavedTally>(&bytes)
        .ok()
        .filter(|saved| saved.generation == generation)
        .and_then(|saved| saved.counts.try_into().ok()))
}

pub(super) fn write_saved_tally(
    db: &sled::Db,
    generation: u64,
    counts: &StateCounts,
) -> Result<(), Error> {
    let saved = SavedTally {
        generation,
        counts: counts.to_vec(),
    };
    let bytes = postcard::to_allocvec(&saved).map_err(|e| Error::CorruptRow {
        run_id: String::new(),
        detail: format!("cannot encode the saved state counts: {e}"),
    })?;
    db.insert(SAVED_TALLY_KEY, bytes)?;
    Ok(())
}

/// Runs per state (the positions each state's range holds), in `RunState::ALL` order.
pub(super) type StateCounts = [u64; RunState::ALL.len()];

/// The runs per state as the writes keep them. `None` until the open takes a saved tally or
/// `count_by_state` first counts the ranges, and again after a write that failed part of the
/// way (some of its block writes may have been made).
pub(super) type Tally = Option<StateCounts>;

/// The value hashes of the states in `F State` keys, in `RunState::ALL` order.
static STATE_HASHES: LazyLock<[[u8; 8]; RunState::ALL.len()]> =
    LazyLock::new(|| RunState::ALL.map(|s| keys::value_hash(keys::Field::State, s.as_str())));

/// The leading bytes every state range of every team shares: `F 01`.
pub(super) const STATE_LEAD: [u8; 2] = [keys::FILTER, keys::Field::State as u8];

/// The state (its slot in `RunState::ALL` order) whose range a range prefix, or a key that
/// starts with one, belongs to, whatever the team; `None` for a range of another field.
pub(super) fn state_slot(prefix: &[u8]) -> Option<usize> {
    if prefix.len() < keys::FILTER_PREFIX || !prefix.starts_with(&STATE_LEAD) {
        return None;
    }
    let hash = &prefix[keys::FILTER_PREFIX - 8..keys::FILTER_PREFIX];
    STATE_HASHES.iter().position(|h| h.as_slice() == hash)
}

/// Moves the tally by the net change of each range a write made: the state ranges of every
/// team count, since the tally is the instance's.
pub(super) fn tally_writes(tally: &mut Tally, net: &[(&[u8], i64)]) {
    let Some(counts) = tally else { return };
    for &(prefix, change) in net {
        let Some(slot) = state_slot(prefix) else {
            continue;
        };
        match counts[slot].checked_add_signed(change) {
            Some(n) => counts[slot] = n,
            // Cannot happen while the tally matches the ranges; count again rather than lie.
            None => {
                *tally = None;
                return;
            }
        }
    }
}

// Here rather than in `trees.rs`: the trees know how to make a set of writes whole, the tally
// what the writes moved.
impl Trees {
    /// Writes the difference between two entry sets, through their ranges' blocks, and moves
    /// the tally (the caller holds `Index::serial`) by what the ranges gained and lost.
    pub(super) fn write_entries(
        &self,
        db: &sled::Db,
        removals: Vec<Vec<u8>>,
        insertions: Vec<Vec<u8>>,
        tally: &mut Tally,
    ) -> Result<(), Error> {
        let mut ops: Vec<blocks::Op> = Vec::new();
        let planned = blocks::write(&self.index, &removals, &insertions, &mut ops)?;
        if let Err(e) = self.commit(db, &ops, planned.reshaped) {
            *tally = None;
            return Err(e);
        }
        tally_writes(tally, &planned.net);
        Ok(())
    }
}

/// The runs per state of the whole instance: one walk of the blocks under `F 01` (the state
/// ranges of every team), reading each block's length prefixes.
fn count_state_ranges(tree: &sled::Tree) -> Result<StateCounts, Error> {
    let mut counts = [0; RunState::ALL.len()];
    for item in tree.scan_prefix(STATE_LEAD) {
        let (key, value) = item?;
        // A state-field block whose value hash is no state's is not written by any layout;
        // it counts for no state.
        if let Some(slot) = state_slot(&key) {
            counts[slot] += blocks::count_block(&value)?;
        }
    }
    Ok(counts)
}

impl Index {
    /// The runs per state that the next open would take from the saved tally, if there is one
    /// it would take. For tests.
    #[doc(hidden)]
    pub fn saved_counts(db: &sled::Db) -> Result<Option<Vec<(RunState, u64)>>, Error> {
        let saved = read_saved_tally(db, current_generation(db)?)?;
        Ok(saved.map(|counts| RunState::ALL.into_iter().zip(counts).collect()))
    }

    /// Saves the runs-per-state tally in sled's default tree, for the next open to take
    /// instead of counting the ranges: at a clean stop, once every acknowledged command is
    /// indexed, before the last sync. Returns whether there was one to save: a tally nobody
    /// asked for since the open is not counted for this.
    pub fn save_tally(&self) -> Result<bool, Error> {
        let mut serial = self.serial.lock();
        if let (Some(usage), false) = (&serial.usage, serial.usage_saved) {
            let saved = SavedUsage {
                generation: self.trees().generation,
                totals: usage.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            };
            let bytes = postcard::to_allocvec(&saved).map_err(|e| Error::CorruptRow {
                run_id: String::new(),
                detail: format!("usage totals do not encode: {e}"),
            })?;
            self.db.insert(SAVED_USAGE_KEY, bytes)?;
            serial.usage_saved = true;
        }
        if serial.saved {
            return Ok(true);
        }
        let Some(counts) = serial.tally else {
            return Ok(false);
        };
        write_saved_tally(&self.db, self.trees().generation, &counts)?;
        serial.saved = true;
        Ok(true)
    }

    /// What the runs of each environment used, as of the last write. Unless the open found
    /// saved totals, the first call (and the first after a failed write) sums the rows,
    /// holding writes back meanwhile so that the sum and the writes after it add up exactly.
    pub fn usage_by_environment(&self) -> Result<UsageByEnvironment, Error> {
        let mut serial = self.serial.lock();
        if let Some(usage) = &serial.usage {
            return Ok(usage.clone());
        }
        let started = std::time::Instant::now();
        let mut totals = UsageByEnvironment::new();
        for row in self.trees().rows.iter() {
            let (key, bytes) = row?;
            let bytes16: [u8; 16] = key.as_ref().try_into().map_err(|_| Error::CorruptRow {
                run_id: keys::hex(&key),
                detail: "the key is not a run id".into(),
            })?;
            let id = RunId::from_bytes(bytes16);
            let run = decode_row(id, &bytes)?;
            let part = UsageTotals::of(&run);
            if !part.is_zero() {
                let slot = totals.entry(environment_of(&run).to_string()).or_default();
                *slot = slot.moved(part, true).unwrap_or(*slot);
            }
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "summed the runs' usage per environment from the read index"
        );
        serial.usage = Some(totals.clone());
        Ok(totals)
    }

    /// How many runs are in each state, as of the last write. Unless the open found a saved
    /// tally, the first call (and the first after a failed write) counts the state ranges,
    /// holding writes back while it walks them so that the count and the writes after it add
    /// up exactly; every later call reads the tally the writes keep.
    pub fn count_by_state(&self) -> Result<Vec<(RunState, u64)>, Error> {
        let mut serial = self.serial.lock();
        let counts = match serial.tally {
            Some(counts) => counts,
            None => {
                let started = std::time::Instant::now();
                let counts = count_state_ranges(&self.trees().index)?;
                serial.tally = Some(counts);
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "counted the runs in each state from the read index"
                );
                counts
            }
        };
        Ok(RunState::ALL.into_iter().zip(counts).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trees::JOURNAL_KEY;

    /// `/metrics` asks for the counts on every scrape; after the first, they must not cost a
    /// walk of the state ranges (35 ms warm, 250–460 ms cold at 1M runs). A block written behind
    /// the index's back shows which source an answer came from.
    #[test]
    fn state_counts_come_from_the_tally_once_counted() {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let index = Index::open(&db).expect("open");
        let none: Vec<u64> = vec![0; RunState::ALL.len()];
        assert_eq!(counts(&index), none);
        queued_behind_the_back(&index, 0);
        assert_eq!(counts(&index), none, "answered from the tally");
        let fresh = Index::open(&db).expect("reopen");
        assert_eq!(
            counts(&fresh),
            [1, 0, 0, 0, 0],
            "a new handle counts the ranges"
        );
    }

    /// A block written behind the index's back to the QUEUED range: a walk counts it, a tally
    /// does not, so the answer shows where the counts came from.
    fn queued_behind_the_back(index: &Index, first: u8) {
        let mut key =
            keys::filter_prefix(&keys::team_hash("default"), keys::Field::State, "QUEUED");
        let mut pos = [0u8; blocks::FILTER_POS];
        pos[0] = first;
        key.extend_from_slice(&pos);
        index
            .trees()
            .index
            .insert(key, blocks::encode(&[pos]))
            .expect("insert");
    }

    fn counts(index: &Index) -> Vec<u64> {
        let counts = index.count_by_state().expect("count");
        counts.into_iter().map(|(_, n)| n).collect()
    }

    /// A clean stop saves the tally and the next open takes it instead of walking the ranges;
    /// the first write after that open removes the saved copy before it changes anything.
    #[test]
    fn the_next_open_takes_a_saved_tally_until_a_write_removes_it() {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let index = Index::open(&db).expect("open");
        assert!(!index.save_tally().expect("save"), "nothing counted yet");
        assert_eq!(db.get(SAVED_TALLY_KEY).expect("get"), None);
        assert_eq!(counts(&index), [0, 0, 0, 0, 0]);
        assert!(index.save_tally().expect("save"));
        queued_behind_the_back(&index, 1);

        let reopened = Index::open(&db).expect("reopen");
        assert_eq!(
            counts(&reopened),
            [0, 0, 0, 0, 0],
            "taken from the saved tally"
        );
        assert!(db.get(SAVED_TALLY_KEY).expect("get").is_some());
        drop(reopened.lock_for_writing().expect("write"));
        assert_eq!(
            db.get(SAVED_TALLY_KEY).expect("get"),
            None,
            "removed by a write"
        );
        assert_eq!(
            counts(&Index::open(&db).expect("open")),
            [1, 0, 0, 0, 0],
            "walked"
        );
    }

    /// A saved tally of another generation (the index was rebuilt since) or of another list
    /// of states is not taken; neither is one that a journal (writes under way at a crash)
    /// contradicts.
    #[test]
    fn a_saved_tally_that_cannot_match_is_not_taken() {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let index = Index::open(&db).expect("open");
        queued_behind_the_back(&index, 1);
        let walked = [1, 0, 0, 0, 0];
        write_saved_tally(&db, 7, &[5; RunState::ALL.len()]).expect("save");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);
        let shorter = SavedTally {
            generation: 0,
            counts: vec![5; RunState::ALL.len() - 1],
        };
        db.insert(
            SAVED_TALLY_KEY,
            postcard::to_allocvec(&shorter).expect("encode"),
        )
        .expect("insert");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);
        db.insert(SAVED_TALLY_KEY, b"\xff\xff".as_slice())
            .expect("insert");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);

        write_saved_tally(&db, 0, &[5; RunState::ALL.len()]).expect("save");
        let empty: Vec<blocks::Op> = Vec::new();
        db.insert(JOURNAL_KEY, postcard::to_allocvec(&empty).expect("encode"))
            .expect("journal");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);
        assert_eq!(db.get(SAVED_TALLY_KEY).expect("get"), None);
    }
}
