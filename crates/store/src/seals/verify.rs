//! Checking chains and seals, wherever they come from: a stopped store (`Store::verify`) or an
//! export's lines (the CLI feeds a `Checker` as it reads them). Seals come first, then every
//! run's events in order; the first thing that does not verify is named (run and event, or
//! seal) and the check stops there. It trusts nothing it is fed: every link is recomputed.

use std::collections::{BTreeMap, HashMap};

use runledger_domain::RunId;

use super::merkle;
use super::record::{ChainId, Leaf, Seal};
use crate::chain::{record_link, Head, Link, GENESIS};
use crate::{codec, Error, Store};

/// What does not verify, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub run_id: Option<RunId>,
    pub seq: Option<u64>,
    pub seal: Option<u64>,
    pub detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.run_id, self.seq, self.seal) {
            (Some(run), Some(seq), _) => write!(f, "run {run}, event {seq}: {}", self.detail),
            (Some(run), None, _) => write!(f, "run {run}: {}", self.detail),
            (None, _, Some(seal)) => write!(f, "seal {seal}: {}", self.detail),
            _ => f.write_str(&self.detail),
        }
    }
}

impl std::error::Error for Failure {}

/// What a check covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub runs: u64,
    pub events: u64,
    pub seals: u64,
    /// Seals whose key differs from the previous seal's (a new instance key, e.g. a restore).
    pub key_changes: Vec<u64>,
    /// Runs with events after the latest seal covering them, and how many such events.
    pub unsealed_runs: u64,
    pub unsealed_events: u64,
    /// Leaves of named chains (the admin log's), which this check does not recompute.
    pub named_leaves: u64,
}

/// Checks seals, then events, fed in order.
#[derive(Default)]
pub struct Checker {
    expected: HashMap<RunId, BTreeMap<u64, (Link, u64)>>,
    previous: Option<Seal>,
    heads: HashMap<RunId, Head>,
    events_seen: bool,
    report: Report,
}

fn seal_failure(seal: u64, detail: impl Into<String>) -> Failure {
    Failure {
        run_id: None,
        seq: None,
        seal: Some(seal),
        detail: detail.into(),
    }
}

fn event_failure(run_id: RunId, seq: u64, detail: impl Into<String>) -> Failure {
    Failure {
        run_id: Some(run_id),
        seq: Some(seq),
        seal: None,
        detail: detail.into(),
    }
}

impl Checker {
    /// Checks the next seal with its leaves: numbering, chaining to the previous seal, the
    /// signature (and that the key changes only where the seal says so), the leaf count and
    /// order, and the root. Its run leaves are then expected of the events.
    pub fn seal(&mut self, seal: &Seal, leaves: &[Leaf]) -> Result<(), Failure> {
        if self.events_seen {
            return Err(seal_failure(seal.number, "a seal after the events"));
        }
        let number = seal.number;
        let (want_number, want_prev) = match &self.previous {
            None => (1, GENESIS),
            Some(p) => (p.number + 1, p.hash()),
        };
        if number != want_number {
            return Err(seal_failure(number, format!("seal {want_number} was due")));
        }
        if seal.prev != want_prev {
            return Err(seal_failure(
                number,
                "its previous-seal hash is not the hash of the seal before it",
            ));
        }
        if !seal.signature_holds(None) {
            return Err(seal_failure(number, "its signature does not verify"));
        }
        match &self.previous {
            Some(p) if p.public_key != seal.public_key && !seal.new_key => {
                return Err(seal_failure(
                    number,
                    "signed by another key than the seal before it, without saying so",
                ))
            }
            _ => {}
        }
        if seal.new_key {
            self.report.key_changes.push(number);
        }
        if leaves.len() as u64 != seal.leaves {
            return Err(seal_failure(
                number,
                format!("{} leaves where it counts {}", leaves.len(), seal.leaves),
            ));
        }
        let bytes: Vec<Vec<u8>> = leaves.iter().map(Leaf::to_bytes).collect();
        if bytes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(seal_failure(number, "its leaves are not in order"));
        }
        let hashes: Vec<Link> = bytes.iter().map(|b| merkle::leaf_hash(b)).collect();
        if merkle::root(&hashes) != seal.root {
            return Err(seal_failure(number, "its leaves do not make its root"));
        }
        for leaf in leaves {
            match leaf.chain {
                ChainId::Run(run_id) => {
                    self.expected
                        .entry(run_id)
                        .or_default()
                        .insert(leaf.head.seq, (leaf.head.link, number));
                }
                ChainId::Named(_) => self.report.named_leaves += 1,
            }
        }
        self.report.seals += 1;
        self.previous = Some(seal.clone());
        Ok(())
    }

    /// Checks the next event of a run (runs may interleave; each run's events come in
    /// order): `body_link` computes its link from the previous one; `stored_prev` is the link
    /// a version 2 record stores before it, and `claimed` the link an export's line gives it.
    pub fn event(
        &mut self,
        run_id: RunId,
        seq: u64,
        body_link: impl FnOnce(&Link) -> Link,
        stored_prev: Option<Link>,
        claimed: Option<Link>,
    ) -> Result<(), Failure> {
        self.events_seen = true;
        let prev = match self.heads.get(&run_id) {
            Some(head) => {
                if seq != head.seq + 1 {
                    return Err(event_failure(
                        run_id,
                        head.seq + 1,
                        format!("missing: the next event is {seq}"),
                    ));
                }
                head.link
            }
            None => {
                if seq != 0 {
                    return Err(event_failure(
                        run_id,
                        0,
                        format!("missing: the run's first event is {seq}"),
                    ));
                }
                self.report.runs += 1;
                GENESIS
            }
        };
        if stored_prev.is_some_and(|stored| stored != prev) {
            // Event seq-1's content no longer gives the link event seq recorded after it.
            return Err(event_failure(
                run_id,
                seq.saturating_sub(1),
                format!("its link differs from the one event {seq} records after it"),
            ));
        }
        let link = body_link(&prev);
        if claimed.is_some_and(|claimed| claimed != link) {
            return Err(event_failure(
                run_id,
                seq,
                "its content does not give the link it carries",
            ));
        }
        if let Some((sealed, number)) = self.expected.get(&run_id).and_then(|e| e.get(&seq)) {
            if *sealed != link {
                return Err(event_failure(
                    run_id,
                    seq,
                    format!("its link differs from the one seal {number} signed"),
                ));
            }
        }
        self.report.events += 1;
        self.heads.insert(run_id, Head { seq, link });
        Ok(())
    }

    /// Ends the check: a sealed event beyond a run's last is missing, and so is a sealed run
    /// never met; events after a run's latest sealed one are its unsealed tail.
    pub fn finish(mut self) -> Result<Report, Failure> {
        let mut runs: Vec<(RunId, Head)> = self.heads.drain().collect();
        runs.sort_by_key(|(id, _)| *id);
        for (run_id, head) in runs {
            let sealed = self.expected.remove(&run_id);
            match sealed.as_ref().and_then(|s| s.iter().next_back()) {
                Some((&seq, &(_, number))) if seq > head.seq => {
                    return Err(event_failure(
                        run_id,
                        seq,
                        format!("missing, though seal {number} covers it"),
                    ))
                }
                Some((&seq, _)) if seq < head.seq => {
                    self.report.unsealed_runs += 1;
                    self.report.unsealed_events += head.seq - seq;
                }
                Some(_) => {}
                None => {
                    self.report.unsealed_runs += 1;
                    self.report.unsealed_events += head.seq + 1;
                }
            }
        }
        if let Some((run_id, sealed)) = self.expected.iter().min_by_key(|(id, _)| **id) {
            let (seq, number) = sealed.iter().next().map_or((0, 0), |(s, (_, n))| (*s, *n));
            return Err(event_failure(
                *run_id,
                seq,
                format!("missing: the run is gone, though seal {number} covers it"),
            ));
        }
        Ok(self.report)
    }
}

impl Store {
    /// Checks every seal and every run's chain of a stopped store. `Ok(Err(failure))` names
    /// the first thing that does not verify; `Err` is a failure to read the store at all.
    pub fn verify(&self) -> Result<Result<Report, Failure>, Error> {
        let mut checker = Checker::default();
        for seal in self.seals() {
            let seal = match seal {
                Ok(seal) => seal,
                Err(e) => return Ok(Err(seal_failure(0, e.to_string()))),
            };
            let leaves = self.seal_leaves_of(seal.number)?;
            if let Err(failure) = checker.seal(&seal, &leaves) {
                return Ok(Err(failure));
            }
        }
        for item in self.inner.events.iter() {
            let (key, value) = item?;
            let Some((run_id, seq)) = crate::layout::split_event_key(&key) else {
                return Ok(Err(Failure {
                    run_id: None,
                    seq: None,
                    seal: None,
                    detail: format!("an event key of {} bytes", key.len()),
                }));
            };
            let record = match codec::run_record(&value) {
                Ok(record) => record,
                Err(e) => {
                    return Ok(Err(event_failure(
                        run_id,
                        seq,
                        format!("the record does not decode: {e}"),
                    )))
                }
            };
            // A record moved under another key is as wrong as a changed one.
            match codec::decode_run(&value) {
                Ok(e) if e.run_id == run_id && e.seq == seq => {}
                Ok(e) => {
                    return Ok(Err(event_failure(
                        run_id,
                        seq,
                        format!("the record names run {} event {}", e.run_id, e.seq),
                    )))
                }
                Err(e) => {
                    return Ok(Err(event_failure(
                        run_id,
                        seq,
                        format!("the record does not decode: {e}"),
                    )))
                }
            }
            let checked = checker.event(
                run_id,
                seq,
                |prev| record_link(prev, &record),
                record.prev,
                None,
            );
            if let Err(failure) = checked {
                return Ok(Err(failure));
            }
        }
        Ok(checker.finish())
    }
}
