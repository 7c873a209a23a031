//! One run's bundle with the real binary (issue #39, items 2 and 3): `runledger export --run`
//! and `import --run` carry a run with follow-ups, attachments, an artifact and its transcript
//! between two stores and the second serves it as the first did; the same run exports to the
//! same bytes twice; `GET …/export` answers the run's team and admins and 404 to others; an
//! import refuses an existing id, an edited event or state, a tampered section, a path, sizes
//! that lie and a truncated file, writing nothing; `runledger inspect` serves the reads and the
//! console and refuses every write.

mod http;
mod inspect;
mod refusals;
mod round_trip;
mod support;
