//! What the client's commands share about the server's API: connecting with the resolved
//! server and key, a runtime to wait on, a run's path, which states end a run and the exit
//! code each gives, and a line on stdout that fails rather than panics. It prints nothing
//! else.

use std::io::Write as _;

use anyhow::Context as _;

use crate::commands::ApiArgs;
use crate::profile;
use crate::remote::{self, Error, Remote};
use crate::terminal::{printable, Origin};

/// One line on stdout. Unlike `println!`, a closed stdout (`| head`) is an error to report,
/// not a panic.
pub(super) fn print_line(text: &dyn std::fmt::Display) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

pub(super) fn connect(api: &ApiArgs) -> Result<Remote, Error> {
    let target = profile::target(
        api.server.as_deref(),
        api.api_key.as_deref(),
        api.ca_cert.as_deref(),
    )?;
    Remote::new(&target)
}

pub(super) fn block_on<T>(
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")?
        .block_on(work)
}

/// The path of a run. An id is a ULID: anything else is sent escaped and answered 404.
pub(super) fn run_path(id: &str) -> String {
    let escaped: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
    format!("/api/v1/agent/runs/{escaped}")
}

/// The exit code of a run that ended in `state`.
pub(super) fn outcome(id: &str, state: &str) -> u8 {
    match state {
        "SUCCEEDED" => 0,
        "FAILED" => {
            eprintln!("run {id} FAILED");
            1
        }
        "CANCELLED" => {
            eprintln!("run {id} was CANCELLED");
            2
        }
        other => {
            eprintln!(
                "run {id} ended in an unknown state {:?}",
                printable(other, Origin::Field)
            );
            remote::exit::PROTOCOL
        }
    }
}

pub(super) fn terminal(state: &str) -> bool {
    matches!(state, "SUCCEEDED" | "FAILED" | "CANCELLED")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_escaped_in_paths() {
        assert_eq!(run_path("../admin"), "/api/v1/agent/runs/..%2Fadmin");
    }
}
