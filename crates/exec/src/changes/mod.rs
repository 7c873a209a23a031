//! What an execution changed in its workspace, the parts that need no process: the safe way to
//! run git over a workspace an agent controls (`git`: its variables, options and scripts) and
//! the reading of git's output into the log's summary, with the diff cut at a file's start
//! when it passes the environment's cap (`summary`). Running git inside the execution's sandbox
//! is the `command/changes.rs` step.

mod git;
mod summary;

pub(crate) use git::{diff_args, end_script, filter_names, safe_env, start_script, FILTER_LIST};
pub(crate) use summary::{cut_diff, parse_summary, MAX_FILES};
