//! The rule that admits a child under a parent run within the limits of a tree of runs
//! (`crate::parent`): its ancestry is the parent's plus the parent, its depth one more than
//! the parent's, and the parent's children (counted by the shell) fewer than the limit.

use crate::parent::{Refusal, RunParent, TreeLimits};

use super::state::Run;

/// The ancestry of a new child of `parent`, if `limits` admit it: `children` is how many
/// children `parent` has already.
pub fn admit_child(
    parent: &Run,
    children: usize,
    limits: TreeLimits,
) -> Result<RunParent, Refusal> {
    let ancestors: Vec<String> = match &parent.parent {
        Some(grand) => grand.lineage().map(str::to_string).collect(),
        None => Vec::new(),
    };
    let child = RunParent {
        parent: parent.id.to_string(),
        ancestors,
    };
    if child.depth() > limits.max_depth as usize {
        return Err(Refusal::TooDeep {
            depth: child.depth(),
            max_depth: limits.max_depth,
        });
    }
    if children >= limits.max_children as usize {
        return Err(Refusal::TooManyChildren {
            parent: child.parent.clone(),
            children,
        });
    }
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{
        AgentConfig, Creator, CreatorKind, Event, RunAdmitted, RunCreated, SourceType,
    };
    use crate::ids::{RunId, Timestamp};

    const LIMITS: TreeLimits = TreeLimits {
        max_depth: 2,
        max_children: 3,
    };

    fn run(i: u128) -> Run {
        let id = RunId::new(Timestamp(1_000_000), i);
        let created = RunCreated {
            title: format!("run {i}"),
            prompt: "p".into(),
            config: AgentConfig::default(),
            creator: Creator {
                kind: CreatorKind::User,
                uid: "k".into(),
                display_name: "k".into(),
            },
            source: SourceType::Api,
            metadata: Default::default(),
        };
        let admitted = Event::Admitted(RunAdmitted::from_legacy(created));
        super::super::evolve(None, id, &admitted, id.created_at()).expect("a run")
    }

    #[test]
    fn a_child_of_a_root_has_the_root_as_its_only_ancestor() {
        let root = run(1);
        let child = admit_child(&root, 0, LIMITS).expect("admitted");
        assert_eq!(child.parent, root.id.to_string());
        assert!(child.ancestors.is_empty());
        assert_eq!(child.depth(), 1);
    }

    #[test]
    fn a_grandchild_carries_the_whole_line_nearest_first() {
        let root = run(1);
        let mut child = run(2);
        child.parent = Some(admit_child(&root, 0, LIMITS).expect("admitted"));
        let grandchild = admit_child(&child, 0, LIMITS).expect("admitted");
        assert_eq!(
            grandchild.lineage().collect::<Vec<_>>(),
            [child.id.to_string(), root.id.to_string()]
        );
        let mut grand = run(3);
        grand.parent = Some(grandchild);
        assert_eq!(
            admit_child(&grand, 0, LIMITS),
            Err(Refusal::TooDeep {
                depth: 3,
                max_depth: 2
            })
        );
    }

    #[test]
    fn the_children_limit_counts_the_existing_children() {
        let root = run(1);
        assert!(admit_child(&root, 2, LIMITS).is_ok());
        let refused = admit_child(&root, 3, LIMITS).expect_err("full");
        assert_eq!(refused.limit(), "max_children");
        assert!(refused.to_string().starts_with("max_children"));
    }
}
