//! How a failed command's error reaches the operator: one line on stderr, or the whole chain
//! with `--debug`. It only prints; the exit code is the caller's.

use crate::terminal;

/// Prints a failed command's error on stderr: one line, its causes joined by `: `; with
/// `--debug`, anyhow's report (each cause on its own line, and the backtrace when
/// RUST_BACKTRACE=1 captured one). A backtrace is for whoever debugs runledger, not for the
/// operator whose typo it was.
pub fn report(error: &anyhow::Error, debug: bool) {
    // A server's problem detail or a stored message can quote an agent.
    let text = if debug {
        format!("{error:?}")
    } else {
        format!("{error:#}")
    };
    eprintln!(
        "runledger: error: {}",
        terminal::printable(&text, terminal::Origin::Field)
    );
}
