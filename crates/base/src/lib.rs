//! The leaf services every layer uses and none of them owns: the clock, the process-wide
//! metrics registry, the notification feed that wakes followers of a log or a transcript, the
//! bounded memo for costly pure functions, and the hook that gives memory back after bursts.
//! Each knows nothing of runs, stores or HTTP, so the crates above point down to it instead of
//! at one another.

#![forbid(unsafe_code)]

pub mod clock;
pub mod memo;
pub mod memory;
pub mod metrics;
pub mod notify;
