//! `limits.max_depth` and `limits.max_children`, and an environment's own `max_depth` and
//! `max_children`: how deep a tree of runs (runs that other runs spawned, `parent_run_id`) may
//! grow and how many children one run may have. Checks the values and applies the defaults;
//! the create endpoint enforces them (`runledger_domain::parent::admit_child`).

use runledger_domain::parent::MAX_DEPTH;
use runledger_domain::TreeLimits;

use crate::error::Error;
use crate::range::Range;

/// Most ancestors a run may have unless configured: enough for an orchestrator, its workers
/// and their helpers, few enough that a runaway agent spawning agents stops soon.
pub const DEFAULT_MAX_DEPTH: u32 = 5;

/// Most children one run may have unless configured.
pub const DEFAULT_MAX_CHILDREN: u32 = 100;

/// The most `max_children` may be set to: a bound on the one run's children a create counts.
pub const MOST_MAX_CHILDREN: u32 = 10_000;

/// An environment's own limits: each `None` takes the `[limits]` value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnvironmentTreeLimits {
    pub max_depth: Option<u32>,
    pub max_children: Option<u32>,
}

/// `max_depth` and `max_children` at `at` (`limits` or `environments[i]`), each `None` when
/// absent.
pub(crate) fn tree_limits(
    at: &str,
    max_depth: Option<u32>,
    max_children: Option<u32>,
) -> Result<EnvironmentTreeLimits, Error> {
    let depth = Range::between(0, MAX_DEPTH, "a depth", "");
    let children = Range::between(0, MOST_MAX_CHILDREN, "a count", "");
    Ok(EnvironmentTreeLimits {
        max_depth: max_depth
            .map(|d| depth.check(&format!("{at}.max_depth"), d))
            .transpose()?,
        max_children: max_children
            .map(|c| children.check(&format!("{at}.max_children"), c))
            .transpose()?,
    })
}

/// The `[limits]` values, defaults applied.
pub(crate) fn instance_limits(
    max_depth: Option<u32>,
    max_children: Option<u32>,
) -> Result<TreeLimits, Error> {
    let own = tree_limits("limits", max_depth, max_children)?;
    Ok(TreeLimits {
        max_depth: own.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
        max_children: own.max_children.unwrap_or(DEFAULT_MAX_CHILDREN),
    })
}

impl EnvironmentTreeLimits {
    /// These limits over the instance's (`[limits]`).
    pub fn over(self, instance: TreeLimits) -> TreeLimits {
        TreeLimits {
            max_depth: self.max_depth.unwrap_or(instance.max_depth),
            max_children: self.max_children.unwrap_or(instance.max_children),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::load::load_text;

    #[test]
    fn defaults_limits_and_an_environments_own() {
        let config = load_text(
            "[limits]\nmax_children = 7\n\n[[environments]]\nid = \"a\"\nharness = \"demo\"\nmax_depth = 2\n\n[[environments]]\nid = \"b\"\nharness = \"demo\"\n",
        )
        .expect("loads");
        let a = config.tree_limits(Some("a"));
        assert_eq!((a.max_depth, a.max_children), (2, 7));
        let b = config.tree_limits(Some("b"));
        assert_eq!((b.max_depth, b.max_children), (super::DEFAULT_MAX_DEPTH, 7));
        // No environment named: the default one (the first).
        assert_eq!(config.tree_limits(None), a);
        let err = load_text("[limits]\nmax_depth = 65\n")
            .expect_err("too deep")
            .to_string();
        assert!(err.contains("limits.max_depth"), "{err}");
        let err =
            load_text("[[environments]]\nid = \"a\"\nharness = \"demo\"\nmax_children = 10001\n")
                .expect_err("too many")
                .to_string();
        assert!(err.contains("environments[0].max_children"), "{err}");
    }
}
