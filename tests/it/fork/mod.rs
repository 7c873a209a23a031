//! Forks: the snapshot each execution leaves (its workspace, agent home and CLI session;
//! bounded, safe against what a hostile agent plants) and `POST /agent/runs/{id}/fork`, which
//! starts a new run from one, with the real binary and `command` agents.

mod forks;
mod snapshots;
mod support;
