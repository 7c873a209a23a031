//! Reads what a preset's agent CLI reports about its own work: its structured output (Claude
//! Code's and Gemini CLI's stream-json, Codex's `--json` events) and, where a CLI says nothing
//! structured, its stderr. From whole output lines it keeps the CLI's session id, the tools it
//! was denied (by its own permission mode, or by the read-only workspace of a read-only run:
//! `denied_writes.rs`), its error results, its token usage and cost, and decides how an
//! execution ended.
//!
//! Everything it keeps from the CLI's output (error text, stderr lines, denied tools, the model
//! name) is redacted with the execution's `Redactor` as it is taken, before it is cut to a
//! message's length; a session id that holds a secret is not kept at all.
//!
//! Pure: it is handed whole, reassembled lines (never a piece of one cut by `lines.rs`) and an
//! exit status, and does no I/O. It must not decide anything from a CLI's prose on stdout
//! except the error text the CLI itself marks as its error and, in a read-only run, the
//! kernel's refusal of a write in a failed tool call's output.
//!
//! `observer.rs` reads the lines, `tokens.rs` holds the usage they report, `readable.rs` makes
//! their transcript entries and `text.rs` the clipped, one-line messages. This file is their
//! table of contents.

mod observer;
mod readable;
mod text;
mod tokens;

pub use observer::Observer;
pub use text::{clip, is_session_id, one_line};
pub use tokens::{Usage, MAX_COST_USD, MAX_TOKENS};
