//! A run's steps: what its agent did, read back from its stored transcript — the agent's
//! messages, each tool call with its command or file, its result, exit status and duration,
//! each denial, each turn's usage, the follow-ups where they were delivered, and for a
//! `command` agent its output lines, grouped. Derived at read time, so no event records them
//! and a transcript written before this module existed has steps too.
//!
//! Pure: `page` is handed a reader of transcript entries and does no I/O of its own; it never
//! decides anything about the run. A page starts at a `Cursor` (a byte offset in the
//! transcript and how many steps starting there were already given), so reading the 1000th
//! page of a 50 MB transcript parses only that page's entries, not the ones before.
//!
//! `step.rs` holds the steps and the cursor, `said.rs` reads one line of each CLI's structured
//! output, `builder.rs` turns entries into steps (joining long lines, pairing each call with
//! its result), `page.rs` pages through a transcript. This file is their table of contents.

mod builder;
mod page;
mod said;
mod step;

pub use page::{page, Page, DEFAULT_LIMIT, MAX_LIMIT};
pub use step::{Cursor, CursorError, Kind, Step, ToolStatus, MESSAGE_MAX_CHARS, OUTPUT_MAX_BYTES};

#[cfg(test)]
mod tests;
