"""The real claude, codex and gemini CLIs complete tool-using tasks against the scripted server.

Each test runs a CLI directly (not through runledger) as the current user (root in CI) in a
fresh workspace, and checks both sides: what the CLI did and printed, and what reached the model.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from conftest import parse_events, stream_user_message, wait_for

TOOL_TASK = [
    {"tool": "write_file", "path": "hello.txt", "content": "hello from the model\n"},
    {"tool": "shell", "command": "echo shell-ok > second.txt"},
    {"text": "Done: wrote both files.", "usage": {"input_tokens": 1234, "output_tokens": 56}},
]
# The server's default usage for a turn without "usage" is 100 input / 20 output tokens.
TOOL_TASK_INPUT_TOKENS = 100 + 100 + 1234
TOOL_TASK_OUTPUT_TOKENS = 20 + 20 + 56


def tool_results(req):
    """The tool results a request sends back to the model, as strings."""
    body = req["body"]
    out = []
    if req["api"] == "anthropic":
        for m in body.get("messages", []):
            if isinstance(m.get("content"), list):
                for b in m["content"]:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        out.append(json.dumps(b.get("content")))
    elif req["api"] == "responses":
        for it in body.get("input", []):
            if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"):
                out.append(json.dumps(it.get("output")))
    elif req["api"] == "gemini":
        for c in body.get("contents", []):
            for p in c.get("parts", []):
                if "functionResponse" in p:
                    out.append(json.dumps(p["functionResponse"]))
    return out


def user_prompts(req):
    """Every user prompt in a request's conversation (not tool results), as text."""
    body = req["body"]
    out = []

    def texts(v):
        if isinstance(v, str):
            return [v]
        res = []
        if isinstance(v, list):
            for x in v:
                res += texts(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                if k == "text" and isinstance(x, str):
                    res.append(x)
                elif isinstance(x, (list, dict)):
                    res += texts(x)
        return res

    if req["api"] == "anthropic":
        for m in body.get("messages", []):
            if m.get("role") == "user":
                c = m.get("content")
                if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c):
                    continue
                out.append("\n".join(texts(c)))
    elif req["api"] == "responses":
        for it in body.get("input", []):
            if isinstance(it, dict) and it.get("role") == "user":
                out.append("\n".join(texts(it.get("content"))))
    elif req["api"] == "gemini":
        for c in body.get("contents", []):
            if c.get("role") == "user" and not any("functionResponse" in p for p in c.get("parts", [])):
                out.append("\n".join(texts(c.get("parts"))))
    return out


def assistant_texts(req):
    body = req["body"]
    out = []
    if req["api"] == "anthropic":
        for m in body.get("messages", []):
            if m.get("role") == "assistant":
                c = m.get("content")
                out += [c] if isinstance(c, str) else [b.get("text", "") for b in c if isinstance(b, dict)]
    elif req["api"] == "responses":
        for it in body.get("input", []):
            if isinstance(it, dict) and it.get("role") == "assistant":
                out += [p.get("text", "") for p in it.get("content", []) if isinstance(p, dict)]
    elif req["api"] == "gemini":
        for c in body.get("contents", []):
            if c.get("role") == "model":
                out += [p.get("text", "") for p in c.get("parts", []) if "text" in p]
    return out


def reported_usage(name, res):
    """(input tokens, output tokens, cost or None) as the CLI reports them on stdout."""
    if name == "claude":
        final = [e for e in res.events if e.get("type") == "result"][-1]
        return final["usage"]["input_tokens"], final["usage"]["output_tokens"], final.get("total_cost_usd")
    if name == "codex":
        done = [e for e in res.events if e.get("type") == "turn.completed"][-1]
        return done["usage"]["input_tokens"], done["usage"]["output_tokens"], None
    final = [e for e in res.events if e.get("type") == "result"][-1]
    return final["stats"]["input_tokens"], final["stats"]["output_tokens"], None


# ---------------------------------------------------------------------------------------------


def test_tool_task_writes_files_and_runs_a_command(agent, server):
    server.script(TOOL_TASK)
    res = agent.run("Create hello.txt, then run a command that writes second.txt.")
    assert res.rc == 0, res.describe()
    assert (agent.workspace / "hello.txt").read_text() == "hello from the model\n", res.describe()
    assert (agent.workspace / "second.txt").read_text() == "shell-ok\n", res.describe()

    main = server.main_requests()
    assert [r["step"] for r in main] == [0, 1, 2], [(r["path"], r["step"]) for r in main]
    # The model saw both tool results before its final answer.
    results = tool_results(main[-1])
    assert len(results) == 2, results
    # The session id the CLI reports on stdout, used to resume.
    assert res.session_id(), res.describe()
    # Token usage as the model reported it reaches the CLI's structured output.
    inp, outp, cost = reported_usage(agent.name, res)
    assert (inp, outp) == (TOOL_TASK_INPUT_TOKENS, TOOL_TASK_OUTPUT_TOKENS)
    if agent.name == "claude":
        assert cost and cost > 0


def test_resume_by_session_id_sends_the_earlier_conversation(agent, server):
    server.script(
        {
            "replies": [
                {"when": "second task", "turns": [{"text": "Second answer."}]},
                {"turns": [{"text": "First answer: PAPAYA noted."}]},
            ]
        }
    )
    first = agent.run("first task: remember the word PAPAYA")
    assert first.rc == 0, first.describe()
    sid = first.session_id()
    assert sid, first.describe()

    server.clear()
    second = agent.run("second task: which word?", resume=sid)
    assert second.rc == 0, second.describe()
    assert second.session_id() == sid, second.describe()

    main = server.main_requests()
    assert main, second.describe()
    last = main[-1]
    prompts = user_prompts(last)
    assert any("first task: remember the word PAPAYA" in p for p in prompts), prompts
    assert any("second task: which word?" in p for p in prompts), prompts
    assert any("First answer: PAPAYA noted." in t for t in assistant_texts(last)), assistant_texts(last)


@pytest.mark.parametrize("prompt", ["--version", "- fix the typo"])
def test_prompt_that_looks_like_an_option_reaches_the_model(agent, server, prompt):
    server.script([{"text": "ok"}])
    res = agent.run(prompt)
    assert res.rc == 0, res.describe()
    main = server.main_requests()
    assert main, res.describe()
    assert any(prompt in p.splitlines() for p in user_prompts(main[-1])), user_prompts(main[-1])


def test_without_model_flag_the_cli_default_model_does_the_task(agent, server):
    server.script(TOOL_TASK)
    res = agent.run("Create hello.txt, then run a command that writes second.txt.", model=False)
    assert res.rc == 0, res.describe()
    assert (agent.workspace / "hello.txt").read_text() == "hello from the model\n", res.describe()
    assert (agent.workspace / "second.txt").read_text() == "shell-ok\n", res.describe()
    assert "Done: wrote both files." in res.stdout


def test_unauthorized_endpoint_fails_with_the_cli_message(agent, server):
    server.unauthorized(True)
    res = agent.run("hello")
    assert res.rc != 0, res.describe()
    assert any(r["kind"] == "unauthorized" for r in server.requests())
    # Where each CLI puts the error: its structured stdout, with its own wording.
    if agent.name == "claude":
        final = [e for e in res.events if e.get("type") == "result"][-1]
        assert final["is_error"] is True and final["api_error_status"] == 401, final
        assert final["result"].startswith("Invalid API key"), final
    elif agent.name == "codex":
        failed = [e for e in res.events if e.get("type") == "turn.failed"][-1]
        assert "401 Unauthorized: Incorrect API key provided." in failed["error"]["message"], failed
    else:
        final = [e for e in res.events if e.get("type") == "result"][-1]
        assert final["status"] == "error" and "API key not valid" in final["error"]["message"], final
        assert "API key not valid" in res.stderr


def test_missing_key_fails_with_the_cli_message(agent, server):
    server.script([{"text": "should not be reached"}])
    res = agent.run("hello", key=False)
    assert res.rc != 0, res.describe()
    assert not server.main_requests(), res.describe()
    if agent.name == "claude":
        final = [e for e in res.events if e.get("type") == "result"][-1]
        assert final["is_error"] is True and final["result"].startswith("Not logged in"), final
    elif agent.name == "codex":
        failed = [e for e in res.events if e.get("type") == "turn.failed"][-1]
        assert "Missing environment variable: `OPENAI_API_KEY`" in failed["error"]["message"], failed
    else:
        # Exit 41 before any JSON: the message is on stderr only.
        assert res.rc == 41 and not res.events, res.describe()
        assert "GEMINI_API_KEY" in res.stderr, res.describe()


def test_read_only_mode_refuses_the_write(agent, server):
    """Without the write flags each CLI refuses the write, exits 0, and says so in its own way."""
    server.script(TOOL_TASK[:1] + [{"text": "Finished."}])
    res = agent.run("Create hello.txt.", write=False)
    assert not (agent.workspace / "hello.txt").exists(), res.describe()
    assert res.rc == 0, res.describe()
    main = server.main_requests()
    if agent.name == "claude":
        # Print mode's default permission mode denies Write: a system event, an error tool
        # result to the model, and the final result's permission_denials.
        final = [e for e in res.events if e.get("type") == "result"][-1]
        assert [d["tool_name"] for d in final["permission_denials"]] == ["Write"], final
        assert any(e.get("subtype") == "permission_denied" for e in res.events)
        assert "haven't granted it" in tool_results(main[-1])[0]
    elif agent.name == "codex":
        # --sandbox read-only: the patch is rejected; only the model (and a stderr log line) hear of it.
        assert "read-only sandbox" in tool_results(main[-1])[0]
        assert "read-only sandbox" in res.stderr
    else:
        # The default approval mode in headless runs offers no write or shell tool at all.
        names = {fd["name"] for t in main[0]["body"]["tools"] for fd in t.get("functionDeclarations", [])}
        assert "write_file" not in names and "run_shell_command" not in names, names


def test_claude_follow_up_during_a_turn_reaches_the_model(agent_factory, server):
    """Claude Code's streaming JSON input takes a user message while a turn runs and hands it to
    the model with the next tool result (codex exec and gemini -p read no input mid-turn)."""
    agent = agent_factory("claude")
    server.script([{"tool": "shell", "command": "sleep 2; echo slept"}, {"text": "Turn done."}])
    proc = agent.start_streaming()
    watchdog = threading.Timer(60, proc.kill)  # a hung CLI ends the blocking reads below
    watchdog.start()
    try:
        proc.stdin.write(stream_user_message("original task: sleep a little"))
        proc.stdin.flush()
        # The model has asked for the slow command: the turn is in progress.
        assert wait_for(lambda: any(r["step"] == 0 for r in server.main_requests()), timeout=30)
        proc.stdin.write(stream_user_message("FOLLOW-UP while busy: also mention the weather"))
        proc.stdin.flush()
        lines = []
        while True:  # bounded by the CLI's own end of turn; the timeout below guards a hang
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith('{"') and '"type":"result"' in line:
                break
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = parse_events("".join(lines))
    final = [e for e in events if e.get("type") == "result"]
    assert final and final[-1]["is_error"] is False, lines[-3:]
    assert proc.returncode == 0
    # Both the original task and the follow-up reached the model within the same turn.
    last = server.main_requests()[-1]
    body = json.dumps(last["body"])
    assert "original task: sleep a little" in body
    assert "FOLLOW-UP while busy: also mention the weather" in " ".join(tool_results(last)), tool_results(last)


def test_codex_own_workspace_write_sandbox_allows_workspace_edits(agent_factory, server):
    """Codex's own sandbox (for runs without an outer sandbox) lets it edit the workspace, as
    long as CODEX_HOME is outside TMPDIR (there its sandbox helper cannot be started)."""
    agent = agent_factory("codex")
    agent.sandbox = "workspace-write"
    server.script(TOOL_TASK)
    res = agent.run("Create hello.txt, then run a command that writes second.txt.")
    assert res.rc == 0, res.describe()
    assert (agent.workspace / "hello.txt").read_text() == "hello from the model\n", res.describe()
    assert (agent.workspace / "second.txt").read_text() == "shell-ok\n", res.describe()


@pytest.mark.parametrize("model", [True, False], ids=["model", "default-model"])
def test_mcp_server_tool_is_called(agent, server, model):
    """A stdio MCP server given in the CLI's own format reaches the model as a tool, and the
    model's call reaches the MCP server (Claude Code and Codex load MCP tools through their tool
    search first; the scripted server does that step)."""
    calls = agent.root / "mcp-calls.txt"
    agent.add_mcp_server("probe", sys.executable, [str(Path(__file__).with_name("mcp_server.py")), str(calls)])
    server.script(
        [{"tool": "mcp", "server": "probe", "name": "record_marker", "arguments": {"text": "MARKER-1"}}, {"text": "Recorded."}]
    )
    res = agent.run("Record the marker.", model=model)
    assert res.rc == 0, res.describe()
    assert calls.exists() and calls.read_text() == "MARKER-1\n", res.describe()
    if agent.name == "claude":
        init = res.events[0]
        assert {"name": "probe", "status": "connected"}.items() <= init["mcp_servers"][0].items(), init
        names = [b.get("name") for e in res.events if e.get("type") == "assistant" for b in e["message"]["content"]]
        assert "mcp__probe__record_marker" in names, names
    elif agent.name == "codex":
        done = [e["item"] for e in res.events if e.get("type") == "item.completed" and e["item"]["type"] == "mcp_tool_call"]
        assert done and done[0]["server"] == "probe" and done[0]["status"] == "completed", res.describe()
    else:
        uses = [e["tool_name"] for e in res.events if e.get("type") == "tool_use"]
        assert uses == ["mcp_probe_record_marker"], res.describe()
