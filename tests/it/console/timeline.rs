//! The run page's timeline, server-rendered: a history longer than a page opens on its newest
//! page (the run's end), the pages' links reach every event once, keys show by name (escaped),
//! "the run at this event" shows the state right after it, and a malformed or missing event is
//! a page that says so. The same in real Chromium: `tests/browser/test_timeline.py`.

use super::support::*;
use crate::common::Server;
use serde_json::json;

/// The `href` of the first link with `rel` in `html`, decoded from HTML.
fn link(html: &str, rel: &str) -> Option<String> {
    let at = html.find(&format!("rel=\"{rel}\""))?;
    let start = html[..at].rfind("href=\"")? + "href=\"".len();
    let end = start + html[start..].find('"')?;
    Some(html[start..end].replace("&amp;", "&"))
}

/// The `seq`s of the events on a page, in order.
fn shown(html: &str) -> Vec<u64> {
    html.split("<li id=\"event-")
        .skip(1)
        .filter_map(|rest| rest.split('"').next()?.parse().ok())
        .collect()
}

#[tokio::test]
async fn the_timeline_pages_through_every_event_and_opens_on_the_end() {
    // Given a run of more than two pages of events, cancelled by a key with a hostile name.
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let id = server
        .create(json!({ "prompt": "listen", "config": { "environment_id": "slow" } }))
        .await;
    server.wait_state(&id, "INPROGRESS").await;
    for n in 0..230 {
        let (status, v) = server
            .followup(&id, json!({ "message": format!("follow-up {n}") }))
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let (canceller, canceller_id) = make_key(&server, "<b>canceller</b>", "default", false).await;
    let (status, v) = server
        .post(&canceller, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let count = server.events(&id).await.len() as u64;
    assert!(count > 230, "{count}");
    let session = sign_in(&server, &server.key).await;

    // When the run's page opens, then it shows the newest page: the last event, the end.
    let (status, html) = get(&server, &session, &format!("/runs/{id}")).await;
    assert_eq!(status, 200, "{html}");
    assert_eq!(shown(&html), (count - 100..count).collect::<Vec<_>>());
    assert!(
        html.contains(&format!(
            "Events {} to {} of {count}",
            count - 100,
            count - 1
        )),
        "{html}"
    );
    let last = &html[html
        .find(&format!("<li id=\"event-{}\"", count - 1))
        .expect("the last event")..];
    let last = &last[..last.find("</li>").expect("its end")];
    assert!(last.contains("<strong>Cancelled</strong>"), "{last}");
    assert!(
        last.contains(&format!(
            "by &lt;b&gt;canceller&lt;/b&gt; <span class=\"hint\">({canceller_id})</span>"
        )),
        "{last}"
    );
    assert!(!html.contains("<b>canceller"), "the key's name is escaped");
    assert!(last.contains(&format!("href=\"/runs/{id}?at={}#at\"", count - 1)));
    assert_eq!(link(&html, "next"), None);

    // When the pages are followed from the oldest, then every event shows once, in order.
    let mut path = link(&html, "first").expect("a link to the oldest page");
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let (status, html) = get(&server, &session, &path).await;
        assert_eq!(status, 200, "{path}");
        seen.extend(shown(&html));
        pages += 1;
        if pages == 1 {
            assert!(html.contains("<li id=\"event-0\""));
            assert!(html.contains("by admin"), "the creator by name");
            assert_eq!(link(&html, "prev").as_deref(), None);
        }
        match link(&html, "next") {
            Some(next) => path = next,
            None => break,
        }
    }
    assert_eq!(seen, (0..count).collect::<Vec<_>>());
    assert_eq!(pages, count.div_ceil(100));

    // When the run at its first and last events is asked for, then those states show.
    let (status, html) = get(&server, &session, &format!("/runs/{id}?at=0")).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("The run at event 0"), "{html}");
    assert!(html.contains("id=\"at-state\">QUEUED<"), "{html}");
    assert!(html.contains("<li id=\"event-0\" value=\"0\" data-seq=\"0\" class=\"current\""));
    let (_, html) = get(&server, &session, &format!("/runs/{id}?at={}", count - 1)).await;
    assert!(html.contains("id=\"at-state\">CANCELLED<"), "{html}");

    // When the event does not exist or the query is malformed, then the page says so.
    let (status, html) = get(&server, &session, &format!("/runs/{id}?at={count}")).await;
    assert_eq!(status, 404);
    assert!(
        html.contains(&format!("there is no event {count}")),
        "{html}"
    );
    for query in ["at=x", "events_from=-1", "events_from=%3Cscript%3E"] {
        let (status, html) = get(&server, &session, &format!("/runs/{id}?{query}")).await;
        assert_eq!(status, 400, "{query}");
        assert!(!html.contains("<script>"), "{html}");
    }
    // A page past the end shows the last event.
    let (status, html) = get(&server, &session, &format!("/runs/{id}?events_from=99999")).await;
    assert_eq!(status, 200);
    assert_eq!(shown(&html), vec![count - 1]);
}
