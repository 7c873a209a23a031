//! Schedules end to end with the real binary (issue #21): the CRUD API and its refusals, a real
//! every-minute firing, the seconds test mode, exactly one run when the server is killed at
//! the firing instant, one catch-up after a down time, and schedules in export, import,
//! `events` and `replay --verify`.

mod commands;
mod durability;
mod firing;
mod support;
