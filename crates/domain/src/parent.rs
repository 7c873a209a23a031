//! A run's place in a tree of runs: the run that spawned it and that run's own ancestors
//! (`Event::Parented`), the limits of depth and breadth a child is admitted within, and why
//! one is refused. Vocabulary only: the rule is `run::children::admit_child`, the shell counts
//! the parent's children and reads the limits from its configuration.
//!
//! The whole line of ancestors is recorded with the child, not only its parent, so that a
//! reader (the read index's entry per ancestor, a cascading cancel) never has to walk parents
//! one read at a time, and so that a run's ancestry cannot change after it is admitted.

use serde::{Deserialize, Serialize};

/// The most ancestors a run may have, whatever the configuration says: a bound on what one
/// `Parented` event holds (and so on what an imported log may make one hold).
pub const MAX_DEPTH: u32 = 64;

/// The run that spawned a run (`parent`, its id as the API writes it) and the parent's own
/// ancestors, nearest first (`ancestors`: the parent's parent, then its parent, up to the
/// root). Recorded as `Event::Parented`, the last event of the run's admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunParent {
    pub parent: String,
    pub ancestors: Vec<String>,
}

impl RunParent {
    /// How deep the run sits: 1 for a child of a root, 2 for a grandchild, …
    pub fn depth(&self) -> usize {
        self.ancestors.len() + 1
    }

    /// Every ancestor of the run, nearest first: its parent, then the parent's ancestors.
    pub fn lineage(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.parent.as_str()).chain(self.ancestors.iter().map(String::as_str))
    }
}

/// The limits a child is admitted within: how many ancestors a run may have (`max_depth`),
/// and how many children one run may have (`max_children`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeLimits {
    pub max_depth: u32,
    pub max_children: u32,
}

/// Why a child was refused under a parent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("max_depth: the run would be at depth {depth}, beyond this environment's max_depth of {max_depth}")]
    TooDeep { depth: usize, max_depth: u32 },
    #[error("max_children: run {parent} already has {children} children, this environment's max_children")]
    TooManyChildren { parent: String, children: usize },
}

impl Refusal {
    /// The name of the limit that refused, as the configuration spells it.
    pub fn limit(&self) -> &'static str {
        match self {
            Refusal::TooDeep { .. } => "max_depth",
            Refusal::TooManyChildren { .. } => "max_children",
        }
    }
}
