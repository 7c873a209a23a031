//! Turns transcript entries into steps: joins the pieces of a long line, hands each whole line
//! of a preset's stdout to `said.rs` and other lines to an output group, pairs each tool call
//! with its result, and keeps the steps in transcript order until a page takes them.
//!
//! Parsing does not depend on where a page starts: steps a page's cursor says were already
//! given are made like the others and only marked `given`, so a call's result, a group's next
//! line or a message's next delta finds the step it belongs to exactly as on the page before.

use std::collections::HashMap;

use runledger_domain::harness::Harness;
use runledger_domain::Timestamp;

use super::said::{is_shell, said, Outcome, Said};
use super::step::{Cursor, Kind, Step, ToolStatus, MESSAGE_MAX_CHARS, OUTPUT_MAX_BYTES};
use crate::transcript::Entry;

/// How far past a call its result is looked for (bytes of transcript); a call still without
/// one after that is shown as having no result, so one call cannot hold a page back forever.
pub(super) const LOOKAHEAD_BYTES: u64 = 4 << 20;

/// Most lines one output step groups.
const GROUP_LINES: u32 = 200;

/// The longest line kept whole while it is joined; the rest of a longer one is dropped (such
/// a line is no CLI event, and its step shows its start).
const LINE_MAX_BYTES: usize = 1 << 20;

/// A step being made.
struct Pending {
    step: Step,
    /// Before the page's cursor: made to keep parsing the same, never given again.
    given: bool,
    /// A call awaiting its result: its id, and the bytes scanned when it was made.
    awaiting: Option<(String, u64)>,
    /// The offset of the last entry the step took a line from.
    last_entry: u64,
}

/// A line being joined from pieces: where it started, when, its text so far.
struct Partial {
    offset: u64,
    at: Timestamp,
    text: String,
}

pub(super) struct Builder {
    harness: Harness,
    start: Cursor,
    steps: Vec<Pending>,
    /// Steps made so far per entry offset, for the second part of their cursors.
    made: HashMap<u64, u32>,
    partial: HashMap<(u32, String), Partial>,
    /// The output group or streamed message the next line or delta may extend.
    extendable: Option<Cursor>,
    scanned: u64,
}

impl Builder {
    pub(super) fn new(harness: Harness, start: Cursor) -> Builder {
        Builder {
            harness,
            start,
            steps: Vec::new(),
            made: HashMap::new(),
            partial: HashMap::new(),
            extendable: None,
            scanned: 0,
        }
    }

    /// Bytes of transcript read so far.
    pub(super) fn scanned(&self) -> u64 {
        self.scanned
    }

    /// Whether a line is half read (its next piece is still to come).
    pub(super) fn mid_line(&self) -> bool {
        !self.partial.is_empty()
    }

    /// One entry of the transcript, `len` bytes long at `offset`.
    pub(super) fn feed(&mut self, offset: u64, len: u64, entry: &Entry) {
        self.scanned += len;
        match entry.stream.as_str() {
            // The readable copies of a preset's stdout lines, which are parsed themselves.
            "agent" => return,
            "followup" => {
                let (mode, text) = match entry
                    .text
                    .strip_prefix('(')
                    .and_then(|t| t.split_once(") "))
                {
                    Some((mode, text)) if !mode.contains(' ') => (Some(mode.to_string()), text),
                    _ => (None, entry.text.as_str()),
                };
                let text = clip_chars(text, MESSAGE_MAX_CHARS);
                self.push(
                    offset,
                    entry.at,
                    entry.execution,
                    Kind::Followup { mode, text },
                    None,
                );
                return;
            }
            _ => {}
        }
        let key = (entry.execution, entry.stream.clone());
        let mut partial = self.partial.remove(&key).unwrap_or(Partial {
            offset,
            at: entry.at,
            text: String::new(),
        });
        let mut rest = entry.text.as_str();
        loop {
            let (line, more) = match rest.split_once('\n') {
                Some((line, more)) => (line, Some(more)),
                None => (rest, None),
            };
            if partial.text.len() < LINE_MAX_BYTES {
                partial.text.push_str(line);
            }
            match more {
                Some(more) => {
                    let whole = std::mem::replace(
                        &mut partial,
                        Partial {
                            offset,
                            at: entry.at,
                            text: String::new(),
                        },
                    );
                    self.line(whole, entry.execution, &entry.stream);
                    rest = more;
                }
                None => break,
            }
        }
        if entry.continued {
            self.partial.insert(key, partial);
        } else {
            self.line(partial, entry.execution, &entry.stream);
        }
    }

    /// One whole line of a stream.
    fn line(&mut self, line: Partial, execution: u32, stream: &str) {
        if stream == "stdout" && self.harness.is_preset() {
            if let Some(said) = said(self.harness, &line.text) {
                for s in said {
                    self.said(line.offset, line.at, execution, s);
                }
                return;
            }
        }
        self.output(line, execution, stream);
    }

    /// Adds a line to the open group of its stream, or starts one.
    ///
    /// A group runs over consecutive entries that make no other step, so no page starts
    /// inside one (a page starts where a step does); it is cut at `GROUP_LINES` lines or
    /// `OUTPUT_MAX_BYTES` only in its first entry or between entries, never inside a later
    /// entry, so a page starting at that first entry makes the same groups.
    fn output(&mut self, line: Partial, execution: u32, stream: &str) {
        if let Some(index) = self.extendable.and_then(|c| self.find(c)) {
            let pending = &mut self.steps[index];
            let (first, last) = (pending.step.cursor.offset, pending.last_entry);
            if let Kind::Output {
                stream: s,
                text,
                lines,
                truncated,
            } = &mut pending.step.kind
            {
                let full = *lines >= GROUP_LINES || *truncated || text.len() >= OUTPUT_MAX_BYTES;
                let joins = pending.step.execution == execution
                    && s == stream
                    && ((line.offset == last && line.offset != first) || !full);
                if joins {
                    if !*truncated && text.len() + 1 + line.text.len() <= OUTPUT_MAX_BYTES {
                        text.push('\n');
                        text.push_str(&line.text);
                    } else {
                        *truncated = true;
                    }
                    *lines += 1;
                    pending.last_entry = line.offset;
                    return;
                }
            }
        }
        let (text, truncated) = clip_bytes(&line.text, OUTPUT_MAX_BYTES);
        let cursor = self.push(
            line.offset,
            line.at,
            execution,
            Kind::Output {
                stream: stream.to_string(),
                text,
                lines: 1,
                truncated,
            },
            None,
        );
        self.extendable = Some(cursor);
    }

    fn said(&mut self, offset: u64, at: Timestamp, execution: u32, said: Said) {
        match said {
            Said::Message { text, delta } => {
                if delta {
                    if let Some(index) = self.extendable.and_then(|c| self.find(c)) {
                        let step = &mut self.steps[index].step;
                        if let (Kind::Message { text: so_far }, true) =
                            (&mut step.kind, step.execution == execution)
                        {
                            so_far.push_str(&text);
                            *so_far = clip_chars(so_far, MESSAGE_MAX_CHARS);
                            self.consume(offset);
                            return;
                        }
                    }
                }
                let text = clip_chars(&text, MESSAGE_MAX_CHARS);
                let cursor = self.push(offset, at, execution, Kind::Message { text }, None);
                if delta {
                    self.extendable = Some(cursor);
                }
            }
            Said::Call { id, name, target } => {
                let kind = Kind::Tool {
                    name,
                    target,
                    status: ToolStatus::NoResult,
                    exit_code: None,
                    output: String::new(),
                    output_truncated: false,
                    duration_ms: None,
                };
                let scanned = self.scanned;
                self.push(offset, at, execution, kind, Some((id, scanned)));
            }
            Said::Result(outcome) => self.result(offset, at, execution, outcome),
            Said::Denial { tool, target } => {
                self.push(offset, at, execution, Kind::Denial { tool, target }, None);
            }
            Said::Usage {
                input_tokens,
                cached_input_tokens,
                output_tokens,
                cost_usd,
                model,
            } => {
                let kind = Kind::Usage {
                    input_tokens,
                    cached_input_tokens,
                    output_tokens,
                    cost_usd,
                    model,
                };
                self.push(offset, at, execution, kind, None);
            }
            Said::Error(text) => {
                let text = clip_chars(&text, MESSAGE_MAX_CHARS);
                self.push(offset, at, execution, Kind::Error { text }, None);
            }
        }
    }

    /// A call's result: fills in its call's step. A result whose call was not read makes a
    /// step of its own only when the line names the call and the page started at the very
    /// beginning: after a cursor, the call was given on an earlier page.
    fn result(&mut self, offset: u64, at: Timestamp, execution: u32, outcome: Outcome) {
        let Outcome {
            id,
            ok,
            exit_code,
            output,
            call,
        } = outcome;
        let (output, output_truncated) = clip_bytes(&output, OUTPUT_MAX_BYTES);
        let status = if ok {
            ToolStatus::Ok
        } else {
            ToolStatus::Error
        };
        let found = self.steps.iter_mut().rev().find(|p| {
            p.step.execution == execution && p.awaiting.as_ref().is_some_and(|(a, _)| *a == id)
        });
        if let Some(pending) = found {
            pending.awaiting = None;
            let called = pending.step.at;
            if let Kind::Tool {
                name,
                status: s,
                exit_code: e,
                output: o,
                output_truncated: t,
                duration_ms,
                ..
            } = &mut pending.step.kind
            {
                *s = status;
                *e = exit_code.or((ok && is_shell(name)).then_some(0));
                *o = output;
                *t = output_truncated;
                *duration_ms = Some(at.millis().saturating_sub(called.millis()));
            }
            return;
        }
        if let (Some((name, target)), true) = (call, self.start == Cursor::default()) {
            let exit_code = exit_code.or((ok && is_shell(&name)).then_some(0));
            let kind = Kind::Tool {
                name,
                target,
                status,
                exit_code,
                output,
                output_truncated,
                duration_ms: None,
            };
            self.push(offset, at, execution, kind, None);
        }
    }

    /// Adds a step that starts in the entry at `offset`, in transcript order.
    fn push(
        &mut self,
        offset: u64,
        at: Timestamp,
        execution: u32,
        kind: Kind,
        awaiting: Option<(String, u64)>,
    ) -> Cursor {
        let made = self.made.entry(offset).or_insert(0);
        let cursor = Cursor {
            offset,
            skip: *made,
        };
        *made += 1;
        self.extendable = None;
        let given = cursor < self.start;
        // Steps end in order of their lines' ends; a long line started earlier goes before.
        let at_index = self.steps.partition_point(|p| p.step.cursor <= cursor);
        self.steps.insert(
            at_index,
            Pending {
                step: Step {
                    cursor,
                    execution,
                    at,
                    kind,
                },
                given,
                awaiting,
                last_entry: offset,
            },
        );
        cursor
    }

    /// Counts a line that extended a step as if it had made one: a page that starts at its
    /// entry makes a step of it (marked given) and must number the steps after it the same.
    fn consume(&mut self, offset: u64) {
        *self.made.entry(offset).or_insert(0) += 1;
    }

    fn find(&self, cursor: Cursor) -> Option<usize> {
        self.steps
            .binary_search_by(|p| p.step.cursor.cmp(&cursor))
            .ok()
    }

    /// Gives up on the results of calls made more than `LOOKAHEAD_BYTES` ago.
    fn settle(&mut self) {
        let scanned = self.scanned;
        for pending in &mut self.steps {
            if pending
                .awaiting
                .as_ref()
                .is_some_and(|(_, since)| scanned.saturating_sub(*since) > LOOKAHEAD_BYTES)
            {
                pending.awaiting = None;
            }
        }
    }

    /// Whether a page of `limit` steps is made: that many are complete, and a later step shows
    /// that the last of them grows no more.
    pub(super) fn ready(&mut self, limit: usize) -> bool {
        if self.steps.len() <= limit || self.mid_line() {
            return false;
        }
        self.settle();
        for (complete, pending) in self.steps.iter().filter(|p| !p.given).enumerate() {
            if complete == limit {
                return true;
            }
            if pending.awaiting.is_some() {
                return false;
            }
        }
        false
    }

    /// The page's steps, at most `limit`, and the cursor of the first step left for the next
    /// page (`None`: every step read was given). `wait`: a call still awaiting its result ends
    /// the page before it (the run is live, or the page stopped for its byte budget), so a
    /// later page shows it with its result; otherwise it is shown without one.
    pub(super) fn finish(mut self, limit: usize, wait: bool) -> (Vec<Step>, Option<Cursor>) {
        self.settle();
        let mut out = Vec::new();
        for pending in self.steps.into_iter().filter(|p| !p.given) {
            if out.len() == limit || (wait && pending.awaiting.is_some()) {
                return (out, Some(pending.step.cursor));
            }
            out.push(pending.step);
        }
        (out, None)
    }
}

/// At most `max` characters of `text`, marked with "…" when cut.
fn clip_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// At most `max` bytes of `text`, cut at a character boundary, and whether it was cut.
fn clip_bytes(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_string(), false);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    (text[..cut].to_string(), true)
}
