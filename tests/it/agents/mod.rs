//! The command harness with real child processes: environment variables, MCP config, stdin
//! follow-ups, exit status, setup, cancellation of whole process trees, time limits, restart
//! recovery of orphans, and the presets driven through fake CLIs on PATH.

mod followups;
mod harness;
mod presets;
mod stopping;
mod support;
