//! The command line. `serve` runs the service. `keys`, `teams`, `events`, `export`, `import`,
//! `replay` and `secrets` work on a data directory directly and reuse `domain`, `store` and
//! `projection`; `keys` and `teams` fall back to the running server's admin API when the server
//! holds the directory. `run`, `runs`, `login` and `logout` are the terminal client of a server
//! anywhere, through its public API only (`runs`, `remote`, `profile`). Data goes to stdout,
//! diagnostics to stderr. Backup and restore live in `backup`.
//!
//! This file is the table of contents: `commands` holds the clap definitions, `open` how the
//! offline commands open the data directory, `admin` how `keys` and `teams` reach it, and each
//! group of commands has a module of its own; `origin_line` is the line under an event that
//! says where it came from, which `events` and `runs events` share.

#![forbid(unsafe_code)]

mod admin;
mod audit_admin;
mod backup;
mod commands;
mod events;
mod keys;
mod open;
mod origin_line;
pub mod profile;
pub mod remote;
mod replay;
pub mod replay_check;
mod report;
mod runs;
mod schedule_logs;
mod secrets;
mod teams;
mod terminal;
mod verify;

pub use admin::server_url;
pub use audit_admin::{audit_admin, AdminFilters};
pub use backup::{export, import, verify_export};
pub use commands::{
    ApiArgs, AuditCmd, Cli, Cmd, KeysCmd, RunningServer, RunsCmd, SecretsCmd, TeamsCmd,
};
pub use events::events;
pub use keys::keys;
pub use replay::replay;
pub use replay_check::replay_check;
pub use report::report;
pub use runs::{audit, login, logout, run, runs};
pub use secrets::secrets;
pub use teams::teams;
pub use verify::{audit_pubkey, verify};
