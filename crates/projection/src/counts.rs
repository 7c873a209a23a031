//! The index's counts as `/metrics` asks for them: the runs in each state and the usage totals
//! per environment, counted or summed the first time they are asked for and read from the
//! tally the writes keep after that, and saved at a clean stop. What the tally is and how the
//! writes move it is `tally.rs`'s; this file must not write index entries.

use runledger_domain::{RunId, RunState};

use crate::row::decode_row;
use crate::tally::{
    environment_of, read_saved_tally, state_slot, write_saved_tally, SavedUsage, StateCounts,
    SAVED_USAGE_KEY, STATE_LEAD,
};
use crate::trees::current_generation;
use crate::{blocks, keys, Error, Index, UsageByEnvironment, UsageTotals};

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
    use crate::tally::{write_saved_tally, SavedTally, SAVED_TALLY_KEY};
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
