//! Which uid each run's agents run as, when a root server gives every run a uid of its own
//! (`server.agent_uids`, `docs/decisions/0029-agent-uids.md`).
//!
//! One sled tree, `agent_uids`, with two kinds of keys: `r` + the run id (16 bytes, big-endian)
//! holds the run's uid (4 bytes, big-endian), and `u` + the uid (4 bytes, big-endian) holds the
//! run id, so that the uids taken are found in order and a uid is never given to two runs; an
//! empty value marks a uid passed over because the host uses it (the caller says which). A
//! uid is written once and never freed: a run's workspace and home, which its uid owns, live as
//! long as the data directory. The event log is left as it was: no event carries a uid.
//!
//! This module knows the keys and the allocation; it does not know what a uid is used for.

use std::ops::RangeInclusive;

use runledger_domain::RunId;

use super::{Error, Store};

const AGENT_UIDS: &str = "agent_uids";
const RUN: u8 = b'r';
const UID: u8 = b'u';

fn run_key(run: RunId) -> Vec<u8> {
    let mut key = vec![RUN];
    key.extend_from_slice(&run.to_bytes());
    key
}

fn uid_key(uid: u32) -> [u8; 5] {
    let [a, b, c, d] = uid.to_be_bytes();
    [UID, a, b, c, d]
}

fn uid_of_key(key: &[u8]) -> Option<u32> {
    match key {
        [UID, rest @ ..] => rest.try_into().ok().map(u32::from_be_bytes),
        _ => None,
    }
}

/// The most uids one allocation passes over before it gives up: a host that uses that many
/// uids of the range in a row (or whose user database cannot be read) has a range that does
/// not suit it, and walking on would mark the whole range passed over.
pub const MAX_PASSED_OVER: u32 = 64;

/// What became of taking a uid for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// The run's uid (recorded before, or now).
    Uid(u32),
    /// Every uid of the range belongs to a run, or was passed over.
    Exhausted,
    /// `MAX_PASSED_OVER` uids in a row were in use on the host.
    HostUsesRange,
}

fn corrupt(detail: String) -> Error {
    Error::CorruptRecord {
        tree: AGENT_UIDS,
        detail,
    }
}

impl Store {
    /// The uid recorded for `run`, if it has one.
    pub fn agent_uid(&self, run: RunId) -> Result<Option<u32>, Error> {
        let tree = self.inner.db.open_tree(AGENT_UIDS)?;
        match tree.get(run_key(run))? {
            None => Ok(None),
            Some(value) => value
                .as_ref()
                .try_into()
                .map(|bytes| Some(u32::from_be_bytes(bytes)))
                .map_err(|_| corrupt(format!("the uid of run {run} is {} bytes", value.len()))),
        }
    }

    /// The uid of `run`: the one recorded, or else the lowest of `range` above every uid taken
    /// (or, when the top of the range is taken, the first one free below it) that `usable`
    /// accepts, recorded for the run; one `usable` refuses is marked passed over and never
    /// offered again. Not yet durable: the caller syncs before anything uses it.
    pub fn take_agent_uid(
        &self,
        run: RunId,
        range: RangeInclusive<u32>,
        usable: &dyn Fn(u32) -> bool,
    ) -> Result<Taken, Error> {
        if let Some(uid) = self.agent_uid(run)? {
            return Ok(Taken::Uid(uid));
        }
        let mut passed_over = 0;
        let tree = self.inner.db.open_tree(AGENT_UIDS)?;
        let (start, end) = (*range.start(), *range.end());
        let taken = |uid: u32| tree.contains_key(uid_key(uid));
        loop {
            let highest = match tree.range(uid_key(start)..=uid_key(end)).next_back() {
                Some(entry) => {
                    let (key, _) = entry?;
                    Some(uid_of_key(&key).ok_or_else(|| corrupt(format!("key {key:?}")))?)
                }
                None => None,
            };
            let candidate = match highest {
                None => Some(start),
                Some(h) if h < end => Some(h + 1),
                // The top is taken: the range is walked for a gap (only ever after the uids
                // above every other have been used, which a hundred million runs take).
                Some(_) => {
                    let mut free = None;
                    for uid in range.clone() {
                        if !taken(uid)? {
                            free = Some(uid);
                            break;
                        }
                    }
                    free
                }
            };
            let Some(uid) = candidate else {
                return Ok(Taken::Exhausted);
            };
            if !usable(uid) {
                if passed_over == MAX_PASSED_OVER {
                    return Ok(Taken::HostUsesRange);
                }
                passed_over += 1;
                // Passed over for good, so that the next candidate lies above it.
                let _ = tree.compare_and_swap(uid_key(uid), None as Option<&[u8]>, Some(vec![]))?;
                continue;
            }
            // Taken only if nobody took it meanwhile (another run of this server starting at
            // the same moment): the uid key is what makes a uid one run's.
            let claimed = tree.compare_and_swap(
                uid_key(uid),
                None as Option<&[u8]>,
                Some(run.to_bytes().to_vec()),
            )?;
            if claimed.is_err() {
                continue;
            }
            // A crash between the two leaves a uid no run uses: lost, never shared.
            tree.insert(run_key(run), uid.to_be_bytes().to_vec())?;
            return Ok(Taken::Uid(uid));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(_: u32) -> bool {
        true
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), &super::super::Options::default()).expect("open");
        (dir, store)
    }

    #[test]
    fn each_run_keeps_one_uid_and_no_uid_serves_two_runs() {
        let (_dir, store) = store();
        let (a, b, c) = (RunId(1), RunId(2), RunId(3));
        assert_eq!(store.agent_uid(a).expect("read"), None);
        assert_eq!(
            store.take_agent_uid(a, 100..=102, &any).expect("take"),
            Taken::Uid(100)
        );
        assert_eq!(
            store.take_agent_uid(b, 100..=102, &any).expect("take"),
            Taken::Uid(101)
        );
        assert_eq!(
            store.take_agent_uid(a, 100..=102, &any).expect("again"),
            Taken::Uid(100)
        );
        assert_eq!(store.agent_uid(a).expect("read"), Some(100));
        assert_eq!(
            store.take_agent_uid(c, 100..=102, &any).expect("take"),
            Taken::Uid(102)
        );
        // Exhausted: a clear answer, nothing recorded.
        let d = RunId(4);
        assert_eq!(
            store.take_agent_uid(d, 100..=102, &any).expect("take"),
            Taken::Exhausted
        );
        assert_eq!(store.agent_uid(d).expect("read"), None);
    }

    #[test]
    fn a_uid_survives_reopening_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = Store::open(dir.path(), &super::super::Options::default()).expect("open");
            assert_eq!(
                store.take_agent_uid(RunId(7), 5..=9, &any).expect("take"),
                Taken::Uid(5)
            );
            store.sync_blocking().expect("sync");
        }
        let store = Store::open(dir.path(), &super::super::Options::default()).expect("reopen");
        assert_eq!(store.agent_uid(RunId(7)).expect("read"), Some(5));
        assert_eq!(
            store.take_agent_uid(RunId(8), 5..=9, &any).expect("take"),
            Taken::Uid(6)
        );
    }

    #[test]
    fn a_gap_below_the_top_is_found_once_the_top_is_taken() {
        let (_dir, store) = store();
        let tree = store.inner.db.open_tree(AGENT_UIDS).expect("tree");
        // Uids taken out of order (a run lost between its two writes leaves such a gap).
        for uid in [10, 12] {
            tree.insert(uid_key(uid), RunId(u128::from(uid)).to_bytes().to_vec())
                .expect("insert");
        }
        assert_eq!(
            store.take_agent_uid(RunId(1), 10..=12, &any).expect("take"),
            Taken::Uid(11)
        );
        assert_eq!(
            store.take_agent_uid(RunId(2), 10..=12, &any).expect("take"),
            Taken::Exhausted
        );
        // Uids outside the range are not the range's.
        assert_eq!(
            store.take_agent_uid(RunId(3), 13..=14, &any).expect("take"),
            Taken::Uid(13)
        );
    }

    #[test]
    fn a_uid_the_host_uses_is_passed_over_for_good() {
        let (_dir, store) = store();
        let usable = |uid: u32| uid != 21 && uid != 23;
        assert_eq!(
            store
                .take_agent_uid(RunId(1), 20..=23, &usable)
                .expect("take"),
            Taken::Uid(20)
        );
        assert_eq!(
            store
                .take_agent_uid(RunId(2), 20..=23, &usable)
                .expect("take"),
            Taken::Uid(22)
        );
        // 23 was never looked at; 21 is passed over even once the host no longer uses it.
        assert_eq!(
            store.take_agent_uid(RunId(3), 20..=23, &any).expect("take"),
            Taken::Uid(23)
        );
        assert_eq!(
            store.take_agent_uid(RunId(5), 20..=23, &any).expect("take"),
            Taken::Exhausted
        );
        // A host that uses the range in a row gives up the allocation, not the whole range.
        let unusable = |_: u32| false;
        assert_eq!(
            store
                .take_agent_uid(RunId(4), 100..=1000, &unusable)
                .expect("take"),
            Taken::HostUsesRange
        );
        assert_eq!(
            store
                .take_agent_uid(RunId(4), 100..=1000, &any)
                .expect("take"),
            Taken::Uid(100 + MAX_PASSED_OVER)
        );
    }
}
