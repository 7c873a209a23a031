"""The console's run page as a review, in a real browser: a Claude Code run (its CLI replays the
stream-json of the captured real run tests/fixtures/transcripts/claude-tool-task) shows its
commands with their exit status, their output folded until clicked, and the agent's words,
rendered by the server (the steps need no script); the raw transcript is a link away. A run
that edits its workspace shows the files changed as a coloured diff per file."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterable

import pytest
from playwright.sync_api import Page, expect

import conftest
from conftest import Server, poll, sign_in

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "claude-tool-task" / "stdout"


@pytest.fixture(scope="module")
def replay_server() -> Iterable[Server]:
    """The suite's server, with a `claude` environment whose CLI prints the captured output."""
    original = conftest._config

    def config(agents: Path) -> str:
        replay = agents / "claude-tool-task.jsonl"
        replay.write_text(FIXTURE.read_text())
        replay.chmod(0o644)
        cli = agents / "claude.sh"
        cli.write_text(f'#!/usr/bin/env bash\ncat "{replay}"\n')
        cli.chmod(0o755)
        editor = agents / "editor.sh"
        editor.write_text("#!/usr/bin/env bash\nprintf 'one\\ntwo\\nthree\\n' > a.txt\nrm gone.txt\n")
        editor.chmod(0o755)
        return original(agents) + (
            f'[[environments]]\nid = "claude"\nharness = "claude"\nsandbox = "none"\n'
            f'command = ["bash", "{cli}"]\n\n'
            f'[[environments]]\nid = "editor"\nharness = "command"\nsandbox = "none"\n'
            f'command = ["bash", "{editor}"]\n'
            "setup = [\"printf 'one\\\\n' > a.txt\", \"printf 'bye\\\\n' > gone.txt\"]\n\n"
        )

    with tempfile.TemporaryDirectory(prefix="runledger-browser-") as tmp:
        conftest._config = config
        try:
            s = Server(Path(tmp))
        finally:
            conftest._config = original
        try:
            yield s
        finally:
            s.stop()


def test_the_run_page_shows_the_commands_with_their_exit_status(page: Page, replay_server: Server) -> None:
    server = replay_server
    run_id = server.create(prompt="write two files", config={"environment_id": "claude"})
    poll(lambda: server.run(run_id)["state"] == "SUCCEEDED", "the run succeeds")
    # Script errors, and resources that failed, but the favicon Chromium asks for by itself.
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(f"{m.text} {m.location.get('url')}")
            if m.type == "error" and not m.location.get("url", "").endswith("/favicon.ico") else None)
    sign_in(page, server)
    page.goto(f"{server.base}/runs/{run_id}")
    steps = page.locator("#steps")
    expect(steps.get_by_role("heading", name="Steps")).to_be_visible()

    command = steps.locator("details.tool", has_text="echo shell-ok > second.txt")
    expect(command.locator("summary")).to_contain_text("Bash")
    expect(command.locator(".exit")).to_have_text("exit 0")
    expect(command.locator(".exit")).to_have_class("exit ok")
    # Its output is folded until the reviewer opens it.
    output = command.locator("pre.output")
    expect(output).to_be_hidden()
    command.locator("summary").click()
    expect(output).to_be_visible()
    expect(output).to_have_text("(Bash completed with no output)")

    write = steps.locator("details.tool", has_text="hello.txt")
    expect(write.locator("summary")).to_contain_text("Write")
    expect(steps.locator(".step-message")).to_contain_text("Done: wrote both files.")
    expect(steps.locator(".step-usage")).to_contain_text("1434 input tokens")

    # The raw transcript is one click away, on the same page.
    steps.get_by_role("link", name="the raw transcript").click()
    expect(page.locator("#transcript")).to_contain_text("tool call Bash", timeout=10_000)
    assert not errors, errors


def test_the_steps_are_there_without_script(browser, replay_server: Server) -> None:
    server = replay_server
    run_id = server.create(prompt="write two files again", config={"environment_id": "claude"})
    poll(lambda: server.run(run_id)["state"] == "SUCCEEDED", "the run succeeds")
    context = browser.new_context(java_script_enabled=False)
    try:
        p = context.new_page()
        p.goto(server.run(run_id)["session_link"])
        command = p.locator("details.tool", has_text="echo shell-ok > second.txt")
        expect(command.locator(".exit")).to_have_text("exit 0")
        command.locator("summary").click()
        expect(command.locator("pre.output")).to_be_visible()
    finally:
        context.close()


def test_the_run_page_shows_the_files_changed_with_a_coloured_diff(page: Page, replay_server: Server) -> None:
    server = replay_server
    run_id = server.create(prompt="edit", config={"environment_id": "editor"})
    poll(lambda: server.run(run_id)["state"] == "SUCCEEDED", "the run succeeds")
    sign_in(page, server)
    page.goto(f"{server.base}/runs/{run_id}")
    changes = page.locator("#changes")
    expect(changes.locator(".diff-summary")).to_contain_text("2 files changed")
    modified = changes.locator("details.diff-file", has_text="a.txt")
    expect(modified.locator("summary")).to_contain_text("modified")
    added = modified.locator("pre .add")
    expect(added).to_have_text(["+two", "+three"])
    green = added.first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert green not in ("rgba(0, 0, 0, 0)", "transparent"), green
    deleted = changes.locator("details.diff-file", has_text="gone.txt")
    expect(deleted.locator("summary")).to_contain_text("deleted")
    expect(deleted.locator("pre .del")).to_have_text("-bye")
