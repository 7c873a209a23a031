//! How an execution's processes ended, in words: an exit status becomes an outcome, and a
//! failure (of the agent, of a setup command, of the service's own I/O, of a path the agent
//! made unsafe) becomes the `StatusMessage` the run records. Nothing here starts or waits for a
//! process; `finish` writes only the transcript's closing line and the CLI's session id.

use super::execution::{Execution, Outcome};
use super::files::{saved_session, write_private};
use super::output::Output;
use super::supervise::Ended;
use crate::observe::Observer;
use crate::safe_fs;
use runledger_domain::StatusMessage;

pub(super) fn internal(message: String) -> StatusMessage {
    tracing::error!(%message, "agent execution failed inside the service");
    StatusMessage {
        message,
        error_code: Some("internal_error".into()),
        retryable: Some(true),
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => "an unknown status".into(),
    }
}

pub(super) fn failure(
    what: &str,
    status: std::process::ExitStatus,
    tail: &str,
    code: Option<&str>,
) -> StatusMessage {
    let mut message = format!("{what} exited with {}", describe(status));
    if !tail.is_empty() {
        message.push_str("; last lines of stderr:\n");
        message.push_str(tail);
    }
    StatusMessage {
        message,
        error_code: code.map(str::to_string),
        retryable: Some(false),
    }
}

/// The outcome of the agent's end, also written to the transcript. A preset's outcome is what
/// its CLI reported (an exit 0 with denied tools or an error result fails), and the session
/// id it reported is kept for the next execution.
pub(super) fn finish(
    x: &mut Execution<'_>,
    (ended, output): (std::io::Result<Ended>, Output),
) -> Outcome {
    if let Some(observer) = &output.observer {
        x.usage.absorb(observer.usage());
    }
    if let Some(id) = output.observer.as_ref().and_then(Observer::session) {
        if saved_session(x).as_deref() != Some(id) {
            if let Err(e) = write_private(&x.session_path, id.as_bytes(), None) {
                x.system(format!("cannot keep the CLI's session id {id}: {e}"));
            }
        }
    }
    match ended {
        Ok(Ended::Exited(status)) => {
            let verdict = match &output.observer {
                Some(observer) => observer.verdict(status.code(), &describe(status)),
                None if status.success() => Ok(()),
                None => Err(failure("the agent", status, &output.tail(), None)),
            };
            match verdict {
                Ok(()) => {
                    x.system("the agent exited successfully".into());
                    Some(Ok(()))
                }
                Err(outcome) => {
                    x.system(outcome.message.clone());
                    Some(Err(outcome))
                }
            }
        }
        Ok(Ended::Stopped) => {
            x.system("stopped".into());
            None
        }
        Ok(Ended::TimedOut) => {
            let outcome = timed_out(x.job.environment.max_runtime_secs);
            x.system(outcome.message.clone());
            Some(Err(outcome))
        }
        Err(e) => Some(Err(io_failure("the agent was stopped", &e))),
    }
}

/// A failure of `safe_fs`: a path the agent made unsafe fails the run naming it (the agent's
/// doing, not the server's: trying again would meet it again); anything else is `internal`.
pub(super) fn unsafe_path(what: &str, e: safe_fs::Error) -> StatusMessage {
    match e {
        refused @ safe_fs::Error::Refused { .. } => StatusMessage {
            message: format!("{what}: {refused}"),
            error_code: Some("environment_setup_failed".into()),
            retryable: Some(false),
        },
        safe_fs::Error::Io { path, source } => {
            io_failure(&format!("{what} ({})", path.display()), &source)
        }
    }
}

/// A failure of the service's own I/O during an execution (the transcript, the workspace):
/// a full or read-only data directory is said in words, so the run's status names it.
pub(super) fn io_failure(what: &str, e: &std::io::Error) -> StatusMessage {
    use runledger_store::health::Cause;
    match Cause::of_io(e) {
        cause @ (Cause::NoSpace | Cause::ReadOnly) => internal(format!(
            "{}: the service could not write the run's transcript or workspace; {what}",
            cause.words()
        )),
        Cause::Io => internal(format!("{what}: {e}")),
    }
}

pub(super) fn timed_out(limit: u64) -> StatusMessage {
    StatusMessage {
        message: format!("the run exceeded its environment's max_runtime_secs ({limit} s); its processes were stopped"),
        error_code: None,
        retryable: Some(false),
    }
}
