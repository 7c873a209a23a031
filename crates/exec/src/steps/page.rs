//! One page of a run's steps, read from its transcript from a cursor. The transcript is read
//! in bounded slices through the reader the caller hands in (`Transcripts::read`), so a page
//! costs the entries it covers — plus up to `LOOKAHEAD_BYTES` past its last call, where that
//! call's result is looked for — never the transcript before its cursor.

use runledger_domain::harness::Harness;

use super::builder::{Builder, LOOKAHEAD_BYTES};
use super::step::{Cursor, Step};
use crate::transcript::Slice;

/// Steps in a page when the caller does not say.
pub const DEFAULT_LIMIT: usize = 100;

/// Most steps in a page.
pub const MAX_LIMIT: usize = 1000;

/// Bytes of transcript one page reads (besides the look-ahead for its last call's result):
/// past them the page ends with the steps it has, so a transcript of lines that make no step
/// (a CLI's stream events) is still paged in bounded reads.
const PAGE_BYTES: u64 = 16 << 20;

/// Bytes of transcript asked for per read.
const SLICE_BYTES: u64 = 1 << 20;

/// A page of steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub steps: Vec<Step>,
    /// Where the next page starts.
    pub next_cursor: Cursor,
    /// Whether the transcript holds more after `next_cursor` right now.
    pub more: bool,
}

/// The steps of a transcript from `cursor`, at most `limit` (1 to `MAX_LIMIT`). `harness`: the
/// agent that wrote it, whose structured output becomes steps (a `command` agent's lines are
/// its steps). `live`: the run may still write, so a call without its result yet ends the page
/// before it rather than being shown without one. `read(offset, max_bytes)` reads the entries
/// from `offset`.
pub fn page(
    harness: Harness,
    cursor: Cursor,
    limit: usize,
    live: bool,
    mut read: impl FnMut(u64, u64) -> std::io::Result<Slice>,
) -> std::io::Result<Page> {
    let limit = limit.clamp(1, MAX_LIMIT);
    let mut builder = Builder::new(harness, cursor);
    let mut offset = cursor.offset;
    let mut ask = SLICE_BYTES;
    let (mut at_end, mut over_budget) = (false, false);
    'reading: loop {
        let slice = read(offset, ask)?;
        if slice.entries.is_empty() {
            if slice.more && slice.next_offset > offset {
                // Damaged lines only: step over them.
                offset = slice.next_offset;
                continue;
            }
            if slice.more && ask < crate::transcript::LONGEST_LINE + 1 {
                // One line longer than a read: ask for it whole.
                ask = crate::transcript::LONGEST_LINE + 1;
                continue;
            }
            at_end = true;
            break;
        }
        ask = SLICE_BYTES;
        let ends: Vec<u64> = slice
            .entries
            .iter()
            .skip(1)
            .map(|(o, _)| *o)
            .chain([slice.next_offset])
            .collect();
        for ((start, entry), end) in slice.entries.iter().zip(ends) {
            builder.feed(*start, end - start, entry);
            offset = end;
            if builder.ready(limit) {
                break 'reading;
            }
            let scanned = builder.scanned();
            // Past the budget a page ends at a line's end, or anywhere once a line runs on
            // past the look-ahead too (the rest of such a line is shown as it comes).
            if scanned >= PAGE_BYTES
                && (!builder.mid_line() || scanned >= PAGE_BYTES + LOOKAHEAD_BYTES)
            {
                over_budget = true;
                break 'reading;
            }
        }
        if !slice.more {
            at_end = true;
            break;
        }
    }
    let wait = live || !at_end || over_budget;
    let (steps, left) = builder.finish(limit, wait);
    let more = left.is_some() || !at_end;
    Ok(Page {
        steps,
        next_cursor: left.unwrap_or(Cursor { offset, skip: 0 }),
        more,
    })
}
