"""The run page's timeline in a real browser: a run of more than 1,200 events (600 follow-ups to
a running agent, then a cancel by a second key) opens on its newest page, which shows the last
event and the run's end; the pages lead to the oldest event and back; keys are named by their
names; a failure shows its reason; "the run at this event" shows the state right after it."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page, expect

from conftest import Server, poll, sign_in


def events_of(server: Server, run_id: str) -> list[dict]:
    events: list[dict] = []
    after = ""
    while True:
        page = server.api("GET", f"/agent/runs/{run_id}/events{after}")
        events.extend(page["events"])
        if "next" not in page:
            return events
        after = f"?after_seq={page['next']}"


def test_a_run_of_1203_events_shows_its_last_event_and_its_end(page: Page, server: Server) -> None:
    # Given a run whose agent took 600 follow-ups and was then cancelled by a second key.
    run_id = server.create(prompt="listen", title="a long conversation", config={"environment_id": "long"})
    poll(lambda: server.run(run_id)["state"] == "INPROGRESS", "the run to start")
    for n in range(600):
        server.api("POST", f"/agent/runs/{run_id}/followups", {"message": f"follow-up {n}"})
    canceller = server.api("POST", "/admin/keys", {"name": "the-canceller"})
    poll(lambda: sum(e["type"] == "FollowupsDelivered" for e in events_of(server, run_id)) >= 1,
         "the follow-ups to be delivered")
    # Follow-ups taken together share one `FollowupsDelivered`: top up until the history
    # passes 1,200 events before the cancel.
    n = 600
    while len(events_of(server, run_id)) < 1202:
        server.api("POST", f"/agent/runs/{run_id}/followups", {"message": f"follow-up {n}"})
        n += 1
    server.api("POST", f"/agent/runs/{run_id}/cancel", key=canceller["key"])
    # The stopped execution's usage may follow the cancel: wait until the history is still.
    def settled() -> list[dict] | None:
        before = events_of(server, run_id)
        time.sleep(0.5)
        after = events_of(server, run_id)
        return after if len(after) == len(before) else None

    events = poll(settled, "the history to settle")
    count = len(events)
    assert count >= 1203, count
    end = next(e["seq"] for e in events if e["type"] == "Cancelled")
    assert end >= count - 100, (end, count)

    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    # When its page opens, then the newest page shows the last event and the end, by key name.
    sign_in(page, server)
    page.goto(f"{server.base}/runs/{run_id}")
    expect(page.locator("#events-shown")).to_have_text(f"Events {count - 100} to {count - 1} of {count}")
    expect(page.locator(f"#event-{count - 1}")).to_be_visible()
    expect(page.locator(f"#event-{count - 1}")).to_contain_text(events[-1]["type"])
    cancelled = page.locator(f"#event-{end}")
    expect(cancelled).to_be_visible()
    expect(cancelled).to_contain_text("Cancelled")
    expect(cancelled).to_contain_text("by the-canceller")
    expect(cancelled).to_contain_text(canceller["id"])
    expect(cancelled.locator(".origin")).to_contain_text("via api · key the-canceller")
    expect(page.locator("#events li")).to_have_count(100)
    expect(page.locator("#run-state")).to_have_text("CANCELLED")

    # When the oldest page is opened, then the first event names the creator, and the pages
    # lead back to the newest.
    page.locator("nav.pager").first.get_by_role("link", name="Oldest").click()
    page.wait_for_url(re.compile(r".*events_from=0"))
    expect(page.locator("#event-0")).to_contain_text("by admin")
    expect(page.locator("#events li")).to_have_count(100)
    expect(page.locator("#event-100")).to_have_count(0)
    followup = page.locator("#events li", has_text="FollowupReceived").first
    expect(followup).to_contain_text("by admin")
    page.locator("nav.pager").first.get_by_role("link", name="Newer").click()
    page.wait_for_url(re.compile(r".*events_from=100"))
    expect(page.locator("#event-100")).to_be_visible()
    page.locator("nav.pager").first.get_by_role("link", name="Newest").click()
    expect(page.locator(f"#event-{count - 1}")).to_be_visible()

    # When "the run at this event" is followed for the first event, then the run as it was
    # then shows, and the event is marked.
    page.goto(f"{server.base}/runs/{run_id}?events_from=0")
    page.locator("#event-0").get_by_role("link", name="the run at this event").click()
    page.wait_for_url(re.compile(r".*at=0"))
    expect(page.locator("#at-h")).to_have_text("The run at event 0")
    expect(page.locator("#at-state")).to_have_text("QUEUED")
    expect(page.locator("#event-0")).to_have_attribute("aria-current", "step")
    # And at the end.
    page.goto(f"{server.base}/runs/{run_id}?at={end}")
    expect(page.locator("#at-state")).to_have_text("CANCELLED")
    # No script error, and no request of the pages' own missed (the browser's own favicon
    # request, which the console does not serve, is not one of them).
    assert not missing, missing
    assert not [e for e in page.errors if not e.startswith("Failed to load resource")], page.errors


def test_a_failure_shows_its_reason(page: Page, server: Server) -> None:
    # Given a run whose agent exits 3.
    run_id = server.create(prompt="fail", config={"environment_id": "broken"})
    poll(lambda: server.run(run_id)["state"] == "FAILED", "the run to fail")
    status = server.run(run_id)["status_message"]
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    sign_in(page, server)
    page.goto(f"{server.base}/runs/{run_id}")
    failed = page.locator("#events li", has_text="Failed")
    expect(failed).to_contain_text(status["message"])
    if status.get("error_code"):
        expect(failed.locator(".error-code")).to_have_text(status["error_code"])
    # The run's details, not its provenance's (a `dl.details` of its own).
    expect(page.locator("dl.details:not(.provenance)")).to_contain_text(status["message"])
    # No script error, and no request of the page's own missed (the browser's own favicon
    # request, which the console does not serve, is not one of them).
    assert not missing, missing
    assert not [e for e in page.errors if not e.startswith("Failed to load resource")], page.errors
