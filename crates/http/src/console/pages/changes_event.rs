//! The short parts of a `Changes` event in the console's timeline: the files changed, lines
//! added and removed, whether the diff was cut, and each repository whose changes could not
//! be computed. Every value is escaped; the files and the diff are the changes endpoint's.

use serde_json::Value;

use super::display::text;
use crate::html::escape;

/// The short parts of a `Changes` event's `data`.
pub(super) fn event_parts(data: &Value) -> Vec<String> {
    let (mut files, mut added, mut removed) = (0u64, 0u64, 0u64);
    let mut parts = Vec::new();
    for repo in data["repositories"].as_array().into_iter().flatten() {
        for file in repo["files"].as_array().into_iter().flatten() {
            files += 1;
            added = added.saturating_add(file["additions"].as_u64().unwrap_or(0));
            removed = removed.saturating_add(file["deletions"].as_u64().unwrap_or(0));
        }
        if let Some(error) = repo["error"].as_str() {
            parts.push(format!(
                "<span class=\"reason\">{}: {}</span>",
                escape(text(&repo["path"])),
                escape(&error.chars().take(200).collect::<String>())
            ));
        }
    }
    parts.insert(0, format!("{files} file(s) changed, +{added} -{removed}"));
    if data["cut"] == true {
        parts.push("the diff was cut at changes_max_mb".into());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changes_event_is_summed_and_escaped() {
        let data = serde_json::json!({"execution": 1, "cut": true, "repositories": [
            {"path": "<app>", "base": "b", "files": [
                {"path": "x", "status": "added", "additions": 2, "deletions": 1, "binary": false},
                {"path": "y", "status": "deleted", "additions": 0, "deletions": 3, "binary": false}],
             "error": "git <failed>"}]});
        let parts = event_parts(&data);
        assert_eq!(parts[0], "2 file(s) changed, +2 -4");
        assert!(parts[1].contains("&lt;app&gt;") && parts[1].contains("git &lt;failed&gt;"));
        assert_eq!(parts[2], "the diff was cut at changes_max_mb");
    }
}
