//! The executor: per environment a FIFO queue of runs waiting for a slot and the slots in use
//! (`max_concurrent`), the Slurm placements, and the live executions. It is driven by the
//! effects of decided commands (enqueue, dequeue, launch, deliver, stop) and drives runs back
//! through `Report` (start, finish); it never writes an event itself.
//!
//! `handle.rs` is the handle and its accessors, `state.rs` the bookkeeping behind its mutex,
//! `queues.rs` the caps, queues and slots, `placement.rs` the Slurm allocations, `launch.rs` an
//! execution from its start to its recorded end, `live.rs` follow-ups, stops and the shutdown.

mod handle;
mod launch;
mod live;
mod placement;
mod queues;
mod snapshots;
mod state;

pub use handle::Executor;
pub use live::interrupted_by_shutdown;
pub use queues::{QueueFull, Reservation};
