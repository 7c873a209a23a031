//! A run page's timeline and its view of "the run at this event", rendered on the server: one
//! page of the run's events at a time (`?events_from=SEQ`; the newest page without it), with
//! links to the oldest, older, newer and newest pages, so every event of any history is
//! reachable while a page holds at most `PAGE` of them. Each event names keys by name (the
//! creator's display name, a `by` key id through the keys handle, falling back to the id),
//! shows a failure's reason (status message and error code), the request's origin when the
//! event records one, and links to the run as it was right after it (`?at=SEQ`, the state
//! `GET /agent/runs/{id}?as_of_seq=SEQ` answers). Everything from a run or a key is escaped.

use std::collections::HashMap;

use serde_json::Value;

use super::display::{state_badge, text, when};
use crate::html::escape;
use crate::problem::ApiError;
use crate::{access, past, AppState};
use runledger_domain::Run;
use runledger_runs::actor::Envelope;

/// Events on one page of the timeline.
pub(super) const PAGE: u64 = 100;

/// What the run page's query asks of the timeline: the first event shown, and the event whose
/// state is shown (`at`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct View {
    pub(super) events_from: Option<u64>,
    pub(super) at: Option<u64>,
}

/// The run page's query: `events_from` and `at`, each an event's `seq`; anything else in it is
/// ignored, a malformed value refused naming it.
pub(super) fn view(raw: &str) -> Result<View, ApiError> {
    let mut view = View::default();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        let slot = match key.as_ref() {
            "events_from" => &mut view.events_from,
            "at" => &mut view.at,
            _ => continue,
        };
        *slot = Some(value.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "{key} must be the seq of one of the run's events (an integer); got {value:?}"
            ))
        })?);
    }
    Ok(view)
}

/// The first event of the page `view` asks for in a run of `count` events: `events_from`, else
/// the page around `at`, else the newest page.
fn first_shown(view: &View, count: u64) -> u64 {
    match (view.events_from, view.at) {
        (Some(from), _) => from.min(count.saturating_sub(1)),
        (None, Some(at)) => at - at % PAGE,
        (None, None) => count.saturating_sub(PAGE),
    }
}

/// The "run at this event" section: the state right after event `seq`, or the error that says
/// why there is none.
pub(super) fn at_section(state: &AppState, run: &Run, seq: u64) -> Result<String, ApiError> {
    let past = past::as_of(state, run, seq)?;
    let json = past::past_json(&past, &access::links(state))?;
    let item: Value = serde_json::from_slice(&json).map_err(|e| ApiError::internal(&e))?;
    let id = escape(&run.id.to_string());
    let mut body = format!(
        "<section id=\"at\" class=\"at\" aria-labelledby=\"at-h\"><h2 id=\"at-h\">The run at \
         event {seq}</h2><p class=\"hint\">As it was right after event {seq}; \
         <a href=\"/runs/{id}\">the run now</a>.</p><dl class=\"details\">"
    );
    let mut row = |label: &str, value: String| {
        if !value.is_empty() {
            body.push_str(&format!("<dt>{label}</dt><dd>{value}</dd>"));
        }
    };
    row("State", state_badge(text(&item["state"]), Some("at-state")));
    row("Updated", when(&item["updated_at"]));
    row("Started", when(&item["started_at"]));
    row("Run time", escape(text(&item["run_time"])));
    row("Failure", failure(&item["status_message"]));
    if let Some(artifacts) = item["artifacts"].as_array() {
        row("Artifacts", artifacts.len().to_string());
    }
    body.push_str("</dl></section>");
    Ok(body)
}

/// A failure's reason as the run or an event states it: message and error code.
pub(super) fn failure(status: &Value) -> String {
    let message = text(&status["message"]);
    if message.is_empty() {
        return String::new();
    }
    match status["error_code"].as_str() {
        Some(code) => format!(
            "{} <code class=\"error-code\">{}</code>",
            escape(message),
            escape(code)
        ),
        None => escape(message),
    }
}

/// The timeline: one page of the run's events with the links around it.
pub(super) fn timeline(state: &AppState, run: &Run, view: &View) -> Result<String, ApiError> {
    let count = run.next_seq;
    let from = first_shown(view, count);
    let events = state
        .runs
        .durable_events(run.id, from)?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let mut names = Names::new(state);
    let mut items = String::new();
    let mut last = None;
    for envelope in events.take(PAGE as usize) {
        let envelope = envelope?;
        items.push_str(&event_item(run, &envelope, view.at, &mut names));
        last = Some(envelope.seq);
    }
    let newest = last.is_none_or(|seq| seq + 1 >= count);
    let id = escape(&run.id.to_string());
    let pager = pager(&id, from, last, count);
    let shown = match last {
        Some(last) => format!("Events {from} to {last} of {count}"),
        None => "No events".to_string(),
    };
    Ok(format!(
        "<section aria-labelledby=\"ev-h\"><h2 id=\"ev-h\">Events</h2>\
         <p id=\"events-shown\" class=\"hint\">{shown}</p>{pager}\
         <ol id=\"events\" class=\"events\" start=\"{from}\" data-last-seq=\"{}\" \
         data-newest=\"{newest}\" data-key-names=\"{}\">{items}</ol>{pager}</section>",
        last.map_or(String::new(), |s| s.to_string()),
        escape(&names.json()),
    ))
}

/// The links to the other pages of the timeline; a link that would show this page again is
/// left out.
fn pager(id: &str, from: u64, last: Option<u64>, count: u64) -> String {
    let mut links = Vec::new();
    if from > 0 {
        links.push(format!(
            "<a href=\"/runs/{id}?events_from=0#events\" rel=\"first\">Oldest</a>"
        ));
        links.push(format!(
            "<a href=\"/runs/{id}?events_from={}#events\" rel=\"prev\">Older</a>",
            from.saturating_sub(PAGE)
        ));
    }
    if let Some(last) = last.filter(|last| last + 1 < count) {
        links.push(format!(
            "<a href=\"/runs/{id}?events_from={}#events\" rel=\"next\">Newer</a>",
            last + 1
        ));
        links.push(format!(
            "<a href=\"/runs/{id}#events\" rel=\"last\">Newest</a>"
        ));
    }
    if links.is_empty() {
        return String::new();
    }
    format!(
        "<nav class=\"pager\" aria-label=\"Event pages\">{}</nav>",
        links.join(" ")
    )
}

/// One event as a list item: number, time, type, what it says, its origin, and the link to the
/// run at it.
fn event_item(run: &Run, envelope: &Envelope, at: Option<u64>, names: &mut Names<'_>) -> String {
    let event = runledger_format::events::event_json(envelope);
    let data = &event["data"];
    let seq = envelope.seq;
    let mut parts = Vec::new();
    if let Some(name) = data["creator"]["display_name"].as_str() {
        parts.push(format!("by {}", escape(name)));
    }
    if let Some(by) = data["by"].as_str() {
        parts.push(format!("by {}", names.name(by)));
    }
    for field in ["status_message", "status"] {
        let reason = failure(&data[field]);
        if !reason.is_empty() {
            parts.push(format!("<span class=\"reason\">{reason}</span>"));
        }
    }
    if let Some(object) = data.as_object() {
        for (k, v) in object {
            if [
                "execution",
                "count",
                "mode",
                "message",
                "artifact_type",
                "uid",
            ]
            .contains(&k.as_str())
            {
                let value = match v {
                    Value::String(s) => s.chars().take(200).collect::<String>(),
                    Value::Number(n) => n.to_string(),
                    _ => continue,
                };
                parts.push(format!("{}: {}", escape(k), escape(&value)));
            }
        }
    }
    if event["type"] == "Provenance" {
        parts.extend(super::provenance::event_parts(data));
    }
    if event["type"] == "Changes" {
        parts.extend(super::changes_event::event_parts(data));
    }
    let current = if at == Some(seq) {
        " class=\"current\" aria-current=\"step\""
    } else {
        ""
    };
    format!(
        "<li id=\"event-{seq}\" value=\"{seq}\" data-seq=\"{seq}\"{current}>\
         <time datetime=\"{}\">{}</time> <strong>{}</strong> {}{} \
         <a class=\"at-link\" href=\"/runs/{}?at={seq}#at\">the run at this event</a></li>",
        escape(text(&event["at"])),
        when(&event["at"]),
        escape(text(&event["type"])),
        parts.join(", "),
        origin(envelope),
        escape(&run.id.to_string()),
    )
}

/// Where an event came from, when the event records it (events recorded before origins were
/// have none, and show nothing): channel, key (its name as it was then), request id, client
/// address, user agent, and the service's cause or the caller's reason.
fn origin(envelope: &Envelope) -> String {
    let Some(origin) = &envelope.origin else {
        return String::new();
    };
    let mut parts = vec![format!("via {}", origin.channel.as_str())];
    if let Some(key) = &origin.key {
        parts.push(format!(
            "key {} <span class=\"hint\">({}, {}, team {})</span>",
            escape(&key.name),
            escape(&key.id),
            escape(&key.kind),
            escape(&key.team)
        ));
    }
    let fields = [
        ("request", &origin.request_id),
        ("from", &origin.client_addr),
        ("user agent", &origin.user_agent),
        ("cause", &origin.cause),
        ("reason", &origin.reason),
    ];
    for (label, value) in fields {
        if let Some(value) = value {
            parts.push(format!("{label} <code>{}</code>", escape(value)));
        }
    }
    format!(" <span class=\"origin\">{}</span>", parts.join(" · "))
}

/// Key names by id, asked of the keys handle once per key on a page; a key that is not found
/// (or cannot be read) is shown by its id.
struct Names<'a> {
    state: &'a AppState,
    known: HashMap<String, Option<String>>,
}

impl<'a> Names<'a> {
    fn new(state: &'a AppState) -> Names<'a> {
        Names {
            state,
            known: HashMap::new(),
        }
    }

    /// The key's name and id, escaped; the id alone when the key is unknown.
    fn name(&mut self, id: &str) -> String {
        let state = self.state;
        let name = self
            .known
            .entry(id.to_string())
            .or_insert_with(|| state.keys.get(id).ok().flatten().map(|k| k.name))
            .clone();
        match name {
            Some(name) => format!(
                "{} <span class=\"hint\">({})</span>",
                escape(&name),
                escape(id)
            ),
            None => escape(id),
        }
    }

    /// The names found, as a JSON object, for the script to name the keys of events it adds.
    fn json(&self) -> String {
        let names: serde_json::Map<String, Value> = self
            .known
            .iter()
            .filter_map(|(id, name)| Some((id.clone(), Value::from(name.clone()?))))
            .collect();
        Value::Object(names).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{Channel, Event, Origin, OriginKey, RunId, Timestamp};

    #[test]
    fn an_origin_shows_escaped_and_an_event_without_one_shows_nothing() {
        let mut envelope = Envelope {
            run_id: RunId(1),
            seq: 3,
            at: Timestamp(0),
            event: Event::Cancelled { by: "k1".into() },
            origin: None,
        };
        assert_eq!(origin(&envelope), "");
        envelope.origin = Some(Origin {
            channel: Channel::Console,
            key: Some(OriginKey {
                id: "k1".into(),
                name: "<b>ops</b>".into(),
                kind: "personal".into(),
                team: "default".into(),
                admin: false,
            }),
            request_id: Some("01REQ".into()),
            client_addr: Some("192.0.2.7".into()),
            user_agent: Some("curl/8 \"<script>\"".into()),
            cause: None,
            reason: Some("stuck & looping".into()),
        });
        let shown = origin(&envelope);
        for part in [
            "via console",
            "key &lt;b&gt;ops&lt;/b&gt; <span class=\"hint\">(k1, personal, team default)</span>",
            "request <code>01REQ</code>",
            "from <code>192.0.2.7</code>",
            "user agent <code>curl/8 &quot;&lt;script&gt;&quot;</code>",
            "reason <code>stuck &amp; looping</code>",
        ] {
            assert!(shown.contains(part), "{part}: {shown}");
        }
        assert!(
            !shown.contains("<script>") && !shown.contains("cause"),
            "{shown}"
        );
    }

    #[test]
    fn the_query_picks_the_page_and_names_what_it_refuses() {
        assert_eq!(view("").expect("valid"), View::default());
        let v = view("events_from=100&at=5&other=1").expect("valid");
        assert_eq!((v.events_from, v.at), (Some(100), Some(5)));
        for bad in ["events_from=x", "at=-1", "at="] {
            assert!(view(bad).is_err(), "{bad}");
        }
        let newest = View::default();
        assert_eq!(first_shown(&newest, 1203), 1103);
        assert_eq!(first_shown(&newest, 40), 0);
        let at = View {
            events_from: None,
            at: Some(250),
        };
        assert_eq!(first_shown(&at, 1203), 200);
        let far = View {
            events_from: Some(5000),
            at: None,
        };
        assert_eq!(first_shown(&far, 1203), 1202);
    }

    #[test]
    fn the_pager_links_only_to_other_pages() {
        assert_eq!(pager("R", 0, Some(39), 40), "");
        let middle = pager("R", 100, Some(199), 1203);
        for link in [
            "events_from=0#",
            "events_from=0#events\" rel=\"first\"",
            "events_from=200#",
            "href=\"/runs/R#events\" rel=\"last\"",
        ] {
            assert!(middle.contains(link), "{link}: {middle}");
        }
        let newest = pager("R", 1103, Some(1202), 1203);
        assert!(!newest.contains("rel=\"next\""), "{newest}");
        assert!(newest.contains("events_from=1003#"), "{newest}");
    }
}
