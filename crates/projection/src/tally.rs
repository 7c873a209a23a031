//! What the index counts as it writes: the runs in each state (from the state ranges) and the
//! usage totals per environment (from the rows), kept in memory under the write lock, moved by
//! every write, and saved in sled's default tree at a clean stop so that the next open need not
//! count them again. A saved copy is removed by the first write after it, so one that is there
//! always matches the index. The entry writes that move the tally (`Trees::write_entries`) are
//! made here, through the trees of `trees.rs`, so that the trees need not know the tally.

use std::sync::LazyLock;

use super::trees::Trees;
use super::{blocks, keys, Error};
use runledger_domain::{Run, RunState};

/// The runs-per-state tally as of the last clean stop or rebuild (a `SavedTally`), in sled's
/// default tree; absent while writes are being made.
pub(super) const SAVED_TALLY_KEY: &str = "projection_state_counts";
/// The usage totals per environment as of the last clean stop (a `SavedUsage`), in sled's
/// default tree; absent while writes are being made.
pub(super) const SAVED_USAGE_KEY: &str = "projection_usage_totals";

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
    pub(super) generation: u64,
    pub(super) totals: Vec<(String, UsageTotals)>,
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
    pub(super) generation: u64,
    pub(super) counts: Vec<u64>,
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
