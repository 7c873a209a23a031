//! The run part of an export as JSON lines, written once for both `runledger export` (a
//! stopped store, which frames it with keys and secrets when asked) and
//! `GET /api/v1/admin/export` (a running server, which never adds them): every event of the
//! log in key order, the contents an event names before its first mention, then the schedules'
//! events. Read one record at a time and written to the given writer as it goes, so an export
//! holds one content chunk at most, however large the store. A damaged record or a missing
//! content is skipped and reported to the caller, never fatal. It must not write keys or
//! secrets.

use std::io::{Read, Write};

use serde_json::{json, Value};

use runledger_store::Store;

use crate::events::event_json;
use crate::schedules::schedule_event_json;
use crate::seals::seal_json;
use crate::time::hex;
use runledger_store::chain::{envelope_link, Link, GENESIS};

/// Bytes of content per `content` line (the last line of a content holds the rest); well under
/// the longest line `runledger import` reads.
pub const CONTENT_CHUNK: usize = 4 * 1024 * 1024;

/// What `write_run_records` wrote and skipped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    pub events: u64,
    pub contents: u64,
    pub schedule_events: u64,
    /// Seals, written before the events.
    pub seals: u64,
    /// Records and contents skipped because they could not be read.
    pub damaged: u64,
}

/// The `content` line of `data`, the bytes at `offset` of the content `sha256` of `size` bytes.
pub fn content_json(sha256: &[u8; 32], size: u64, offset: u64, data: &[u8]) -> Value {
    use base64::Engine;
    json!({
        "record": "content",
        "sha256": hex(sha256),
        "size": size,
        "offset": offset,
        "data": base64::engine::general_purpose::STANDARD.encode(data),
    })
}

/// Writes every event of `store` (contents first), then every schedule event, one JSON line
/// each. `skipped` hears of each damaged record or unreadable content, in a sentence.
pub fn write_run_records(
    store: &Store,
    out: &mut dyn Write,
    skipped: &mut dyn FnMut(String),
) -> std::io::Result<Exported> {
    let mut written = Exported::default();
    // Seals first, so that an import checks each event against them as it streams by.
    for seal in store.seals() {
        let seal = seal.map_err(std::io::Error::other)?;
        let leaves = store
            .seal_leaves_of(seal.number)
            .map_err(std::io::Error::other)?;
        writeln!(out, "{}", seal_json(&seal, &leaves))?;
        written.seals += 1;
    }
    let mut exported = std::collections::HashSet::new();
    // Each event's link: the store's, recomputed from the event as stored (the chain body of
    // either record version is the same), before the export redacts anything.
    let mut head: Option<(runledger_domain::RunId, Link)> = None;
    for record in store.scan() {
        match record {
            Ok(e) => {
                let prev = match head {
                    Some((run_id, link)) if run_id == e.run_id && e.seq > 0 => link,
                    _ => GENESIS,
                };
                let link = envelope_link(&prev, &e).map_err(std::io::Error::other)?;
                head = Some((e.run_id, link));
                // The bytes an event names come before it, once.
                for content in e.event.contents() {
                    if exported.insert(content.sha256) {
                        match write_content(store, content, out)? {
                            Ok(()) => written.contents += 1,
                            Err(why) => {
                                skipped(format!("skipped a content: {why}"));
                                written.damaged += 1;
                            }
                        }
                    }
                }
                // Rendered directly rather than through a `Value` of the whole line.
                writeln!(out, "{}", event_line(&e, Some(&link)))?;
                written.events += 1;
            }
            Err(e) => {
                skipped(format!("skipped a damaged record: {e}"));
                written.damaged += 1;
            }
        }
    }
    // Schedules after runs: a schedule's firings name runs, never the other way round.
    for record in store.scan_schedules() {
        match record {
            Ok(e) => {
                writeln!(out, "{}", schedule_event_json(&e))?;
                written.schedule_events += 1;
            }
            Err(e) => {
                skipped(format!("skipped a damaged schedule record: {e}"));
                written.damaged += 1;
            }
        }
    }
    Ok(written)
}

/// Writes the bytes of `content` as content lines; `Ok(Err(why))` when the content store does
/// not hold them (nothing written then), `Err` when `out` fails.
fn write_content(
    store: &Store,
    content: &runledger_domain::Content,
    out: &mut dyn Write,
) -> std::io::Result<Result<(), String>> {
    let mut file = match store.content().open_content(content) {
        Ok(file) => file,
        Err(e) => return Ok(Err(e.to_string())),
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
        let line = content_json(&content.sha256, content.size, offset, &chunk[..filled]);
        writeln!(out, "{line}")?;
        offset += filled as u64;
        if offset >= content.size {
            break;
        }
    }
    Ok(Ok(()))
}

/// An event's export line: its JSON (`event_json`) with its hash chain's `link`, when known.
pub fn event_line(e: &runledger_store::Envelope, link: Option<&Link>) -> Value {
    let mut v = event_json(e);
    if let Some(link) = link {
        v["link"] = json!(hex(link));
    }
    v
}
