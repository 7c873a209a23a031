//! What the console shows of a run's place in a tree of runs: a section of the run page with
//! the run that spawned it and the runs it spawned, each linked, titled and with its state.
//! Every value is escaped. A run with neither parent nor children shows nothing.

use super::display::state_badge;
use crate::html::escape;
use runledger_domain::Run;

/// Most children the section lists; beyond them it says how to see the rest.
pub(super) const SHOWN_CHILDREN: usize = 100;

/// The run page's "Parent and children" section. `children` holds up to one more than
/// `SHOWN_CHILDREN` (so the section can tell that more exist).
pub(super) fn section(run: &Run, parent: Option<&Run>, children: &[Run]) -> String {
    let parent_id = run.parent.as_ref().map(|p| p.parent.as_str());
    if parent_id.is_none() && children.is_empty() {
        return String::new();
    }
    let mut body = String::from("<section id=\"family\"><h2>Parent and children</h2>");
    if let Some(parent_id) = parent_id {
        let shown = match parent {
            Some(parent) => line(parent),
            // Recorded but not found: shown by id, unlinked (an imported log's parent may be
            // missing from this instance).
            None => format!("<code>{}</code>", escape(parent_id)),
        };
        body.push_str(&format!("<p id=\"parent\">Parent: {shown}</p>"));
    }
    if !children.is_empty() {
        let more = children.len() > SHOWN_CHILDREN;
        body.push_str(&format!(
            "<h3>Children ({}{})</h3><ul id=\"children\">",
            children.len().min(SHOWN_CHILDREN),
            if more { "+" } else { "" }
        ));
        for child in children.iter().take(SHOWN_CHILDREN) {
            body.push_str(&format!("<li>{}</li>", line(child)));
        }
        body.push_str("</ul>");
        if more {
            body.push_str(&format!(
                "<p>More children: <code>runledger runs tree {}</code> lists them all.</p>",
                escape(&run.id.to_string())
            ));
        }
    }
    body.push_str("</section>");
    body
}

/// One run as a line: its title linked to its page, and its state.
fn line(run: &Run) -> String {
    let id = escape(&run.id.to_string());
    format!(
        "<a href=\"/runs/{id}\">{}</a> {}",
        escape(&run.title),
        state_badge(run.state.as_str(), None)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_and_children_are_linked_with_their_states_escaped() {
        let mut parent = runledger_domain::sample_run(1);
        parent.title = "<b>orchestrator</b>".into();
        let mut run = runledger_domain::sample_run(2);
        run.parent = Some(runledger_domain::RunParent {
            parent: parent.id.to_string(),
            ancestors: Vec::new(),
        });
        let child = runledger_domain::sample_run(3);
        let html = section(&run, Some(&parent), std::slice::from_ref(&child));
        assert!(
            html.contains(&format!("href=\"/runs/{}\"", parent.id)),
            "{html}"
        );
        assert!(html.contains("&lt;b&gt;orchestrator"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(
            html.contains(&format!("href=\"/runs/{}\"", child.id)),
            "{html}"
        );
        assert!(html.contains("state-queued"), "{html}");
        assert!(html.contains("Children (1)"), "{html}");
        let root = runledger_domain::sample_run(4);
        assert_eq!(section(&root, None, &[]), "");
    }
}
