//! The snapshot kept at the end of each execution, from which a fork starts: `copy` (a tree
//! the agent controls, copied safely within a budget), `keep` (where a snapshot lives, taking
//! and restoring one) and `sessions` (a CLI's session moved to the fork's workspace path).

mod copy;
mod keep;
mod sessions;

pub use copy::{copy_tree, Budget, Copied, Error};
pub use keep::{exists, path, restore, take, Restore, Source};
