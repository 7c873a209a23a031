//! The integration tests: one crate, one module per concern, so a change to the service
//! relinks one test binary instead of one per file (figures: `docs/performance.md`, "Build
//! times"). Each module drives the real binary, real child processes or the crates' public
//! API; `common` starts servers and runs the CLI for them.

mod common;

mod access;
mod admin_audit;
mod agent_events;
mod agent_reads;
mod agents;
mod architecture;
mod artifacts;
mod attachments;
mod audit_query;
mod backup;
mod bundle;
mod chains;
mod changes;
mod cli;
mod console;
mod corpus;
mod crashloop;
mod credentials;
mod damage;
mod docs;
mod edges;
mod fork;
mod golden;
mod index_upgrade;
mod layers;
mod messages;
mod operations;
mod origin;
mod output;
mod planted_paths;
mod properties;
mod provenance;
mod read_only;
mod redaction;
mod repos;
mod rerun;
mod sandbox;
mod schedule_memory;
mod schedules;
mod server;
mod slurm;
mod sse;
mod steps;
mod storage;
mod teams;
mod travel;
mod tree;
mod uids;
mod usage;
mod webhooks;
