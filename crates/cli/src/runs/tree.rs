//! `runledger runs tree ID [--json]`: a run and every run it spawned, at any depth, as a tree
//! (each run's id, state and title, children under their parent in the order they were
//! created), or with `--json` the run and its descendants as the API answers them. The
//! descendants come from the list's `ancestor_run_id` filter, page by page.

use std::collections::BTreeMap;
use std::io::Write as _;

use serde_json::{json, Value};

use crate::remote::{Error, Remote};
use crate::terminal::{self, printable, Origin};

use super::api::{print_line, run_path};

/// Runs asked for per page (the list's most).
const PAGE: &str = "500";

/// Prints the tree under `run_id`.
pub(super) async fn tree(remote: &Remote, run_id: &str, as_json: bool) -> anyhow::Result<()> {
    let root = remote.get(&run_path(run_id), &[]).await?;
    let id = text(&root, "run_id");
    let descendants = descendants(remote, &id).await?;
    if as_json {
        print_line(&terminal::json(
            &json!({ "run": root, "descendants": descendants }),
        ))?;
        return Ok(());
    }
    let mut children: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for run in &descendants {
        children
            .entry(text(run, "parent_run_id"))
            .or_default()
            .push(run);
    }
    // Ids start with their creation time: sorted, siblings read oldest first.
    for siblings in children.values_mut() {
        siblings.sort_by_key(|run| text(run, "run_id"));
    }
    let mut out = String::new();
    out.push_str(&line(&root));
    out.push('\n');
    draw(&mut out, &children, &id, "");
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Every descendant of `id`, in the order the list answers them.
async fn descendants(remote: &Remote, id: &str) -> Result<Vec<Value>, Error> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("ancestor_run_id", id.to_string()), ("limit", PAGE.into())];
        if let Some(c) = &cursor {
            query.push(("cursor", c.clone()));
        }
        let page = remote.get("/api/v1/agent/runs", &query).await?;
        let runs = page["runs"]
            .as_array()
            .ok_or_else(|| Error::Protocol("a list answer without runs".into()))?;
        all.extend(runs.iter().cloned());
        match page["page_info"]["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return Ok(all),
        }
    }
}

/// The children of `parent` under it, each branch drawn after `indent`.
fn draw(out: &mut String, children: &BTreeMap<String, Vec<&Value>>, parent: &str, indent: &str) {
    let Some(siblings) = children.get(parent) else {
        return;
    };
    for (i, run) in siblings.iter().enumerate() {
        let last = i + 1 == siblings.len();
        out.push_str(indent);
        out.push_str(if last { "└── " } else { "├── " });
        out.push_str(&line(run));
        out.push('\n');
        let deeper = format!("{indent}{}", if last { "    " } else { "│   " });
        draw(out, children, &text(run, "run_id"), &deeper);
    }
}

/// One run: id, state and title on one line, escaped.
fn line(run: &Value) -> String {
    format!(
        "{}  {}  {}",
        text(run, "run_id"),
        text(run, "state"),
        text(run, "title").replace(['\t', '\n'], " ")
    )
}

fn text(run: &Value, name: &str) -> String {
    printable(run[name].as_str().unwrap_or(""), Origin::Field).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_drawn_under_their_parent() {
        let a = json!({"run_id": "A", "state": "SUCCEEDED", "title": "a", "parent_run_id": "R"});
        let b = json!({"run_id": "B", "state": "QUEUED", "title": "b\x1b", "parent_run_id": "A"});
        let c = json!({"run_id": "C", "state": "FAILED", "title": "c", "parent_run_id": "R"});
        let mut children: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        children.entry("R".into()).or_default().extend([&a, &c]);
        children.entry("A".into()).or_default().push(&b);
        let mut out = String::new();
        draw(&mut out, &children, "R", "");
        assert_eq!(
            out,
            "├── A  SUCCEEDED  a\n│   └── B  QUEUED  b\\x1b\n└── C  FAILED  c\n"
        );
    }
}
