//! Property tests of the event-sourced core against a real sled store:
//! - folding a run's stored log equals the state the index holds (replay == live);
//! - rebuilding the read index from the log equals the incrementally maintained index;
//! - paging through any list query of any team (the `artifact_type` filter included) returns
//!   exactly that team's matching runs, in order, once each;
//! - every reported artifact is found by its uid, through the index, on its run;
//! - the runs-per-state tally the index's writes keep equals a fresh count;
//! - the state as of every event equals the fold of the events up to it (time travel);
//! - values on both sides of sled's blob threshold sync without a false failure and read back
//!   whole after a reopen.

mod blobs;
mod index;
mod lists;
mod support;
mod travel;
