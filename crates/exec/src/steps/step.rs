//! A step and the cursor a page of steps starts at. Plain data: `builder.rs` makes steps,
//! the HTTP layer shows them.

use runledger_domain::Timestamp;

/// Longest text of a message, a follow-up or an error kept in a step, in characters.
pub const MESSAGE_MAX_CHARS: usize = 64 * 1024;

/// Most bytes of a tool's output or of grouped output lines kept in one step.
pub const OUTPUT_MAX_BYTES: usize = 16 * 1024;

/// One thing the agent did or was told, in transcript order.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Where the step starts: pass it as a page's cursor to read from this step on.
    pub cursor: Cursor,
    pub execution: u32,
    /// When runledger read the line the step starts with.
    pub at: Timestamp,
    pub kind: Kind,
}

/// What a step is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// The agent's words (Gemini CLI's deltas joined).
    Message { text: String },
    /// A tool call: its tool, what it works on (the command line, the file path, the
    /// query…), how it ended.
    Tool {
        name: String,
        target: Option<String>,
        status: ToolStatus,
        /// A command's exit status, when the CLI says it (or it succeeded).
        exit_code: Option<i64>,
        /// What the tool answered, cut to `OUTPUT_MAX_BYTES`.
        output: String,
        output_truncated: bool,
        /// Milliseconds from the call to its result, as runledger read them.
        duration_ms: Option<u64>,
    },
    /// A tool call the CLI's own permission mode refused.
    Denial {
        tool: String,
        target: Option<String>,
    },
    /// What one turn used, as the CLI reported it.
    Usage {
        input_tokens: Option<u64>,
        cached_input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        cost_usd: Option<f64>,
        model: Option<String>,
    },
    /// An error the CLI reported (a failed turn, an error result).
    Error { text: String },
    /// A follow-up as it was delivered to the agent: `mode` (`queue`, `interrupt`…) and text.
    Followup { mode: Option<String>, text: String },
    /// Output lines of one stream (`stdout`, `stderr`, `system`), consecutive ones grouped:
    /// a `command` agent's steps, and what a preset's CLI printed outside its JSON.
    Output {
        stream: String,
        text: String,
        lines: u32,
        truncated: bool,
    },
}

impl Kind {
    /// The kind's name on the wire.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Message { .. } => "message",
            Kind::Tool { .. } => "tool",
            Kind::Denial { .. } => "denial",
            Kind::Usage { .. } => "usage",
            Kind::Error { .. } => "error",
            Kind::Followup { .. } => "followup",
            Kind::Output { .. } => "output",
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Ok,
    Error,
    /// No result in the transcript: still running, or the agent ended before it answered.
    NoResult,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::NoResult => "no_result",
        }
    }
}

/// Where a page of steps starts: the byte offset of a transcript entry, and how many of the
/// steps that start in that entry were already given (one Claude Code line can hold a message
/// and several tool calls). Written `OFFSET` or `OFFSET.SKIP`; `0` is the beginning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Cursor {
    pub offset: u64,
    pub skip: u32,
}

/// A cursor that is not one a page handed out.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a cursor is 0 or a `next_cursor` this endpoint returned (OFFSET or OFFSET.SKIP)")]
pub struct CursorError;

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.skip == 0 {
            write!(f, "{}", self.offset)
        } else {
            write!(f, "{}.{}", self.offset, self.skip)
        }
    }
}

impl std::str::FromStr for Cursor {
    type Err = CursorError;

    fn from_str(text: &str) -> Result<Cursor, CursorError> {
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
        let (offset, skip) = text.split_once('.').unwrap_or((text, "0"));
        if !digits(offset) || !digits(skip) {
            return Err(CursorError);
        }
        let offset: u64 = offset.parse().map_err(|_| CursorError)?;
        // File offsets are signed 64-bit; a larger one names no place in any transcript.
        if offset > i64::MAX as u64 {
            return Err(CursorError);
        }
        Ok(Cursor {
            offset,
            skip: skip.parse().map_err(|_| CursorError)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_writes_and_nothing_else() {
        for c in [
            Cursor::default(),
            Cursor {
                offset: 42,
                skip: 0,
            },
            Cursor {
                offset: 42,
                skip: 3,
            },
        ] {
            assert_eq!(c.to_string().parse::<Cursor>(), Ok(c));
        }
        assert_eq!("7".parse::<Cursor>(), Ok(Cursor { offset: 7, skip: 0 }));
        for bad in [
            "",
            "-1",
            "1.",
            ".1",
            "1.2.3",
            "a",
            "1 ",
            "+1",
            "99999999999999999999",
            "9223372036854775808",
            "1.99999999999",
        ] {
            assert_eq!(bad.parse::<Cursor>(), Err(CursorError), "{bad}");
        }
    }
}
