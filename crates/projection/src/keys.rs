//! The key layout of the read index — pure functions from a run to the index entries that
//! must exist for it. `apply` in the parent module writes the difference between two runs'
//! entry sets; a rebuild writes the entries of every folded run. Keeping this pure is what
//! lets a property test compare the two.
//!
//! ```text
//! F  field(1)  team(8)  hash(value)(8)  updated_at(8)  run_id   one per filterable field and value
//! T  team(8)  escaped(lowercase(title))  00 00  run_id(16)      title sort
//! C  team(8)  run_id(16)                                        created-at sort
//! A  artifact(16)  run_id(16)                                    the run of an artifact
//! ```
//! `team(8)` is `team_hash(run.team)`: every range holds the runs of one team, so a list for
//! one team walks that team's ranges and never meets another team's runs. In `F` keys the
//! field comes before the team so that the state ranges of every team lie together under
//! `F 01`: the runs-per-state counts of the whole instance (`/metrics`) stay one walk of them.
//!
//! These are logical entries. The entries of one range (`F field team hash`, `T team` or
//! `C team`) are stored in blocks of positions (`blocks.rs`); layout 4 kept each `T` entry as a
//! sled key of its own. Every run has exactly one state, so the five `F State team` ranges of a
//! team together hold each of its runs once in updated-at order: an unfiltered list merges
//! them, and needs no range of its own (layout 2 had one, `U`, which cost every transition a
//! removal and an insertion more). A `C` entry never moves (creation does not change, and the
//! run id starts with the creation time, so id order is created-at order): it costs one entry
//! when a run is created and nothing on its transitions.
//! `artifact_type` is the one field with several values per run: a run has one `F 07` entry
//! per artifact type it holds, added with its first artifact of that type (artifacts are never
//! removed, so an entry only moves with `updated_at`). A run a schedule's firing made has an
//! `F 08` entry under its schedule's id (`schedule_value`); other runs have none, so the range
//! of a schedule holds exactly its runs and costs the rest nothing. A run another run spawned
//! has an `F 11` entry under its parent and an `F 10` entry under each of its ancestors
//! (`RunParent::lineage`), so the children of a run and its descendants at any depth are each
//! one range; a root run has none of either and pays nothing for them. The artifact lookup is not a list
//! range: an `A` range per artifact, whose one position is the run holding it (an artifact uid
//! is a UUID, kept as its 16 bytes; `artifact_part`), so `GET /agent/artifacts/{uid}` finds
//! its run with one seek, and a rebuild and the projector derive it like every other entry.
//! Filter values are hashed to fixed width so that any string works as a key part; a hash
//! collision only costs a wasted candidate, because every candidate is re-checked against the
//! full filter before it is returned.

use std::borrow::Cow;
use std::cell::RefCell;

use sha2::{Digest, Sha256};

use runledger_base::memo::Memo;
use runledger_domain::{Run, RunId};

pub const FILTER: u8 = b'F';
pub const TITLE: u8 = b'T';
pub const CREATED: u8 = b'C';
pub const ARTIFACT: u8 = b'A';

/// Bytes of an `A` range's prefix: tag, artifact.
pub const ARTIFACT_PREFIX: usize = 1 + 16;

/// An artifact uid as a key part: the 16 bytes of the UUID the shell made; any other text (a
/// log imported from elsewhere) by the first 16 bytes of its SHA-256 (a collision costs a
/// candidate, which is checked against the run's row).
pub fn artifact_part(uid: &str) -> [u8; 16] {
    match uuid::Uuid::parse_str(uid) {
        Ok(u) if u.hyphenated().to_string() == uid => *u.as_bytes(),
        _ => {
            let digest = Sha256::new()
                .chain_update(b"artifact")
                .chain_update(uid)
                .finalize();
            let mut out = [0u8; 16];
            out.copy_from_slice(&digest[..16]);
            out
        }
    }
}

/// The prefix of the range holding the run of artifact `uid`.
pub fn artifact_prefix(uid: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(ARTIFACT_PREFIX + 16);
    key.push(ARTIFACT);
    key.extend_from_slice(&artifact_part(uid));
    key
}

/// The tag hashed with a team name (`team_hash`); no `Field` has it.
const TEAM_TAG: u8 = 0;

/// Bytes of a team's stand-in in keys.
pub const TEAM_LEN: usize = 8;

/// A team's fixed-width stand-in in keys (`team_hash`).
pub type TeamHash = [u8; TEAM_LEN];

/// The indexed filter fields, with their tag byte in `F` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    State = 1,
    Name = 2,
    Creator = 3,
    ModelId = 4,
    Source = 5,
    EnvironmentId = 6,
    /// Several values per run: one per artifact type it holds.
    ArtifactType = 7,
    /// The schedule whose firing made the run (its id as text); only scheduled runs have it.
    Schedule = 8,
    /// The run a rerun reruns (its id as text); only reruns have it.
    RerunOf = 9,
    /// Several values per run: every ancestor of a run another run spawned (its parent, the
    /// parent's parent, … up to the root; ids as text). Roots have none.
    Ancestor = 10,
    /// The run that spawned the run (its id as text); only children have it.
    Parent = 11,
}

/// Values remembered per field by `value_hash` before its memo is cleared.
const MEMO_VALUES: usize = 4096;

thread_local! {
    /// `value_hash` of recently seen values, per field tag, and `team_hash` of recently seen
    /// teams (slot 0, `TEAM_TAG`). Filter values and teams repeat a lot (five states, a few
    /// teams, creators, models and environments), and SHA-256 is not free on a CPU without SHA
    /// instructions: a rebuild hashes 7 values per run and an index update those of two runs.
    /// The memo trades up to `MEMO_VALUES` values per slot and thread for those hashes.
    static MEMO: RefCell<[Memo<String, [u8; 8]>; 12]> =
        RefCell::new(std::array::from_fn(|_| Memo::new(MEMO_VALUES)));
}

/// The fixed-width stand-in for a filter value in keys: the first 8 bytes of SHA-256 over the
/// field tag and the value. A cryptographic hash, so that nobody can pick a value whose entries
/// fall in another value's range (a collision costs only wasted candidates, but many of them
/// would slow that range's lists).
pub fn value_hash(field: Field, value: &str) -> [u8; 8] {
    let compute = || {
        let mut h = Sha256::new();
        h.update([field as u8]);
        h.update(value.as_bytes());
        let digest = h.finalize();
        let mut out = [0u8; 8];
        out.copy_from_slice(&digest[..8]);
        out
    };
    MEMO.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return compute();
        };
        memo[field as usize].get_or_compute(value, compute)
    })
}

/// The fixed-width stand-in for a team in keys: the first 8 bytes of SHA-256 over a tag no
/// field has and the team's name (cryptographic for the reason `value_hash` gives).
pub fn team_hash(team: &str) -> TeamHash {
    let compute = || {
        let mut h = Sha256::new();
        h.update([TEAM_TAG]);
        h.update(team.as_bytes());
        let digest = h.finalize();
        let mut out = [0u8; TEAM_LEN];
        out.copy_from_slice(&digest[..TEAM_LEN]);
        out
    };
    MEMO.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return compute();
        };
        memo[usize::from(TEAM_TAG)].get_or_compute(team, compute)
    })
}

/// The prefix under which the entries of `team`'s runs with `field = value` live, with room
/// for a position.
pub fn filter_prefix(team: &TeamHash, field: Field, value: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(FILTER_PREFIX + 24);
    key.push(FILTER);
    key.push(field as u8);
    key.extend_from_slice(team);
    key.extend_from_slice(&value_hash(field, value));
    key
}

/// Bytes of an `F` range's prefix: tag, field, team, value.
pub const FILTER_PREFIX: usize = 2 + TEAM_LEN + 8;

/// Bytes of a `T` or `C` range's prefix: tag, team.
pub const TEAM_PREFIX: usize = 1 + TEAM_LEN;

/// The prefix of the title range of `team`'s runs.
pub fn title_prefix(team: &TeamHash) -> Vec<u8> {
    let mut key = Vec::with_capacity(TEAM_PREFIX + 64);
    key.push(TITLE);
    key.extend_from_slice(team);
    key
}

/// The prefix of the created-at range of `team`'s runs; its positions are run ids.
pub fn created_prefix(team: &TeamHash) -> Vec<u8> {
    let mut key = Vec::with_capacity(TEAM_PREFIX + 16);
    key.push(CREATED);
    key.extend_from_slice(team);
    key
}

/// A key as a message shows it: lowercase hex (keys are bytes, not text).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The smallest byte string greater than every string starting with `prefix`: the end of the
/// range `prefix`, `None` when the range runs to the end of the tree.
pub fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xFF {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// The position of a run in updated-at order: what follows the prefix in `F` keys.
pub fn updated_position(run: &Run) -> Vec<u8> {
    let mut pos = Vec::with_capacity(24);
    pos.extend_from_slice(&run.updated_at.0.to_be_bytes());
    pos.extend_from_slice(&run.id.to_bytes());
    pos
}

/// The position of a run in title order: alphabetical ignoring case (the lowercased title),
/// ties broken by run id. Zero bytes are escaped as `00 FF` and the title ends with `00 00`, so
/// the byte order of positions is the order of lowercased titles.
pub fn title_position(run: &Run) -> Vec<u8> {
    let folded = run.title.to_lowercase();
    let mut pos = Vec::with_capacity(folded.len() + 18);
    for &b in folded.as_bytes() {
        pos.push(b);
        if b == 0 {
            pos.push(0xFF);
        }
    }
    pos.extend_from_slice(&[0, 0]);
    pos.extend_from_slice(&run.id.to_bytes());
    pos
}

/// The run id at the end of any position.
pub fn id_of_position(pos: &[u8]) -> Option<RunId> {
    let start = pos.len().checked_sub(16)?;
    let bytes: [u8; 16] = pos[start..].try_into().ok()?;
    Some(RunId::from_bytes(bytes))
}

/// The updated-at time at the start of an updated-order position.
pub fn updated_of_position(pos: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(pos.get(..8)?.try_into().ok()?))
}

/// The values of the filter fields of a run (state, name, creator, model, source, environment,
/// the types of its artifacts, its schedule). Borrowed from the run but for the schedule id,
/// which is written out as text (`schedule_value`) for the few runs that have one.
pub fn field_values(run: &Run) -> Vec<(Field, Cow<'_, str>)> {
    let mut values = vec![
        (Field::State, Cow::Borrowed(run.state.as_str())),
        (Field::Creator, Cow::Borrowed(run.creator.uid.as_str())),
        (Field::Source, Cow::Borrowed(run.source.as_str())),
    ];
    if let Some(name) = &run.config.name {
        values.push((Field::Name, Cow::Borrowed(name)));
    }
    if let Some(model) = &run.config.model_id {
        values.push((Field::ModelId, Cow::Borrowed(model)));
    }
    if let Some(env) = &run.config.environment_id {
        values.push((Field::EnvironmentId, Cow::Borrowed(env)));
    }
    for name in runledger_domain::ArtifactKind::TYPE_NAMES {
        if run
            .artifacts
            .iter()
            .any(|a| a.artifact.kind.type_name() == name)
        {
            values.push((Field::ArtifactType, Cow::Borrowed(name)));
        }
    }
    if let Some(schedule) = &run.schedule {
        values.push((
            Field::Schedule,
            Cow::Owned(schedule_value(schedule.schedule_id)),
        ));
    }
    if let Some(runledger_domain::RunDerivation {
        from,
        kind: runledger_domain::Derivation::Rerun { .. },
    }) = &run.derived
    {
        values.push((Field::RerunOf, Cow::Borrowed(from)));
    }
    if let Some(parent) = &run.parent {
        values.push((Field::Parent, Cow::Borrowed(parent.parent.as_str())));
        for ancestor in parent.lineage() {
            values.push((Field::Ancestor, Cow::Borrowed(ancestor)));
        }
    }
    values
}

/// A schedule id as the value of an `F 08` entry: its canonical text (the ULID as the API
/// writes it), so a list filter hashes the same text whatever case the client sent.
pub fn schedule_value(id: runledger_domain::ScheduleId) -> String {
    id.to_string()
}

/// Every index key that must exist for `run`, sorted.
pub fn entries(run: &Run) -> Vec<Vec<u8>> {
    let team = team_hash(&run.team);
    let updated = updated_position(run);
    let mut keys = Vec::with_capacity(9);
    for (field, value) in field_values(run) {
        let mut k = filter_prefix(&team, field, &value);
        k.extend_from_slice(&updated);
        keys.push(k);
    }
    let mut t = title_prefix(&team);
    t.extend_from_slice(&title_position(run));
    keys.push(t);
    let mut c = created_prefix(&team);
    c.extend_from_slice(&run.id.to_bytes());
    keys.push(c);
    for reported in &run.artifacts {
        let mut a = artifact_prefix(&reported.artifact.uid);
        a.extend_from_slice(&run.id.to_bytes());
        keys.push(a);
    }
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(field: Field, value: &str) -> [u8; 8] {
        let digest = Sha256::new()
            .chain_update([field as u8])
            .chain_update(value)
            .finalize();
        digest[..8].try_into().expect("8 bytes")
    }

    /// The memo changes nothing: remembered, forgotten or never seen, a value hashes the same,
    /// and the hash is the layout's (`01 "QUEUED"` below is a key of every stored index).
    #[test]
    fn remembered_hashes_are_the_hashes() {
        for _ in 0..3 {
            assert_eq!(
                value_hash(Field::State, "QUEUED"),
                [0x8d, 0x99, 0x1e, 0x90, 0xbd, 0x45, 0x31, 0x3c]
            );
        }
        for i in 0..=MEMO_VALUES + 1 {
            let value = format!("n{i}");
            assert_eq!(value_hash(Field::Name, &value), sha(Field::Name, &value));
            assert_eq!(value_hash(Field::Name, &value), sha(Field::Name, &value));
        }
        assert_ne!(
            value_hash(Field::Name, "x"),
            value_hash(Field::Creator, "x")
        );
        // A team hashes under a tag of its own: a team named like a state is another key part.
        assert_eq!(team_hash("QUEUED"), team_hash("QUEUED"));
        assert_ne!(
            team_hash("QUEUED").as_slice(),
            value_hash(Field::State, "QUEUED").as_slice()
        );
    }

    /// The bytes of every entry of a run (layout 8): each range is the run's team's, and the
    /// `C` entry is the run id.
    #[test]
    fn the_entries_of_a_run_are_scoped_by_its_team() {
        let mut run = runledger_domain::sample_run(1);
        run.team = "infra".into();
        let team = team_hash("infra");
        let digest = Sha256::new()
            .chain_update([0u8])
            .chain_update("infra")
            .finalize();
        assert_eq!(team.as_slice(), &digest[..8]);
        let id = run.id.to_bytes();
        let mut updated = run.updated_at.0.to_be_bytes().to_vec();
        updated.extend_from_slice(&id);
        let filter = |field: Field, value: &str| {
            [
                &[b'F', field as u8][..],
                &team,
                &sha(field, value),
                &updated,
            ]
            .concat()
        };
        let mut want = vec![
            filter(Field::State, "QUEUED"),
            filter(Field::Creator, &run.creator.uid),
            filter(Field::Source, run.source.as_str()),
            [&b"T"[..], &team, b"run 1", &[0, 0], &id].concat(),
            [&b"C"[..], &team, &id].concat(),
        ];
        want.sort();
        assert_eq!(entries(&run), want);
        run.team = "web".into();
        assert!(entries(&run).iter().all(|k| !want.contains(k)));
    }

    /// A scheduled run (layout 10) has one `F 08` entry more, under the hash of its schedule's
    /// id as the API writes it; a run without a schedule, whatever its source, has none.
    #[test]
    fn a_scheduled_run_has_an_entry_under_its_schedule() {
        use runledger_domain::{RunId, RunSchedule, SourceType, Timestamp};
        let mut run = runledger_domain::sample_run(2);
        run.source = SourceType::ScheduledAgent;
        let unscheduled = entries(&run);
        assert!(unscheduled.iter().all(|k| k[..2] != [b'F', 8]));
        let schedule_id = RunId::new(Timestamp(1_763_700_000_000), 9);
        run.schedule = Some(RunSchedule {
            schedule_id,
            schedule_name: "nightly".into(),
            cron_schedule: "0 3 * * *".into(),
            due: Timestamp(1_763_780_400_000),
        });
        let scheduled = entries(&run);
        let text = schedule_id.to_string();
        assert_eq!(text.len(), 26);
        let mut entry = [
            &[b'F', 8][..],
            &team_hash(&run.team),
            &sha(Field::Schedule, &text),
        ]
        .concat();
        entry.extend_from_slice(&updated_position(&run));
        let added: Vec<_> = scheduled
            .iter()
            .filter(|k| !unscheduled.contains(k))
            .collect();
        assert_eq!(added, [&entry]);
        assert_eq!(scheduled.len(), unscheduled.len() + 1);
        assert_eq!(
            filter_prefix(&team_hash(&run.team), Field::Schedule, &text),
            entry[..FILTER_PREFIX]
        );
    }

    /// A child (layout 15) has one `F 11` entry under its parent and one `F 10` entry per
    /// ancestor; a root run has neither.
    #[test]
    fn a_child_has_an_entry_under_its_parent_and_each_ancestor() {
        let mut run = runledger_domain::sample_run(4);
        let root = entries(&run);
        assert!(root
            .iter()
            .all(|k| k[..2] != [b'F', 10] && k[..2] != [b'F', 11]));
        run.parent = Some(runledger_domain::RunParent {
            parent: "P".into(),
            ancestors: vec!["G".into(), "R".into()],
        });
        let child = entries(&run);
        assert_eq!(child.len(), root.len() + 4);
        let team = team_hash(&run.team);
        for (field, value) in [
            (Field::Parent, "P"),
            (Field::Ancestor, "P"),
            (Field::Ancestor, "G"),
            (Field::Ancestor, "R"),
        ] {
            let mut k = filter_prefix(&team, field, value);
            k.extend_from_slice(&updated_position(&run));
            assert!(child.contains(&k), "{field:?} {value}");
        }
    }
}
