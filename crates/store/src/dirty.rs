//! The markers the read index relies on to catch up after a crash: the "dirty runs" (a run
//! whose log may be ahead of its index entry) and the index floor (every run created since it
//! may be). It keeps the markers only; catching up is `projection`'s.

use runledger_domain::{RunId, Timestamp};

use crate::layout::{DIRTY, INDEX_FLOOR, META};
use crate::{Error, Store};

impl Store {
    /// Whether a run is marked dirty (its index entry may lag its log).
    pub fn is_dirty(&self, run_id: RunId) -> Result<bool, Error> {
        Ok(self.inner.dirty.contains_key(run_id.to_bytes())?)
    }

    /// Marks a run whose log is about to grow ahead of its read-index entry. Cleared by
    /// `clear_dirty` once the index has caught up; startup re-projects what is still marked.
    pub fn mark_dirty(&self, run_id: RunId) -> Result<(), Error> {
        self.inner.dirty.insert(run_id.to_bytes(), &[])?;
        Ok(())
    }

    /// `mark_dirty` with a generation number as the marker's value, for `clear_dirty_if`.
    pub fn mark_dirty_generation(&self, run_id: RunId, generation: u64) -> Result<(), Error> {
        self.inner
            .dirty
            .insert(run_id.to_bytes(), &generation.to_be_bytes())?;
        Ok(())
    }

    pub fn clear_dirty(&self, run_id: RunId) -> Result<(), Error> {
        self.inner.dirty.remove(run_id.to_bytes())?;
        Ok(())
    }

    /// Clears the marker only if it still holds `generation`: a marker set again meanwhile (by
    /// a newer command) stays, whichever of the two writes reaches sled first.
    pub fn clear_dirty_generation(&self, run_id: RunId, generation: u64) -> Result<(), Error> {
        // `Err` from the inner result only says the marker was set again: nothing to do.
        let _ = self.inner.dirty.compare_and_swap(
            run_id.to_bytes(),
            Some(&generation.to_be_bytes()[..]),
            None::<&[u8]>,
        )?;
        Ok(())
    }

    /// The index floor: a run created at or after it may have durable commands the read index
    /// lacks without being marked dirty, and the next start catches every such run up
    /// (`projection::projector` keeps the floor behind every run it has not marked). `None` on a
    /// store that never had one: every run that needs catching up is marked.
    pub fn index_floor(&self) -> Result<Option<Timestamp>, Error> {
        self.inner
            .meta
            .get(INDEX_FLOOR)?
            .map(|v| {
                let bytes: [u8; 8] = v.as_ref().try_into().map_err(|_| Error::CorruptRecord {
                    tree: META,
                    detail: format!("{INDEX_FLOOR} of {} bytes", v.len()),
                })?;
                Ok(Timestamp(u64::from_be_bytes(bytes)))
            })
            .transpose()
    }

    /// Moves the index floor. Written after the index writes it vouches for, so that sled's
    /// ordered log never recovers the floor without them.
    pub fn set_index_floor(&self, at: Timestamp) -> Result<(), Error> {
        self.inner.meta.insert(INDEX_FLOOR, &at.0.to_be_bytes())?;
        Ok(())
    }

    pub fn dirty_runs(&self) -> Result<Vec<RunId>, Error> {
        self.inner
            .dirty
            .iter()
            .keys()
            .map(|k| {
                let k = k?;
                let bytes: [u8; 16] = k.as_ref().try_into().map_err(|_| Error::CorruptRecord {
                    tree: DIRTY,
                    detail: format!("key of {} bytes", k.len()),
                })?;
                Ok(RunId::from_bytes(bytes))
            })
            .collect()
    }
}
