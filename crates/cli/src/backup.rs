//! Backup and restore: `runledger export [--with-keys] [--output FILE]` and `runledger import`.
//!
//! A backup is JSON lines. An event line is exactly what `format::events::event_json` writes (the
//! events API shares it), and `event_from_json` reads it back, refusing anything that would not
//! render to the same line, so every event comes back as it was stored, except MCP credential
//! values: they read `***` in every output. A run's sealed credentials come back with it (and
//! open again only with the instance's credential key, which only `--with-keys` carries); a
//! legacy run's plain credential values are not in a backup at all. `--with-keys` frames
//! the events with a `backup` header line and, after them, writes one line per API key record
//! (its SHA-256, never the key), one per instance secret and an `end` line with the counts.
//! Those lines carry a `record` field, which event lines never have; the frame lets an import
//! tell a whole backup from a truncated one.
//!
//! An import never merges and is all-or-nothing: it restores only into a data directory that
//! holds no runs and no keys, builds the store in a staging directory while it checks each line
//! as the file streams by, and moves the store into place only once every line is in, the read
//! index is rebuilt and everything is durable. This module writes through `Store` and `Index`
//! only; it knows neither sled's layout nor the index's. Like the other offline commands it
//! must not run while a server holds the data directory (the store's lock refuses that).

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufWriter, Read as _, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::commands::Cli;
use crate::open::{held, open_salvage};
use runledger_domain::DEFAULT_TEAM;
use runledger_domain::{evolve, recordable, Event, Run, RunId, Timestamp};
use runledger_format::events::{event_from_json, event_json};
use runledger_format::schedules::{schedule_event_from_json, schedule_event_json};
use runledger_format::time::{format_time, hex, parse_exact_time, unhex32};
use runledger_projection::Index;
use runledger_store::api_keys::{KeyKind, KeyRecord};
use runledger_store::{self as store, Envelope, ScheduleEnvelope, Store};

/// The version of the frame `--with-keys` writes; an import refuses versions it does not know.
const FORMAT: u64 = 1;
/// The longest line an import reads. The largest event is a create whose 1 MiB body is all
/// control characters, which JSON escapes six-fold; anything far longer is not a backup, and
/// the bound keeps a wrong file from filling memory.
const MAX_LINE: u64 = 64 * 1024 * 1024;
/// How many events an import lists by name when they are not what this version records.
const SHOWN_NOTES: u64 = 10;

/// One line of a backup.
// As for `Event`: one line exists at a time, so boxing the large variant would only add an
// allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Event(Envelope),
    /// An event of a schedule's log.
    Schedule(ScheduleEnvelope),
    Header {
        format: u64,
    },
    Key(KeyRecord),
    Secret {
        name: String,
        value: [u8; 32],
    },
    /// A piece of a content the events name, at `offset` of its `size` bytes.
    Content {
        sha256: [u8; 32],
        size: u64,
        offset: u64,
        data: Vec<u8>,
    },
    End(Counts),
}

/// How many bytes of a content one line carries (before base64), well under `MAX_LINE`.
const CONTENT_CHUNK: usize = 4 * 1024 * 1024;

/// What a backup holds; the `end` line repeats it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    events: u64,
    keys: u64,
    secrets: u64,
    /// Whole contents (attachments, artifacts' bytes); written in the end record only when
    /// there are any, so a backup without them reads as it was written.
    contents: u64,
    /// Schedule events; like `contents`, in the end record only when there are any.
    schedule_events: u64,
}

impl Line {
    fn to_json(&self) -> Value {
        match self {
            Line::Event(e) => event_json(e),
            Line::Schedule(e) => schedule_event_json(e),
            Line::Header { format } => json!({ "record": "backup", "format": format }),
            Line::Key(k) => {
                let mut v = json!({
                    "record": "key",
                    "id": k.id,
                    "name": k.name,
                    "kind": k.kind.as_str(),
                    "admin": k.admin,
                    "hash": hex(&k.hash),
                    "created_at": format_time(k.created_at),
                });
                if let Some(t) = k.revoked_at {
                    v["revoked_at"] = json!(format_time(t));
                }
                // Written only when not `default`, so a backup from before teams reads back
                // exactly as it was written.
                if k.team != DEFAULT_TEAM {
                    v["team"] = json!(k.team);
                }
                v
            }
            Line::Secret { name, value } => {
                json!({ "record": "secret", "name": name, "value": hex(value) })
            }
            Line::Content {
                sha256,
                size,
                offset,
                data,
            } => {
                use base64::Engine;
                json!({
                    "record": "content",
                    "sha256": hex(sha256),
                    "size": size,
                    "offset": offset,
                    "data": base64::engine::general_purpose::STANDARD.encode(data),
                })
            }
            Line::End(c) => {
                let mut v = json!({
                    "record": "end",
                    "events": c.events,
                    "keys": c.keys,
                    "secrets": c.secrets,
                });
                if c.contents > 0 {
                    v["contents"] = json!(c.contents);
                }
                if c.schedule_events > 0 {
                    v["schedule_events"] = json!(c.schedule_events);
                }
                v
            }
        }
    }

    /// Reads one line. Errors say what is wrong without quoting values, which may be secrets.
    fn parse(text: &str) -> Result<Line, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let Some(record) = value.get("record") else {
            return event_from_json(&value)
                .map(Line::Event)
                .map_err(|e| format!("not an event as runledger exports it: {e}"));
        };
        let line = match record.as_str() {
            Some(runledger_format::schedules::RECORD) => {
                Line::Schedule(schedule_event_from_json(&value)?)
            }
            Some("backup") => Line::Header {
                format: read::<HeaderIn>(&value, "backup")?.format,
            },
            Some("key") => Line::Key(read::<KeyIn>(&value, "key")?.record()?),
            Some("secret") => {
                let s: SecretIn = read(&value, "secret")?;
                let value = unhex32(&s.value)
                    .ok_or_else(|| format!("secret {:?}: value is not 64 hex digits", s.name))?;
                Line::Secret {
                    name: s.name,
                    value,
                }
            }
            Some("content") => {
                use base64::Engine;
                let c: ContentIn = read(&value, "content")?;
                let sha256 = unhex32(&c.sha256)
                    .ok_or_else(|| "content: sha256 is not 64 hex digits".to_string())?;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(c.data.as_bytes())
                    .map_err(|_| format!("content {}: data is not base64", c.sha256))?;
                Line::Content {
                    sha256,
                    size: c.size,
                    offset: c.offset,
                    data,
                }
            }
            Some("end") => {
                let c: EndIn = read(&value, "end")?;
                Line::End(Counts {
                    events: c.events,
                    keys: c.keys,
                    secrets: c.secrets,
                    contents: c.contents,
                    schedule_events: c.schedule_events,
                })
            }
            _ => return Err(format!("unknown record {record}")),
        };
        // As for events: only what export writes, so nothing in the line is silently dropped.
        if line.to_json() != value {
            return Err(format!(
                "the {record} record has fields that runledger does not write, or writes otherwise"
            ));
        }
        Ok(line)
    }
}

fn read<T: for<'de> Deserialize<'de>>(value: &Value, what: &str) -> Result<T, String> {
    T::deserialize(value).map_err(|e| format!("bad {what} record: {e}"))
}

#[derive(Deserialize)]
struct HeaderIn {
    format: u64,
}

#[derive(Deserialize)]
struct KeyIn {
    id: String,
    name: String,
    kind: String,
    admin: bool,
    hash: String,
    created_at: String,
    revoked_at: Option<String>,
    team: Option<String>,
}

impl KeyIn {
    fn record(self) -> Result<KeyRecord, String> {
        let time = |field: &str, s: &str| {
            parse_exact_time(s).ok_or_else(|| format!("key {}: {field} is not a time", self.id))
        };
        if self.id.is_empty() {
            return Err("a key record without an id".into());
        }
        if let Some(team) = &self.team {
            if !runledger_domain::valid_team_name(team) {
                return Err(format!("key {}: team is not a team name", self.id));
            }
        }
        Ok(KeyRecord {
            kind: KeyKind::parse(&self.kind)
                .ok_or_else(|| format!("key {}: kind {:?} is unknown", self.id, self.kind))?,
            hash: unhex32(&self.hash)
                .ok_or_else(|| format!("key {}: hash is not 64 hex digits", self.id))?,
            created_at: time("created_at", &self.created_at)?,
            revoked_at: match &self.revoked_at {
                Some(t) => Some(time("revoked_at", t)?),
                None => None,
            },
            admin: self.admin,
            name: self.name,
            id: self.id,
            team: self.team.unwrap_or_else(|| DEFAULT_TEAM.to_string()),
        })
    }
}

#[derive(Deserialize)]
struct SecretIn {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct EndIn {
    events: u64,
    keys: u64,
    secrets: u64,
    #[serde(default)]
    contents: u64,
    #[serde(default)]
    schedule_events: u64,
}

#[derive(Deserialize)]
struct ContentIn {
    sha256: String,
    size: u64,
    offset: u64,
    data: String,
}

/// A content being restored from its lines: written to a temporary file of the staging
/// store, hashed as it grows, and moved into the content store once whole and verified.
struct Incoming {
    sha256: [u8; 32],
    size: u64,
    next: u64,
    path: PathBuf,
    file: fs::File,
    hasher: sha2::Sha256,
}

impl Incoming {
    /// Begins a content of `size` bytes with SHA-256 `sha256`, in a temporary file of `store`.
    fn start(store: &Store, sha256: [u8; 32], size: u64) -> Result<Incoming, String> {
        let path = store.data_dir().join("content-import.part");
        let file = fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Incoming {
            sha256,
            size,
            next: 0,
            path,
            file,
            hasher: sha2::Digest::new(),
        })
    }

    /// Appends the piece at `offset`, which must be the next one and fit in the size.
    fn add(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        let named = hex(&self.sha256);
        if offset != self.next {
            return Err(format!(
                "content {named}: a piece at byte {offset} where byte {} was due",
                self.next
            ));
        }
        if offset + data.len() as u64 > self.size || (data.is_empty() && self.size > 0) {
            return Err(format!(
                "content {named}: the pieces do not add up to its {} bytes",
                self.size
            ));
        }
        sha2::Digest::update(&mut self.hasher, data);
        self.file
            .write_all(data)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.next += data.len() as u64;
        Ok(())
    }

    fn whole(&self) -> bool {
        self.next == self.size
    }

    /// Verifies the content and moves it into the store's content store.
    fn finish(self, store: &Store) -> Result<(), String> {
        let named = hex(&self.sha256);
        let digest: [u8; 32] = sha2::Digest::finalize(self.hasher).into();
        if digest != self.sha256 {
            return Err(format!(
                "content {named}: its bytes do not have that SHA-256; the backup is damaged"
            ));
        }
        drop(self.file);
        let stored = fs::File::open(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                store
                    .content()
                    .put_reader(f, self.size, "application/octet-stream")
                    .map_err(|e| e.to_string())
            });
        let _ = fs::remove_file(&self.path);
        stored.map(|_| ())
    }
}

/// Checks event lines as they stream by. Only a little is kept per run (what its next event
/// must be), so the file is never held in memory; runs may be interleaved.
#[derive(Default)]
struct Checker {
    runs: HashMap<RunId, Next>,
    schedules: HashMap<RunId, Next>,
}

struct Next {
    seq: u64,
    at: Timestamp,
}

impl Checker {
    /// A schedule's events must be contiguous from its `ScheduleCreated` at seq 0, in time
    /// order, like a run's.
    fn schedule_event(&mut self, e: &ScheduleEnvelope) -> Result<(), String> {
        let id = e.schedule_id;
        let created = matches!(e.event, runledger_domain::ScheduleEvent::Created { .. });
        let Some(next) = self.schedules.get_mut(&id) else {
            if e.seq != 0 || !created {
                return Err(format!(
                    "event {} ({}) of schedule {id} comes before the schedule's \
                     ScheduleCreated event at seq 0",
                    e.seq,
                    e.event.kind()
                ));
            }
            self.schedules.insert(id, Next { seq: 1, at: e.at });
            return Ok(());
        };
        if e.seq != next.seq || created {
            return Err(format!(
                "schedule {id}: event {} ({}) where event {} was due: a schedule's events must \
                 be contiguous and created once",
                e.seq,
                e.event.kind(),
                next.seq
            ));
        }
        if e.at < next.at {
            return Err(format!(
                "event {} of schedule {id} is before the schedule's previous event",
                e.seq
            ));
        }
        next.seq += 1;
        next.at = e.at;
        Ok(())
    }

    fn event(&mut self, e: &Envelope) -> Result<(), String> {
        let id = e.run_id;
        let Some(next) = self.runs.get_mut(&id) else {
            if e.seq != 0 || !e.event.is_creation() {
                return Err(format!(
                    "event {} ({}) of run {id} comes before the run's Created event: a run's \
                     events must be in order, starting with Created at seq 0",
                    e.seq,
                    e.event.kind()
                ));
            }
            // The store and the index order runs by id because of this (docs/architecture.md).
            if e.at != id.created_at() {
                return Err(format!(
                    "run {id} was created at {}, but its id says {}: a run id's time is its \
                     creation time",
                    format_time(e.at),
                    format_time(id.created_at())
                ));
            }
            self.runs.insert(id, Next { seq: 1, at: e.at });
            return Ok(());
        };
        if e.seq != next.seq {
            return Err(if e.seq < next.seq {
                format!("run {id} has an event {} already", e.seq)
            } else {
                format!(
                    "run {id} skips from event {} to event {}: events are missing",
                    next.seq - 1,
                    e.seq
                )
            });
        }
        if e.event.is_creation() {
            return Err(format!(
                "run {id} is created a second time (event {})",
                e.seq
            ));
        }
        if e.at < next.at {
            return Err(format!(
                "event {} of run {id} is at {}, before the run's previous event ({}): a run's \
                 events never go back in time",
                e.seq,
                format_time(e.at),
                format_time(next.at)
            ));
        }
        next.seq += 1;
        next.at = e.at;
        Ok(())
    }
}

/// Restores the lines of `input` into `store` (which must be empty). `source` names the input
/// in messages.
fn restore(store: &Store, mut input: impl BufRead, source: &str) -> anyhow::Result<Counts> {
    let mut counts = Counts::default();
    let mut checker = Checker::default();
    let mut framed = false;
    let mut ended = false;
    let mut buf = Vec::new();
    let mut number = 0u64;
    let mut incoming: Option<Incoming> = None;
    loop {
        buf.clear();
        let n = (&mut input)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("cannot read {source}"))?;
        if n == 0 {
            break;
        }
        number += 1;
        let at_line = |problem: String| anyhow!("{source}, line {number}: {problem}");
        let Some(text) = buf.strip_suffix(b"\n") else {
            return Err(at_line(if n as u64 > MAX_LINE {
                format!("longer than {MAX_LINE} bytes: not a runledger export")
            } else {
                "the last line has no line end: the file is truncated".into()
            }));
        };
        let text = std::str::from_utf8(text).map_err(|_| at_line("not UTF-8".into()))?;
        if ended {
            return Err(at_line("a line after the end record".into()));
        }
        match Line::parse(text).map_err(at_line)? {
            Line::Header { format } => {
                if number != 1 {
                    return Err(at_line("a backup header that is not the first line".into()));
                }
                if format != FORMAT {
                    return Err(at_line(format!(
                        "backup format {format}; this version reads format {FORMAT}"
                    )));
                }
                framed = true;
            }
            Line::Event(e) => {
                checker.event(&e).map_err(at_line)?;
                store.append(std::slice::from_ref(&e))?;
                // Teams are not lines of their own: each one a run or a key names is made.
                if let Event::Admitted(a) = &e.event {
                    store.keys().create_team(&a.team, e.at)?;
                }
                counts.events += 1;
            }
            Line::Schedule(e) => {
                checker.schedule_event(&e).map_err(at_line)?;
                store.append_schedule(std::slice::from_ref(&e))?;
                if let runledger_domain::ScheduleEvent::Created { team, .. } = &e.event {
                    store.keys().create_team(team, e.at)?;
                }
                counts.schedule_events += 1;
            }
            Line::Key(k) => {
                if !store.keys().restore(&k)? {
                    return Err(at_line(format!(
                        "key {} has the id or the hash of an earlier key",
                        k.id
                    )));
                }
                store.keys().create_team(&k.team, k.created_at)?;
                counts.keys += 1;
            }
            Line::Secret { name, value } => {
                if !store::INSTANCE_SECRETS.contains(&name.as_str()) {
                    return Err(at_line(format!(
                        "unknown instance secret {name:?} (this version knows {})",
                        store::INSTANCE_SECRETS.join(", ")
                    )));
                }
                if !store.restore_secret(&name, &value)? {
                    return Err(at_line(format!("secret {name:?} appears twice")));
                }
                counts.secrets += 1;
            }
            Line::Content {
                sha256,
                size,
                offset,
                data,
            } => {
                let mut part = match incoming.take() {
                    Some(part) if part.sha256 == sha256 => part,
                    Some(part) => {
                        return Err(at_line(format!(
                            "content {} ends after {} of its {} bytes",
                            hex(&part.sha256),
                            part.next,
                            part.size
                        )))
                    }
                    None => Incoming::start(store, sha256, size).map_err(at_line)?,
                };
                part.add(offset, &data).map_err(at_line)?;
                if part.whole() {
                    part.finish(store).map_err(at_line)?;
                    counts.contents += 1;
                } else {
                    incoming = Some(part);
                }
            }
            Line::End(end) => {
                if !framed {
                    return Err(at_line("an end record without a backup header".into()));
                }
                if end != counts {
                    return Err(at_line(format!(
                        "the end record counts {} events, {} schedule events, {} keys and {} \
                         secrets, but the lines before it hold {}, {}, {} and {}",
                        end.events,
                        end.schedule_events,
                        end.keys,
                        end.secrets,
                        counts.events,
                        counts.schedule_events,
                        counts.keys,
                        counts.secrets
                    )));
                }
                ended = true;
            }
        }
    }
    if let Some(part) = incoming {
        bail!(
            "{source} ends with content {} after {} of its {} bytes: the backup is truncated",
            hex(&part.sha256),
            part.next,
            part.size
        );
    }
    if framed && !ended {
        bail!("{source} ends after line {number} without its end record: the backup is truncated");
    }
    Ok(counts)
}

/// Reports the events that this version's rules would not have recorded where they stand.
/// They are imported all the same: `evolve` folds them (it is total), and a backup written by
/// an older version with other rules must still restore. Returns how many there were.
fn audit(store: &Store) -> anyhow::Result<u64> {
    let mut run: Option<Run> = None;
    let mut odd = 0u64;
    for e in store.scan() {
        let e = e?;
        if run.as_ref().is_some_and(|r| r.id != e.run_id) {
            run = None;
        }
        if !recordable(run.as_ref(), &e.event) {
            odd += 1;
            if odd <= SHOWN_NOTES {
                eprintln!(
                    "runledger import: note: event {} ({}) of run {} is not what this version \
                     records in that state; imported as it is",
                    e.seq,
                    e.event.kind(),
                    e.run_id
                );
            }
        }
        for content in e.event.contents() {
            if store.content().open_content(content).is_err() {
                eprintln!(
                    "runledger import: warning: run {} names content {} (event {}), which the \
                     backup does not hold; it cannot be downloaded or attached again",
                    e.run_id,
                    hex(&content.sha256),
                    e.seq
                );
            }
        }
        run = evolve(run, e.run_id, &e.event, e.at);
    }
    Ok(odd)
}

/// Builds a complete store in `dir` (an empty directory) from `input`.
fn build(dir: &Path, input: impl BufRead, source: &str) -> anyhow::Result<(Counts, u64)> {
    let store = Store::open(dir, &store::Options::default())?;
    let counts = restore(&store, input, source)?;
    let index = Index::open(store.db())?;
    let runs = index.rebuild(&store)?.runs;
    let odd = audit(&store)?;
    if odd > SHOWN_NOTES {
        eprintln!(
            "runledger import: note: {} more such events",
            odd - SHOWN_NOTES
        );
    }
    store.sync_blocking()?;
    // Dropping both handles closes sled (the store joins its sync thread), so nothing writes
    // to the files while they move.
    drop(index);
    drop(store);
    // sled snapshots its page table only when it opens a database: opened once more, it
    // covers the whole import, and the first start need not scan it.
    if let Err(e) = store::refresh_snapshot(dir) {
        eprintln!(
            "runledger import: warning: could not write sled's snapshot ({e}); the first start \
             scans the whole store"
        );
    }
    Ok((counts, runs))
}

/// Where an import builds its store, and how it moves it into place.
enum Staging {
    /// The data directory does not exist: it is built whole beside it and renamed into place,
    /// so it appears complete or not at all.
    Beside { target: PathBuf, dir: PathBuf },
    /// The data directory exists and holds no runs and no keys. It may be a mount point, onto
    /// which nothing can be renamed, so the store is built inside it, in `dir`, and its
    /// entries are renamed into place (an empty store they replace goes first).
    Inside { target: PathBuf, dir: PathBuf },
}

impl Staging {
    fn prepare(target: &Path) -> anyhow::Result<Staging> {
        let suffix = ulid::Ulid::new().to_string().to_lowercase();
        match fs::metadata(target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
                    bail!("{} cannot be a data directory", target.display());
                };
                fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
                let dir = parent.join(format!("{}.import-{suffix}", name.to_string_lossy()));
                fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
                Ok(Staging::Beside {
                    target: target.to_path_buf(),
                    dir,
                })
            }
            Err(e) => Err(e).with_context(|| format!("cannot inspect {}", target.display())),
            Ok(meta) if !meta.is_dir() => {
                bail!("{} exists and is not a directory", target.display())
            }
            Ok(_) => {
                refuse_unless_empty(target)?;
                let dir = target.join(format!(".import-{suffix}"));
                fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
                Ok(Staging::Inside {
                    target: target.to_path_buf(),
                    dir,
                })
            }
        }
    }

    fn dir(&self) -> &Path {
        match self {
            Staging::Beside { dir, .. } | Staging::Inside { dir, .. } => dir,
        }
    }

    /// Moves the finished store into place and makes the move durable.
    fn commit(self) -> anyhow::Result<()> {
        match &self {
            Staging::Beside { target, dir } => {
                // Fails if the data directory appeared meanwhile with anything in it: never merge.
                fs::rename(dir, target).with_context(|| {
                    format!("cannot move {} to {}", dir.display(), target.display())
                })?;
                sync_parent_of(target)
            }
            Staging::Inside { target, dir } => {
                // A server may have started on the directory since the first check.
                refuse_unless_empty(target)?;
                let aside = dir.join("replaced");
                fs::create_dir(&aside)?;
                let mv = |from: &Path, to: &Path| {
                    fs::rename(from, to).with_context(|| {
                        format!("cannot move {} to {}", from.display(), to.display())
                    })
                };
                for name in store::STORE_ENTRIES {
                    if fs::symlink_metadata(target.join(name)).is_ok() {
                        mv(&target.join(name), &aside.join(name))?;
                    }
                }
                // sled's directory before the watermark: a store without its watermark opens
                // as a new one would, while a stale watermark beside it would read as a loss.
                for name in store::STORE_ENTRIES {
                    mv(&dir.join(name), &target.join(name))?;
                }
                sync_dir(target)?;
                fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))
            }
        }
    }

    /// Removes everything the import wrote; the data directory is as it was.
    fn abandon(self) {
        let dir = self.dir();
        if let Err(e) = fs::remove_dir_all(dir) {
            eprintln!(
                "runledger import: cannot remove the staging directory {}: {e}",
                dir.display()
            );
        }
    }
}

/// Refuses a data directory that holds runs or keys, or that a server holds.
fn refuse_unless_empty(target: &Path) -> anyhow::Result<()> {
    if !Store::exists_in(target) {
        return Ok(());
    }
    let store = match Store::open(target, &store::Options::default()) {
        Ok(store) => store,
        Err(store::Error::Locked(dir)) => return Err(held(&dir)),
        Err(e) => return Err(e.into()),
    };
    let (events, keys) = (
        store.event_count() + store.schedule_event_count(),
        store.keys().list()?.len(),
    );
    if events > 0 || keys > 0 {
        bail!(
            "{} already holds {events} events and {keys} API keys; `runledger import` restores \
             only into a new or empty data directory and never merges. Choose another \
             --data-dir, or move this one away first",
            target.display()
        );
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

fn sync_parent_of(path: &Path) -> anyhow::Result<()> {
    // A bare file name (`--output backup.jsonl`) has the empty path as its parent.
    match path.parent() {
        Some(parent) if parent.as_os_str().is_empty() => sync_dir(Path::new(".")),
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

pub fn import(cli: &Cli, file: Option<&Path>) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    let target = config.data_dir.clone();
    let (input, source): (Box<dyn BufRead>, String) = match file {
        None => (Box::new(std::io::stdin().lock()), "stdin".into()),
        Some(p) if p == Path::new("-") => (Box::new(std::io::stdin().lock()), "stdin".into()),
        Some(p) => {
            let f = fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            (
                Box::new(std::io::BufReader::with_capacity(1 << 16, f)),
                p.display().to_string(),
            )
        }
    };
    let started = Instant::now();
    let staging = Staging::prepare(&target)?;
    let built = build(staging.dir(), input, &source);
    let (counts, runs) = match built {
        Ok(built) => built,
        Err(e) => {
            staging.abandon();
            eprintln!(
                "runledger import: nothing was imported; {} is as it was",
                target.display()
            );
            return Err(e);
        }
    };
    if let Err(e) = staging.commit() {
        eprintln!(
            "runledger import: the store was built but could not be moved into {}",
            target.display()
        );
        return Err(e);
    }
    eprintln!(
        "imported {} events of {runs} runs, {} API keys and {} instance secrets into {} in {:.2} s",
        counts.events,
        counts.keys,
        counts.secrets,
        target.display(),
        started.elapsed().as_secs_f64()
    );
    if counts.contents > 0 {
        eprintln!(
            "imported {} attachment and artifact contents",
            counts.contents
        );
    }
    if counts.schedule_events > 0 {
        eprintln!("imported {} schedule events", counts.schedule_events);
    }
    if counts.keys == 0 {
        eprintln!(
            "runledger import: the backup holds no API keys (export --with-keys writes them); \
             the server creates a new admin key when it starts"
        );
    }
    eprintln!(
        "runledger import: transcripts are not part of a backup; copy the old data \
         directory's transcripts/ into {}",
        target.display()
    );
    Ok(())
}

/// What an export wrote.
#[derive(Debug, Default)]
struct Written {
    counts: Counts,
    damaged: u64,
}

fn write_export(store: &Store, with_keys: bool, out: &mut dyn Write) -> anyhow::Result<Written> {
    let mut written = Written::default();
    let line = |out: &mut dyn Write, record: &Line| writeln!(out, "{}", record.to_json());
    if with_keys {
        line(out, &Line::Header { format: FORMAT })?;
    }
    let mut exported = std::collections::HashSet::new();
    for record in store.scan() {
        match record {
            Ok(e) => {
                // The bytes an event names come before it, once.
                for content in e.event.contents() {
                    if exported.insert(content.sha256) {
                        match write_content(store, content, out)? {
                            true => written.counts.contents += 1,
                            false => written.damaged += 1,
                        }
                    }
                }
                // Rendered directly rather than through `Line`: no clone per event.
                writeln!(out, "{}", event_json(&e))?;
                written.counts.events += 1;
            }
            Err(e) => {
                eprintln!("runledger export: skipped a damaged record: {e}");
                written.damaged += 1;
            }
        }
    }
    // Schedules after runs: a schedule's firings name runs, never the other way round.
    for record in store.scan_schedules() {
        match record {
            Ok(e) => {
                writeln!(out, "{}", schedule_event_json(&e))?;
                written.counts.schedule_events += 1;
            }
            Err(e) => {
                eprintln!("runledger export: skipped a damaged schedule record: {e}");
                written.damaged += 1;
            }
        }
    }
    if with_keys {
        for key in store.keys().list()? {
            line(out, &Line::Key(key))?;
            written.counts.keys += 1;
        }
        for name in store::INSTANCE_SECRETS {
            if let Some(value) = store.existing_secret(name)? {
                let name = name.to_string();
                line(out, &Line::Secret { name, value })?;
                written.counts.secrets += 1;
            }
        }
        line(out, &Line::End(written.counts))?;
    }
    Ok(written)
}

/// Writes the bytes of `content` as content lines; `false` (and a message) when the content
/// store does not hold them.
fn write_content(
    store: &Store,
    content: &runledger_domain::Content,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let mut file = match store.content().open_content(content) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("runledger export: skipped a content: {e}");
            return Ok(false);
        }
    };
    let mut offset = 0u64;
    let mut chunk = vec![0u8; CONTENT_CHUNK];
    loop {
        let mut filled = 0;
        while filled < chunk.len() {
            let n = file.read(&mut chunk[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 && offset > 0 {
            break;
        }
        let line = Line::Content {
            sha256: content.sha256,
            size: content.size,
            offset,
            data: chunk[..filled].to_vec(),
        };
        writeln!(out, "{}", line.to_json())?;
        offset += filled as u64;
        if offset >= content.size {
            break;
        }
    }
    Ok(true)
}

/// An export file being written: created 0600 under a temporary name beside `path`, and
/// renamed over `path` only once it is whole and durable, so a failed export never leaves a
/// truncated backup under the name of a good one. Dropped unfinished, it is removed.
struct OutputFile {
    path: PathBuf,
    temp: PathBuf,
    file: Option<BufWriter<fs::File>>,
}

impl OutputFile {
    fn create(path: &Path) -> anyhow::Result<OutputFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let name = path
            .file_name()
            .ok_or_else(|| anyhow!("{} is not a file name", path.display()))?;
        let temp = path.with_file_name(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            ulid::Ulid::new().to_string().to_lowercase()
        ));
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .with_context(|| format!("cannot create {}", temp.display()))?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            temp,
            file: Some(BufWriter::new(file)),
        })
    }

    fn finish(mut self) -> anyhow::Result<()> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&self.temp, &self.path)
            .with_context(|| format!("cannot move the export to {}", self.path.display()))?;
        sync_parent_of(&self.path)
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

pub fn export(cli: &Cli, with_keys: bool, output: Option<&Path>) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    crate::open::require_store(&config)?;
    let store = open_salvage(&config)?;
    if with_keys {
        eprintln!(
            "runledger export: WARNING: --with-keys writes the instance secrets (which sign \
             session links and decrypt runs' MCP credentials) and the API key hashes; anyone \
             with this backup can read every run's session page and credentials and restore a \
             server that accepts your keys. Keep it private"
        );
    }
    let written = match output {
        None => {
            let mut out = BufWriter::new(std::io::stdout().lock());
            let written = write_export(&store, with_keys, &mut out)?;
            out.flush()?;
            written
        }
        Some(path) => {
            let mut file = OutputFile::create(path)?;
            let out = file.file.as_mut().context("the export file is closed")?;
            let written = write_export(&store, with_keys, out)?;
            // A backup of a damaged store would replace what may be the last whole one.
            if written.damaged == 0 && store.lost_writes().is_none() {
                file.finish()?;
            } else {
                drop(file);
                eprintln!(
                    "runledger export: {} was left as it was: the export is incomplete; write \
                     it to stdout to salvage what is left",
                    path.display()
                );
            }
            written
        }
    };
    let c = written.counts;
    if with_keys {
        eprintln!(
            "exported {} events, {} API keys and {} instance secrets",
            c.events, c.keys, c.secrets
        );
    } else {
        eprintln!("exported {} events", c.events);
    }
    if c.contents > 0 {
        eprintln!("exported {} attachment and artifact contents", c.contents);
    }
    if written.damaged > 0 {
        bail!("{} damaged records could not be exported", written.damaged);
    }
    if store.lost_writes().is_some() {
        bail!("the store lost acknowledged writes; the export holds what is left");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use runledger_domain::{
        AgentConfig, Artifact, ArtifactKind, Attachment, Content, CostSource, Creator, CreatorKind,
        ExecutionUsage, FollowupMode, InferenceCost, McpServer, RunAdmitted, RunCreated, Sealed,
        SourceType, StatusMessage, Tokens,
    };
    use std::collections::BTreeMap;

    fn text() -> impl Strategy<Value = String> {
        // Any Unicode, control characters included: JSON must carry them all.
        prop_oneof![Just(String::new()), ".{0,12}", "[a-z]{1,6}"]
    }

    fn opt_text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(text())
    }

    fn map() -> impl Strategy<Value = BTreeMap<String, String>> {
        proptest::collection::btree_map(text(), text(), 0..3)
    }

    fn mcp_server() -> impl Strategy<Value = McpServer> {
        (
            opt_text(),
            opt_text(),
            proptest::collection::vec(text(), 0..3),
            opt_text(),
            map(),
            map(),
        )
            .prop_map(|(warp_id, command, args, url, env, headers)| McpServer {
                warp_id,
                command,
                args,
                url,
                env,
                headers,
            })
    }

    fn created() -> impl Strategy<Value = Event> {
        let config = (
            opt_text(),
            opt_text(),
            opt_text(),
            opt_text(),
            opt_text(),
            proptest::collection::btree_map(text(), mcp_server(), 0..3),
        )
            .prop_map(
                |(name, model_id, base_prompt, environment_id, skill_spec, mcp_servers)| {
                    AgentConfig {
                        name,
                        model_id,
                        base_prompt,
                        environment_id,
                        skill_spec,
                        mcp_servers,
                    }
                },
            );
        (
            text(),
            text(),
            config,
            any::<bool>(),
            text(),
            text(),
            proptest::sample::select(SourceType::ALL.to_vec()),
            map(),
        )
            .prop_map(
                |(title, prompt, config, service, uid, display_name, source, metadata)| {
                    Event::Created(RunCreated {
                        title,
                        prompt,
                        config,
                        creator: Creator {
                            kind: if service {
                                CreatorKind::ServiceAccount
                            } else {
                                CreatorKind::User
                            },
                            uid,
                            display_name,
                        },
                        source,
                        metadata,
                    })
                },
            )
    }

    fn event() -> impl Strategy<Value = Event> {
        let mode = proptest::sample::select(vec![
            FollowupMode::Normal,
            FollowupMode::Plan,
            FollowupMode::Orchestrate,
        ]);
        prop_oneof![
            created(),
            any::<u32>().prop_map(|execution| Event::Started { execution }),
            (any::<u32>(), any::<u64>(), text()).prop_map(|(execution, job_id, node)| {
                Event::StartedOn {
                    execution,
                    placement: runledger_domain::Placement::Slurm { job_id, node },
                }
            }),
            (any::<u32>(), text()).prop_map(|(execution, message)| Event::Lost {
                execution,
                status: StatusMessage {
                    message,
                    error_code: Some("internal_error".into()),
                    retryable: Some(true),
                },
            }),
            (text(), mode, text()).prop_map(|(message, mode, by)| Event::FollowupReceived {
                message,
                mode,
                by
            }),
            any::<u32>().prop_map(|execution| Event::Succeeded { execution }),
            (
                any::<u32>(),
                text(),
                opt_text(),
                proptest::option::of(any::<bool>())
            )
                .prop_map(|(execution, message, error_code, retryable)| {
                    Event::Failed {
                        execution,
                        status: StatusMessage {
                            message,
                            error_code,
                            retryable,
                        },
                    }
                }),
            text().prop_map(|by| Event::Cancelled { by }),
            text().prop_map(|by| Event::SessionLinkRevoked { by }),
            (any::<u32>(), any::<u32>())
                .prop_map(|(execution, count)| Event::FollowupsDelivered { execution, count }),
            any::<u32>().prop_map(|execution| Event::Requeued { execution }),
            (any::<u32>(), execution_usage())
                .prop_map(|(execution, usage)| Event::UsageRecorded { execution, usage }),
        ]
    }

    fn execution_usage() -> impl Strategy<Value = ExecutionUsage> {
        let tokens =
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(input, cached_input, output)| {
                Tokens {
                    input,
                    cached_input,
                    output,
                }
            });
        let cost = (
            any::<u64>(),
            proptest::sample::select(vec![CostSource::Cli, CostSource::Prices]),
        )
            .prop_map(|(nano_usd, source)| InferenceCost { nano_usd, source });
        (
            proptest::option::of(tokens),
            opt_text(),
            proptest::option::of(cost),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(tokens, model, inference, cpu_ms, compute_nano_usd)| {
                ExecutionUsage {
                    tokens,
                    model,
                    inference,
                    cpu_ms,
                    compute_nano_usd,
                }
            })
    }

    fn envelope() -> impl Strategy<Value = Envelope> {
        (any::<u128>(), any::<u64>(), any::<u64>(), event()).prop_map(|(id, seq, at, event)| {
            Envelope {
                run_id: RunId(id),
                seq,
                at: Timestamp(at),
                event,
            }
        })
    }

    proptest! {
        /// Every field of every variant survives export → import (MCP credential values as
        /// `***`, see `as_exported`), and the line is the same after a second export.
        #[test]
        fn an_event_line_reads_back_as_the_envelope_it_was_written_from(e in envelope()) {
            let text = event_json(&e).to_string();
            let line = Line::parse(&text).map_err(TestCaseError::fail)?;
            prop_assert_eq!(&line, &Line::Event(as_exported(e)));
            prop_assert_eq!(line.to_json().to_string(), text);
        }

        #[test]
        fn times_read_back_exactly(ms in any::<u64>()) {
            prop_assert_eq!(parse_exact_time(&format_time(Timestamp(ms))), Some(Timestamp(ms)));
        }
    }

    /// An event as a backup holds it: MCP credential values read `***`. A run admitted since
    /// credentials are sealed stores `***` already (its values are in `sealed`, whose key only
    /// `--with-keys` carries); a legacy run's plain values are not written to a backup at all.
    fn as_exported(mut e: Envelope) -> Envelope {
        match &mut e.event {
            Event::Created(c) => runledger_store::credentials::redact(&mut c.config),
            Event::Admitted(a) => runledger_store::credentials::redact(&mut a.created.config),
            _ => {}
        }
        e
    }

    /// One event of each variant, with every optional field set.
    fn one_of_each() -> Vec<Event> {
        let server = McpServer {
            warp_id: None,
            command: Some("npx".into()),
            args: vec!["srv".into()],
            url: None,
            env: BTreeMap::from([("TOKEN".into(), "t".into())]),
            headers: BTreeMap::new(),
        };
        vec![
            Event::Created(RunCreated {
                title: "t".into(),
                prompt: "p \u{0} \"q\"".into(),
                config: AgentConfig {
                    name: Some("n".into()),
                    model_id: Some("m".into()),
                    base_prompt: Some("b".into()),
                    environment_id: Some("e".into()),
                    skill_spec: Some("o/r:s".into()),
                    mcp_servers: BTreeMap::from([("fs".into(), server)]),
                },
                creator: Creator {
                    kind: CreatorKind::ServiceAccount,
                    uid: "u".into(),
                    display_name: "d".into(),
                },
                source: SourceType::CloudMode,
                metadata: BTreeMap::from([("k".into(), "v".into())]),
            }),
            Event::Started { execution: 1 },
            Event::FollowupReceived {
                message: "m".into(),
                mode: FollowupMode::Orchestrate,
                by: "k".into(),
            },
            Event::Succeeded { execution: 1 },
            Event::Failed {
                execution: 2,
                status: StatusMessage {
                    message: "setup".into(),
                    error_code: Some("environment_setup_failed".into()),
                    retryable: Some(false),
                },
            },
            Event::Cancelled { by: "k".into() },
            Event::FollowupsDelivered {
                execution: 2,
                count: 3,
            },
            Event::Requeued { execution: 2 },
            Event::UsageRecorded {
                execution: 3,
                usage: ExecutionUsage {
                    tokens: Some(Tokens {
                        input: 1200,
                        cached_input: 200,
                        output: 80,
                    }),
                    model: Some("claude-x".into()),
                    inference: Some(InferenceCost {
                        nano_usd: 12_300_000,
                        source: CostSource::Cli,
                    }),
                    cpu_ms: Some(1500),
                    compute_nano_usd: Some(20_833),
                },
            },
            Event::Admitted(RunAdmitted {
                created: RunCreated {
                    title: "a".into(),
                    prompt: "p".into(),
                    config: AgentConfig::default(),
                    creator: Creator {
                        kind: CreatorKind::User,
                        uid: "u".into(),
                        display_name: "d".into(),
                    },
                    source: SourceType::Api,
                    metadata: BTreeMap::new(),
                },
                team: "infra".into(),
                sealed: Some(Sealed {
                    nonce: [7; 24],
                    ciphertext: vec![1, 2, 3, 255],
                }),
            }),
            Event::ArtifactReported {
                execution: 1,
                artifact: Artifact {
                    uid: "u1".into(),
                    kind: ArtifactKind::PullRequest {
                        url: "https://git.example.com/a/b/pull/1".into(),
                        branch: "b".into(),
                        title: Some("t".into()),
                    },
                },
            },
            Event::ArtifactReported {
                execution: 1,
                artifact: Artifact {
                    uid: "u2".into(),
                    kind: ArtifactKind::File {
                        path: "out/a b.txt".into(),
                        description: Some("d".into()),
                        content: Content {
                            sha256: [0xab; 32],
                            size: 12,
                            mime_type: "text/plain".into(),
                        },
                    },
                },
            },
            Event::ArtifactReported {
                execution: 1,
                artifact: Artifact {
                    uid: "u3".into(),
                    kind: ArtifactKind::Plan {
                        title: Some("p".into()),
                        content: Content {
                            sha256: [0x01; 32],
                            size: 3000,
                            mime_type: "text/markdown".into(),
                        },
                    },
                },
            },
            Event::ArtifactReported {
                execution: 2,
                artifact: Artifact {
                    uid: "u4".into(),
                    kind: ArtifactKind::Screenshot {
                        path: "s.png".into(),
                        description: None,
                        content: Content {
                            sha256: [0xfe; 32],
                            size: 99999,
                            mime_type: "image/png".into(),
                        },
                    },
                },
            },
            Event::Attached {
                attachments: vec![Attachment {
                    file_name: "spec.md".into(),
                    content: Content {
                        sha256: [0x00; 32],
                        size: 0,
                        mime_type: "text/markdown".into(),
                    },
                }],
            },
            Event::Scheduled {
                schedule: runledger_domain::RunSchedule {
                    schedule_id: RunId::new(Timestamp(1_763_700_000_000), 9),
                    schedule_name: "nightly \"deps\"".into(),
                    cron_schedule: "0 3 * * 1-5".into(),
                    due: Timestamp(1_763_780_400_000),
                },
            },
            Event::StartedOn {
                execution: 2,
                placement: runledger_domain::Placement::Slurm {
                    job_id: 4_294_967_301,
                    node: "gpu-07".into(),
                },
            },
            Event::Lost {
                execution: 2,
                status: StatusMessage {
                    message: "node gpu-07 failed".into(),
                    error_code: Some("internal_error".into()),
                    retryable: Some(true),
                },
            },
            Event::SessionLinkRevoked { by: "k".into() },
        ]
    }

    #[test]
    fn every_variant_reads_back() {
        let events = one_of_each();
        // Exhaustive, so a new variant does not compile until it is added to `one_of_each`.
        let variant = |e: &Event| match e {
            Event::Created(_) => 0,
            Event::Started { .. } => 1,
            Event::FollowupReceived { .. } => 2,
            Event::Succeeded { .. } => 3,
            Event::Failed { .. } => 4,
            Event::Cancelled { .. } => 5,
            Event::FollowupsDelivered { .. } => 6,
            Event::Requeued { .. } => 7,
            Event::UsageRecorded { .. } => 8,
            Event::Admitted(_) => 9,
            Event::ArtifactReported { .. } => 10,
            Event::Attached { .. } => 11,
            Event::Scheduled { .. } => 12,
            Event::StartedOn { .. } => 13,
            Event::Lost { .. } => 14,
            Event::SessionLinkRevoked { .. } => 15,
        };
        let covered: Vec<_> = events.iter().map(variant).collect();
        assert_eq!(
            covered,
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10, 11, 12, 13, 14, 15]
        );
        for (seq, event) in events.into_iter().enumerate() {
            let envelope = Envelope {
                run_id: RunId::new(Timestamp(1_763_768_489_123), 77),
                seq: seq as u64,
                at: Timestamp(1_763_768_489_123 + seq as u64),
                event,
            };
            let line = Line::parse(&event_json(&envelope).to_string());
            assert_eq!(line, Ok(Line::Event(as_exported(envelope))));
        }
    }

    /// A legacy `Created` stored its MCP credentials in plain text; its export shows the
    /// names only, so a backup never carries a usable credential.
    #[test]
    fn a_legacy_runs_credentials_are_not_exported() {
        let created = one_of_each().remove(0);
        let Event::Created(c) = &created else {
            panic!("one_of_each starts with a Created")
        };
        assert_eq!(c.config.mcp_servers["fs"].env["TOKEN"], "t");
        let envelope = Envelope {
            run_id: RunId::new(Timestamp(1_763_768_489_123), 77),
            seq: 0,
            at: Timestamp(1_763_768_489_123),
            event: created,
        };
        let line = event_json(&envelope);
        assert_eq!(
            line["data"]["config"]["mcp_servers"]["fs"]["env"],
            json!({"TOKEN": "***"})
        );
        let Ok(Line::Event(back)) = Line::parse(&line.to_string()) else {
            panic!("the line reads back")
        };
        let Event::Created(c) = back.event else {
            panic!("as a Created")
        };
        assert_eq!(c.config.mcp_servers["fs"].env["TOKEN"], "***");
    }

    #[test]
    fn non_canonical_lines_are_refused_naming_the_field() {
        let e = Envelope {
            run_id: RunId::new(Timestamp(1_763_768_489_123), 5),
            seq: 0,
            at: Timestamp(1_763_768_489_123),
            event: Event::Failed {
                execution: 1,
                status: StatusMessage {
                    message: "exit 3".into(),
                    error_code: None,
                    retryable: Some(false),
                },
            },
        };
        let good = event_json(&e);
        let mut extra = good.clone();
        extra["data"]["oops"] = json!(1);
        let mut null = good.clone();
        null["data"]["status_message"]["error_code"] = Value::Null;
        let mut offset = good.clone();
        offset["at"] = json!("2025-11-21T23:41:29.123+00:00");
        let mut lower = good.clone();
        lower["run_id"] = json!(e.run_id.to_string().to_lowercase());
        for (bad, needle) in [
            (extra, "data.oops"),
            (null, "data.status_message.error_code"),
            (offset, "at"),
            (lower, "run_id"),
        ] {
            let err = Line::parse(&bad.to_string()).expect_err("refused");
            assert!(err.contains(needle), "{err}");
        }
        assert!(Line::parse("{\"run_id\":")
            .expect_err("refused")
            .starts_with("not JSON"));
        assert!(Line::parse(r#"{"record":"keys"}"#)
            .expect_err("refused")
            .contains("unknown record"));
    }

    #[test]
    fn key_secret_and_frame_lines_round_trip() {
        let key = KeyRecord {
            id: "01KAKZ0000000000000000000A".into(),
            name: "ci \"bot\"".into(),
            kind: KeyKind::Agent,
            admin: false,
            hash: [0xab; 32],
            created_at: Timestamp(1_763_768_489_123),
            revoked_at: Some(Timestamp(1_763_768_500_000)),
            team: "infra".into(),
        };
        for line in [
            Line::Header { format: FORMAT },
            Line::Key(key.clone()),
            Line::Key(KeyRecord {
                revoked_at: None,
                admin: true,
                ..key
            }),
            Line::Secret {
                name: store::SESSION_SECRET.into(),
                value: [7; 32],
            },
            Line::End(Counts {
                events: 3,
                keys: 2,
                secrets: 1,
                contents: 0,
                schedule_events: 0,
            }),
            Line::End(Counts {
                events: 3,
                keys: 2,
                secrets: 1,
                contents: 4,
                schedule_events: 7,
            }),
            Line::Content {
                sha256: [9; 32],
                size: 10,
                offset: 4,
                data: vec![0, 255, 1],
            },
            Line::Content {
                sha256: [0; 32],
                size: 0,
                offset: 0,
                data: Vec::new(),
            },
        ] {
            assert_eq!(Line::parse(&line.to_json().to_string()), Ok(line));
        }
        let upper = r#"{"record":"secret","name":"session_secret","value":"ABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB"}"#;
        let err = Line::parse(upper).expect_err("not as written");
        assert!(
            !err.contains("ABAB"),
            "an error must not quote a secret: {err}"
        );
    }

    #[test]
    fn the_parent_of_a_bare_file_name_is_the_current_directory() {
        assert!(sync_parent_of(Path::new("backup.jsonl")).is_ok());
        assert!(sync_parent_of(Path::new("/")).is_ok());
    }

    fn at(id: RunId, seq: u64, at: u64, event: Event) -> Envelope {
        Envelope {
            run_id: id,
            seq,
            at: Timestamp(at),
            event,
        }
    }

    #[test]
    fn the_checker_wants_each_run_contiguous_from_its_created_event() {
        let id = RunId::new(Timestamp(1000), 9);
        let other = RunId::new(Timestamp(2000), 9);
        let create = || one_of_each().swap_remove(0);
        // The tenth of `one_of_each` is its `Admitted`.
        let admit = || one_of_each().swap_remove(9);
        let started = Event::Started { execution: 1 };
        let mut c = Checker::default();
        assert_eq!(c.event(&at(id, 0, 1000, create())), Ok(()));
        // Runs may interleave; a run since teams starts with `Admitted`.
        assert_eq!(c.event(&at(other, 0, 2000, admit())), Ok(()));
        assert_eq!(c.event(&at(id, 1, 1500, started.clone())), Ok(()));
        let refusals = [
            (
                at(id, 3, 1600, started.clone()),
                "skips from event 1 to event 3",
            ),
            (at(id, 1, 1600, started.clone()), "has an event 1 already"),
            (at(id, 2, 1400, started.clone()), "back in time"),
            (at(id, 2, 1600, create()), "created a second time"),
            (at(id, 2, 1600, admit()), "created a second time"),
            (
                at(RunId::new(Timestamp(5), 1), 1, 9, started.clone()),
                "comes before the run's Created event",
            ),
            (
                at(RunId::new(Timestamp(5), 1), 0, 5, started.clone()),
                "comes before the run's Created event",
            ),
            (
                at(RunId::new(Timestamp(5), 1), 0, 6, create()),
                "its id says",
            ),
        ];
        for (e, needle) in refusals {
            let err = c.event(&e).expect_err("refused");
            assert!(err.contains(needle), "{needle}: {err}");
        }
        assert_eq!(c.event(&at(id, 2, 1500, started)), Ok(()));
    }
}
