"""The scripted model server on its own: routes, error shapes, script handling (no CLI needed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def call(server, method, path, body=None, timeout=5):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


TOOLS_ANTHROPIC = [{"name": "Write", "input_schema": {}}, {"name": "Bash", "input_schema": {}}]


def test_unknown_routes_answer_404_with_a_message(server):
    for method, path in [("GET", "/nope"), ("POST", "/v1/chat/completions"), ("POST", "/v2/whatever")]:
        status, ctype, text = call(server, method, path, {} if method == "POST" else None)
        assert status == 404 and "no route" in json.loads(text)["error"]["message"], (path, text)


def test_unreadable_body_is_a_400(server):
    req = urllib.request.Request(server.url + "/v1/messages", data=b"{not json", method="POST")
    try:
        urllib.request.urlopen(req, timeout=5)
        raise AssertionError("expected an error")
    except urllib.error.HTTPError as e:
        assert e.code == 400


def test_a_bad_script_is_refused(server):
    status, _, text = call(server, "POST", "/_script", {"turns": [{"tool": "rm_rf"}]})
    assert status == 400 and "unknown tool" in text


def test_anthropic_stream_follows_the_script(server):
    server.script([{"tool": "write_file", "path": "/w/a.txt", "content": "x"}, {"text": "fin", "usage": {"input_tokens": 7, "output_tokens": 3}}])
    body = {"model": "m", "stream": True, "tools": TOOLS_ANTHROPIC, "messages": [{"role": "user", "content": "go"}]}
    status, ctype, text = call(server, "POST", "/v1/messages?beta=true", body)
    assert status == 200 and ctype == "text/event-stream"
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "message_stop"
    start = [e for e in events if e["type"] == "content_block_start"][0]["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "Write"
    # Second step: the tool result is in the conversation, so the script's next turn answers.
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]
    body["stream"] = False
    status, _, text = call(server, "POST", "/v1/messages", body)
    msg = json.loads(text)
    assert msg["content"] == [{"type": "text", "text": "fin"}] and msg["usage"]["input_tokens"] == 7


def test_each_api_has_its_own_401_shape(server):
    server.unauthorized(True)
    status, _, text = call(server, "POST", "/v1/messages", {"model": "m", "messages": []})
    assert status == 401 and json.loads(text)["error"]["type"] == "authentication_error"
    status, _, text = call(server, "POST", "/v1/responses", {"model": "m", "input": []})
    assert status == 401 and json.loads(text)["error"]["code"] == "invalid_api_key"
    status, _, text = call(server, "POST", "/v1beta/models/g:streamGenerateContent?alt=sse", {"contents": []})
    assert status == 401 and json.loads(text)["error"]["status"] == "UNAUTHENTICATED"


def test_gemini_structured_side_request_gets_json(server):
    body = {
        "contents": [{"role": "user", "parts": [{"text": "route me"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object", "properties": {"reasoning": {"type": "string"}, "model_choice": {"type": "string"}}},
        },
    }
    status, _, text = call(server, "POST", "/v1beta/models/g:generateContent", body)
    answer = json.loads(json.loads(text)["candidates"][0]["content"]["parts"][0]["text"])
    assert status == 200 and answer["model_choice"] == "flash"


def test_requests_are_recorded(server):
    call(server, "POST", "/v1/responses", {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "shell"}]})
    recorded = server.requests()
    assert recorded[-1]["api"] == "responses" and recorded[-1]["body"]["input"] == "hi"
