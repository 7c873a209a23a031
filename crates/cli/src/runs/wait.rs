//! Waiting for a run: `--wait`'s polling with its progress line, and the run's session link,
//! shown once the run has one. It polls only; a transcript is `transcript`'s.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::remote::Remote;
use crate::terminal::{printable, Origin};

use super::api::{run_path, terminal};
use super::show::short_duration;

/// How often `--wait` and a follower of a server without the transcript stream ask again.
pub(super) const POLL: Duration = Duration::from_millis(500);

/// A transcript stream that dropped this many times in a row, without an entry between, is
/// given up.
pub(super) const MAX_RECONNECTS: u32 = 10;

/// The run's session link, printed on stderr once the run has one.
pub(super) struct Link {
    pub(super) shown: bool,
}

impl Link {
    pub(super) async fn show(&mut self, remote: &Remote, id: &str) {
        if !self.shown {
            // Only a convenience: a failed look-up shows nothing.
            if let Ok(run) = remote.get(&run_path(id), &[]).await {
                self.show_of(&run);
            }
        }
    }

    pub(super) fn show_of(&mut self, run: &Value) {
        if let (false, Some(link)) = (self.shown, run["session_link"].as_str()) {
            self.shown = true;
            eprintln!("session: {}", printable(link, Origin::Field));
        }
    }
}

/// Polls the run until it is terminal; on a terminal stderr, one line says its state and how
/// long the wait has lasted.
pub(super) async fn wait_for(remote: &Remote, id: &str, link: &mut Link) -> anyhow::Result<String> {
    let progress = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut failures = 0;
    loop {
        match remote.get(&run_path(id), &[]).await {
            Ok(run) => {
                failures = 0;
                let state = run["state"].as_str().unwrap_or("").to_string();
                if !link.shown && run["session_link"].is_string() {
                    if progress {
                        eprint!("\r\x1b[2K");
                    }
                    link.show_of(&run);
                }
                if progress {
                    eprint!(
                        "\r\x1b[2K{id}  {}  {}",
                        printable(&state, Origin::Field),
                        short_duration(started.elapsed())
                    );
                }
                if terminal(&state) {
                    if progress {
                        eprintln!();
                    }
                    return Ok(state);
                }
            }
            // A server restarting or a dropped connection: ask again, for a while.
            Err(e) if e.is_transient() && failures < MAX_RECONNECTS => failures += 1,
            Err(e) => {
                if progress {
                    eprintln!();
                }
                return Err(e.into());
            }
        }
        tokio::time::sleep(POLL).await;
    }
}
