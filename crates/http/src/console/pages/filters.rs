//! The runs page's filter form, filled with the current query: the search box and states, the
//! environments open to the key's team, the text and time fields, and the sorting and paging
//! choices. It renders the form; the API checks what is submitted (`access::list_json`).

use crate::html::escape;
use crate::{wire, AppState};
use runledger_domain::{RunState, SourceType};
use runledger_runs::api_keys::Key;

/// The query the page was asked with, as the form's fields read it.
struct Current<'a>(&'a [(String, String)]);

impl Current<'_> {
    /// The escaped value of field `name` (the config name may come as `name`).
    fn value(&self, name: &str) -> String {
        self.0
            .iter()
            .find(|(k, _)| k == name || (name == "config_name" && k == "name"))
            .map_or(String::new(), |(_, v)| escape(v))
    }

    /// Whether field `name` was given as `v`.
    fn has(&self, name: &str, v: &str) -> bool {
        self.0.iter().any(|(k, x)| k == name && x == v)
    }

    /// ` selected` when field `name` was given as `v`.
    fn selected(&self, name: &str, v: &str) -> &'static str {
        if self.has(name, v) {
            " selected"
        } else {
            ""
        }
    }
}

/// The filter form, filled with the current query.
pub(super) fn filters(state: &AppState, key: &Key, pairs: &[(String, String)]) -> String {
    let current = Current(pairs);
    let mut out = String::from(
        "<form id=\"filters\" class=\"filters\" method=\"get\" action=\"/runs\" \
         role=\"search\" aria-label=\"Filter runs\">",
    );
    out.push_str(&search_and_states(&current));
    out.push_str(&environments(state, key, &current));
    out.push_str(&fields(&current));
    out.push_str(&ordering(&current));
    out
}

/// The search box and one checkbox per run state.
fn search_and_states(current: &Current) -> String {
    let mut out = format!(
        "<div class=\"field wide\"><label for=\"f-q\">Search</label><input id=\"f-q\" \
         name=\"q\" type=\"search\" value=\"{}\" placeholder=\"title, prompt or skill\"></div>",
        current.value("q")
    );
    out.push_str("<fieldset class=\"field wide states\"><legend>State</legend>");
    for s in RunState::ALL {
        let s = s.as_str();
        let checked = if current.has("state", s) {
            " checked"
        } else {
            ""
        };
        out.push_str(&format!(
            "<label class=\"check\"><input type=\"checkbox\" name=\"state\" value=\"{s}\"{checked}> {s}</label>"
        ));
    }
    out.push_str("</fieldset>");
    out
}

/// The environment field, suggesting the environments open to the key's team.
fn environments(state: &AppState, key: &Key, current: &Current) -> String {
    let mut out = format!(
        "<div class=\"field\"><label for=\"f-env\">Environment</label><input id=\"f-env\" \
         name=\"environment_id\" list=\"f-envs\" value=\"{}\"><datalist id=\"f-envs\">",
        current.value("environment_id")
    );
    for env in state
        .config
        .environments
        .iter()
        .filter(|e| e.open_to(&key.team))
    {
        out.push_str(&format!("<option value=\"{}\">", escape(&env.id)));
    }
    out.push_str("</datalist></div>");
    out
}

/// The text fields, the source and the creation-time bounds.
fn fields(current: &Current) -> String {
    let mut out = String::new();
    for (name, label) in [
        ("config_name", "Config name"),
        ("model_id", "Model"),
        ("creator", "Creator (key id)"),
    ] {
        out.push_str(&format!(
            "<div class=\"field\"><label for=\"f-{name}\">{label}</label>\
             <input id=\"f-{name}\" name=\"{name}\" value=\"{}\"></div>",
            current.value(name)
        ));
    }
    out.push_str(
        "<div class=\"field\"><label for=\"f-source\">Source</label>\
         <select id=\"f-source\" name=\"source\"><option value=\"\">Any</option>",
    );
    for s in SourceType::ALL {
        let s = s.as_str();
        let selected = current.selected("source", s);
        out.push_str(&format!("<option{selected}>{s}</option>"));
    }
    out.push_str("</select></div>");
    for (name, label) in [
        ("created_after", "Created after"),
        ("created_before", "Created before"),
    ] {
        out.push_str(&format!(
            "<div class=\"field\"><label for=\"f-{name}\">{label}</label>\
             <input id=\"f-{name}\" name=\"{name}\" value=\"{}\" \
             placeholder=\"2026-01-31T09:00:00Z\" aria-describedby=\"f-time-hint\"></div>",
            current.value(name)
        ));
    }
    out
}

/// The sort field, the order and the page size, then the form's buttons.
fn ordering(current: &Current) -> String {
    let mut out = String::from(
        "<div class=\"field\"><label for=\"f-sort\">Sort by</label>\
         <select id=\"f-sort\" name=\"sort_by\">",
    );
    for (s, _) in wire::SORT_BY {
        let selected = current.selected("sort_by", s);
        out.push_str(&format!("<option{selected}>{s}</option>"));
    }
    out.push_str(
        "</select></div><div class=\"field\"><label for=\"f-order\">Order</label>\
         <select id=\"f-order\" name=\"sort_order\">",
    );
    for (s, _) in wire::SORT_ORDER {
        let selected = current.selected("sort_order", s);
        out.push_str(&format!("<option{selected}>{s}</option>"));
    }
    out.push_str(
        "</select></div><div class=\"field\"><label for=\"f-limit\">Per page</label>\
         <select id=\"f-limit\" name=\"limit\">",
    );
    for n in ["20", "50", "100"] {
        let selected = current.selected("limit", n);
        out.push_str(&format!("<option{selected}>{n}</option>"));
    }
    out.push_str(
        "</select></div><p class=\"hint wide\" id=\"f-time-hint\">Times are RFC 3339 \
         (UTC when no offset is given); both bounds are exclusive.</p>\
         <div class=\"actions wide\"><button type=\"submit\">Apply filters</button>\
         <a href=\"/runs\">Clear filters</a></div></form>",
    );
    out
}
