//! Writing a transcript's entries where they belong (stdout, stderr, runledger's own notes),
//! every text made printable first. It writes only what it is given.

use std::io::{IsTerminal as _, Write as _};

use serde_json::Value;

use crate::terminal::{printable, Origin};

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// Writes transcript entries where they belong: the agent's stdout and follow-ups to stdout,
/// its stderr to stderr, runledger's notes (`system`, the presets' readable `agent` lines) to
/// stderr, dimmed on a terminal and marked `[system]` otherwise. Every text goes through
/// `terminal::printable`: control characters escaped, and an agent's line that begins like the
/// CLI's own `[system]` lines marked, so that neither can act on or pass for the CLI.
pub(super) struct Printer {
    dim: bool,
    /// Whether the next entry of stdout (`[0]`) and of stderr (`[1]`) starts a line: an entry
    /// that is `continued` goes on in the next one.
    at_line_start: [bool; 2],
}

impl Printer {
    pub(super) fn new() -> Printer {
        Printer {
            dim: std::io::stderr().is_terminal(),
            at_line_start: [true; 2],
        }
    }

    pub(super) fn entry(&mut self, entry: &Value) -> anyhow::Result<()> {
        let text = entry["text"].as_str().unwrap_or("");
        let continued = entry["continued"].as_bool().unwrap_or(false);
        let end = if continued { "" } else { "\n" };
        match entry["stream"].as_str().unwrap_or("") {
            "stdout" | "followup" => {
                let text = printable(text, agent_origin(self.at_line_start[0]));
                self.at_line_start[0] = !continued;
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                out.write_all(end.as_bytes())?;
                out.flush()?;
            }
            "stderr" => {
                let text = printable(text, agent_origin(self.at_line_start[1]));
                self.at_line_start[1] = !continued;
                let mut err = std::io::stderr().lock();
                err.write_all(text.as_bytes())?;
                err.write_all(end.as_bytes())?;
            }
            stream => {
                // The first line is the CLI's own, behind its marker; the lines after it can
                // quote the agent (a failure's last lines of stderr, an assistant's reply).
                let text = printable(text, Origin::AgentRest);
                let mut err = std::io::stderr().lock();
                if self.dim {
                    write!(err, "{DIM}{text}{RESET}{end}")?;
                } else {
                    let stream = printable(stream, Origin::Field);
                    write!(err, "[{stream}] {text}{end}")?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn note(&self, text: &str) {
        let text = printable(text, Origin::AgentRest);
        if self.dim {
            eprintln!("{DIM}{text}{RESET}");
        } else {
            eprintln!("[runledger] {text}");
        }
    }
}

/// How an agent's entry is printed: from the start of a line, or going on with one.
fn agent_origin(at_line_start: bool) -> Origin {
    if at_line_start {
        Origin::AgentLine
    } else {
        Origin::AgentRest
    }
}
