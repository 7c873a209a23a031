"""The web console in a real browser (the distribution's headless Chromium): signing in, a run
created from the form whose transcript appears live until SUCCEEDED, a follow-up, a cancel, the
list's filters and live updates, the keys page, refused and revoked keys, a long output kept
virtualised, and screenshots of every page, light and dark, narrow and wide."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Browser, Page, expect

from conftest import Server, poll, shoot, sign_in


def no_foreign_requests(page: Page, server: Server) -> None:
    foreign = [u for u in page.requests if not u.startswith(server.base) and not u.startswith("data:")]
    assert not foreign, foreign
    assert not page.errors, page.errors


def test_a_wrong_key_is_refused(page: Page, server: Server) -> None:
    page.goto(server.base + "/signin")
    page.get_by_label("API key").fill("rl_not-a-real-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#signin-error")).to_contain_text("not valid or has been revoked")
    assert page.url.endswith("/signin")
    page.goto(server.base + "/runs")
    assert page.url.endswith("/signin"), "no session was made"


def test_create_a_run_watch_it_live_and_send_a_follow_up(page: Page, server: Server) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="New run", exact=True).click()
    page.wait_for_url("**/new")
    expect(page.locator("#n-env option[value=chatty]")).to_have_count(1)
    page.get_by_label("Prompt").fill("say <b>hello</b> to the console")
    page.get_by_label("Environment").select_option("chatty")
    page.get_by_label("Title").fill("<script>window.pwned=1</script> from the form")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r".*/runs/[0-9A-Z]{26}$"))
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#run-title")).to_have_text("<script>window.pwned=1</script> from the form")
    assert page.evaluate("window.pwned") is None

    transcript = page.locator("#transcript")
    # Live: output shows while the run is still in progress.
    expect(transcript).to_contain_text("line 3 of the work", timeout=10_000)
    assert server.run(run_id)["state"] in ("INPROGRESS", "QUEUED")
    expect(page.locator("#run-state")).to_have_text("INPROGRESS", timeout=5_000)
    expect(transcript.locator(".s-stderr").first).to_contain_text("warning")
    expect(page.locator("#cancel")).to_be_visible()

    # A follow-up while it still listens is answered in the transcript.
    page.get_by_label(re.compile("Message to the agent")).fill("please also wave")
    page.get_by_role("button", name="Send follow-up").click()
    expect(page.locator("#followup-result")).to_contain_text("Sent; the run is")
    expect(transcript).to_contain_text("got follow-up", timeout=15_000)
    expect(transcript).to_contain_text("please also wave")
    expect(page.locator("#run-state")).to_have_text("SUCCEEDED", timeout=20_000)
    expect(page.locator("#cancel")).to_be_hidden()
    expect(page.locator("#events")).to_contain_text("Succeeded")
    expect(page.locator("#events")).to_contain_text("by admin")
    expect(page.locator("#session-link")).to_have_attribute("href", re.compile(r"/sessions/" + run_id))

    # A follow-up on the finished run resumes it, and the page follows the new execution.
    page.get_by_label(re.compile("Message to the agent")).fill("one more thing")
    page.get_by_role("button", name="Send follow-up").click()
    expect(page.locator("#followup-result")).to_contain_text("Sent; the run is QUEUED")
    expect(transcript).to_contain_text("starting on", timeout=15_000)
    poll(lambda: page.locator("#transcript").inner_text().count("starting on") >= 1, "the new execution")
    expect(page.locator("#run-state")).to_have_text("SUCCEEDED", timeout=30_000)
    poll(lambda: server.run(run_id)["state"] == "SUCCEEDED", "the resumed run to succeed")
    no_foreign_requests(page, server)


def test_cancel_a_running_run(page: Page, server: Server) -> None:
    run_id = server.create(prompt="run until stopped", title="to be cancelled", config={"environment_id": "long"})
    sign_in(page, server)
    page.goto(f"{server.base}/runs/{run_id}")
    expect(page.locator("#transcript")).to_contain_text("still working", timeout=10_000)
    expect(page.locator("#run-state")).to_have_text("INPROGRESS")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#action-result")).to_have_text("Cancelled.")
    expect(page.locator("#run-state")).to_have_text("CANCELLED")
    assert server.run(run_id)["state"] == "CANCELLED"
    expect(page.locator("#events")).to_contain_text("Cancelled", timeout=10_000)
    no_foreign_requests(page, server)


def test_filter_the_list_and_see_it_update_live(page: Page, server: Server) -> None:
    a = server.create(prompt="alpha work", title="alpha-filter-run", config={"environment_id": "chatty"})
    b = server.create(prompt="beta work", title="beta-filter-run", config={"environment_id": "long"})
    sign_in(page, server)
    rows = page.locator("#run-rows tr")
    expect(page.locator(f'tr[data-run="{a}"]')).to_have_count(1)
    expect(page.locator(f'tr[data-run="{b}"]')).to_have_count(1)

    page.get_by_label("Search").fill("alpha-filter")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r".*/runs\?q=alpha-filter"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("alpha-filter-run")
    # Empty fields stay out of the URL.
    assert "model_id" not in page.url, page.url

    page.goto(server.base + "/runs")
    page.get_by_label("Environment").fill("long")
    page.get_by_role("checkbox", name="INPROGRESS").check()
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator(f'tr[data-run="{b}"]')).to_have_count(1)
    expect(page.locator(f'tr[data-run="{a}"]')).to_have_count(0)

    # Live: a state change shows without a reload.
    page.goto(server.base + "/runs?environment_id=long")
    row = page.locator(f'tr[data-run="{b}"]')
    expect(row).to_contain_text("INPROGRESS")
    server.api("POST", f"/agent/runs/{b}/cancel")
    expect(row).to_contain_text("CANCELLED", timeout=10_000)
    # And a new run appears.
    c = server.create(prompt="gamma", title="gamma-live-run", config={"environment_id": "long"})
    expect(page.locator(f'tr[data-run="{c}"]')).to_have_count(1, timeout=10_000)
    server.api("POST", f"/agent/runs/{c}/cancel")

    page.goto(server.base + "/runs?q=nothing-matches-this")
    expect(page.locator("#runs-empty")).to_contain_text("No runs match these filters")
    no_foreign_requests(page, server)
    # The page of a bad filter is itself a 400, which the browser logs.
    page.goto(server.base + "/runs?created_after=not-a-time")
    expect(page.locator("#runs-error")).to_contain_text("created_after")


def test_keys_page_creates_shows_once_and_revokes(page: Page, server: Server) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="Keys", exact=True).click()
    page.wait_for_url("**/keys")
    page.get_by_label("Name").fill("from-the-console")
    page.get_by_role("button", name="Create key").click()
    secret = page.locator("#new-key-secret")
    expect(secret).to_have_text(re.compile(r"^rl_"))
    expect(page.locator("#key-rows")).to_contain_text("from-the-console")
    row = page.locator("#key-rows tr", has_text="from-the-console")
    row.get_by_role("button", name=re.compile("Revoke")).click()
    expect(row).to_contain_text("revoked", timeout=5_000)
    no_foreign_requests(page, server)


def test_a_revoked_keys_session_ends(browser: Browser, server: Server) -> None:
    made = server.api("POST", "/admin/keys", {"name": "short-lived"})
    context = browser.new_context()
    page = context.new_page()
    try:
        sign_in(page, server, made["key"])
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        server.api("POST", f"/admin/keys/{made['id']}/revoke")
        page.goto(server.base + "/runs")
        assert page.url.endswith("/signin"), page.url
        # Signing in again with it is refused.
        page.get_by_label("API key").fill(made["key"])
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#signin-error")).to_contain_text("not valid or has been revoked")
    finally:
        context.close()


def test_sign_out(page: Page, server: Server) -> None:
    sign_in(page, server)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/signin")
    page.goto(server.base + "/new")
    assert page.url.endswith("/signin")


def test_a_long_output_stays_virtualised(page: Page, server: Server) -> None:
    run_id = server.create(prompt="be loud", config={"environment_id": "loud"})
    poll(lambda: server.run(run_id)["state"] == "SUCCEEDED", "the loud run", timeout=60)
    sign_in(page, server)
    started = time.monotonic()
    page.goto(f"{server.base}/runs/{run_id}")
    expect(page.locator("#tx-status")).to_contain_text("SUCCEEDED", timeout=90_000)
    loaded = time.monotonic() - started
    expect(page.locator("#transcript")).to_contain_text("output line number 100000")
    # Only a window of the 100,000 lines is in the document.
    shown = page.locator("#transcript .tx-rows div").count()
    assert 0 < shown < 300, shown
    # Scrolling to the top shows the first line, promptly.
    page.locator("#tx-pause").click()
    t = time.monotonic()
    page.locator("#transcript").evaluate("e => { e.scrollTop = 0; }")
    # The first output line follows the system lines (provenance, the execution's start).
    first = page.locator("#transcript .tx-rows div.s-stdout").first
    expect(first).to_have_text("output line number 1")
    assert time.monotonic() - t < 2, "scrolling took too long"
    print(f"100,000 lines loaded in {loaded:.1f} s")


def test_screenshots_of_every_page(browser: Browser, server: Server) -> None:
    done = server.create(prompt="for the picture", title="A finished run", config={"environment_id": "chatty"})
    poll(lambda: server.run(done)["state"] == "SUCCEEDED", "the run for the screenshot", timeout=30)

    def run_ready(p: Page) -> None:
        expect(p.locator("#tx-status")).to_contain_text("SUCCEEDED", timeout=10_000)
        expect(p.locator("#events li").first).to_be_visible()

    def runs_ready(p: Page) -> None:
        expect(p.locator("#run-rows tr").first).to_be_visible()

    shoot(browser, server, "/signin", "signin")
    shoot(browser, server, "/runs", "runs", ready=runs_ready)
    shoot(browser, server, f"/runs/{done}", "run", ready=run_ready)
    shoot(browser, server, "/new", "new", ready=lambda p: expect(p.locator("#n-env option[value=chatty]")).to_have_count(1))
    shoot(browser, server, "/keys", "keys", ready=lambda p: expect(p.locator("#key-rows tr").first).to_be_visible())
