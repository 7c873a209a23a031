//! The terminal client's commands: `run`, `runs …`, `audit`, `login` and `logout`. They talk to a server
//! through its public API alone (`remote`), with the server and key `profile` resolves, and
//! print for a person on a terminal (tables, dimmed notes, a progress line) and for a program
//! otherwise (tab-separated lines, or the API's JSON with `--json`). Each returns the process's
//! exit code: a run's outcome (0, 1, 2) where the command waits for one, else 0; failures are
//! `remote::Error`s, whose codes never collide with an outcome.
//!
//! `commands` holds `run` and `runs`, `changes` prints what a run changed (or its patch), `fork` starts a run from another's snapshot, `audit` the
//! audit trail's queries, `login` the profile's two commands; `wait` and
//! `transcript` follow a run, `printer` writes its transcript, `show` prints runs and events,
//! `steps` its steps, `travel` the past states (`get --at`, `events --states`, `diff`), `tree`
//! a run and its descendants, and `api` is what they share about the server's API.

mod api;
mod audit;
mod changes;
mod commands;
mod derive;
mod fork;
mod login;
mod printer;
mod rerun;
mod show;
mod steps;
mod transcript;
mod travel;
mod tree;
mod wait;

pub use audit::audit;
pub use commands::{run, runs};
pub use login::{login, logout};
