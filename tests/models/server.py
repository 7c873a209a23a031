#!/usr/bin/env python3
"""A scripted model server for the claude, codex and gemini CLIs, on loopback.

Speaks the Anthropic Messages API, the OpenAI Responses API and the Gemini API (streaming and
not), answers from a JSON script, and records every request it receives. Standard library only.

    python3 server.py [--script FILE] [--port-file FILE] [--log FILE] [--unauthorized]

Listens on 127.0.0.1 on a port the OS picks; prints ``PORT=<n>`` as its first stdout line and
writes the bare number to ``--port-file`` if given. See README.md for the script format.

Control endpoints (no API key needed):
    GET  /_requests         every recorded request, as a JSON list
    POST /_requests/clear   forget the recorded requests
    POST /_script           replace the script (body: the script JSON)
    POST /_mode             {"unauthorized": true|false}: answer every model request with 401
    GET  /_health           {"ok": true}
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

MAX_BODY = 64 * 1024 * 1024
MAX_DELAY = 60.0

# ---------------------------------------------------------------------------------------------
# Script


def normalise_script(script):
    """Accept a bare list of turns, {"turns": [...]}, or {"replies": [{"when": ..., "turns": ...}]}."""
    if script is None:
        return {"replies": []}
    if isinstance(script, list):
        return {"replies": [{"turns": script}]}
    if not isinstance(script, dict):
        raise ValueError("script must be a JSON list or object")
    if "replies" in script:
        replies = script["replies"]
    elif "turns" in script:
        replies = [{"turns": script["turns"], **({"when": script["when"]} if "when" in script else {})}]
    else:
        raise ValueError('script object needs "turns" or "replies"')
    if not isinstance(replies, list):
        raise ValueError('"replies" must be a list')
    for reply in replies:
        if not isinstance(reply, dict) or not isinstance(reply.get("turns"), list):
            raise ValueError('each reply needs a "turns" list')
        for turn in reply["turns"]:
            if not isinstance(turn, dict):
                raise ValueError("each turn must be an object")
            if "tool" in turn and turn["tool"] not in ("write_file", "shell", "mcp"):
                raise ValueError(f"unknown tool {turn['tool']!r} (write_file, shell or mcp)")
            if turn.get("tool") == "mcp" and not (turn.get("server") and turn.get("name")):
                raise ValueError('an "mcp" turn needs "server" and "name"')
            if "tool" not in turn and "text" not in turn and "error" not in turn:
                raise ValueError('a turn needs "tool", "text" or "error"')
    out = dict(script) if isinstance(script, dict) else {}
    out["replies"] = replies
    return out


class State:
    def __init__(self, script, log_path, unauthorized):
        self.lock = threading.Lock()
        self.script = normalise_script(script)
        self.requests = []
        self.log_path = log_path
        self.unauthorized = unauthorized
        self.seq = 0

    def record(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")
            return self.seq

    def pick_turn(self, prompt, step):
        """The turn for this step of the conversation that started with `prompt`."""
        with self.lock:
            replies = self.script["replies"]
        for reply in replies:
            when = reply.get("when")
            if when is None or (prompt is not None and when in prompt):
                turns = reply["turns"]
                if step < len(turns):
                    return turns[step]
                return {"text": f"(script exhausted after {len(turns)} turns)"}
        return {"text": "(no scripted reply matches this prompt)"}


STATE: State  # set in main()


def resolve_path(path, cwd):
    if os.path.isabs(path) or not cwd:
        return path
    return os.path.join(cwd, path)


def turn_usage(turn):
    usage = turn.get("usage") or {}
    return int(usage.get("input_tokens", 100)), int(usage.get("output_tokens", 20))


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


def text_of(value):
    """All strings inside a JSON value, joined (for prompt matching and cwd discovery)."""
    out = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(value)
    return "\n".join(out)


CWD_PATTERNS = [
    re.compile(r"<cwd>([^<\n]+)</cwd>"),
    re.compile(r"(?:Primary working directory|Working directory): *(/[^\n]*)"),
    re.compile(r"I'm currently working in the directory: *(/[^\n]*)"),
    re.compile(r"working directory(?: is)?:? *`?(/[^\s`\n]+)`?", re.IGNORECASE),
]


def prompt_text(value):
    """The "text" fields inside a message's content (a string content is itself the text)."""
    if isinstance(value, str):
        return value
    out = []

    def walk(v):
        if isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                if k == "text" and isinstance(x, str):
                    out.append(x)
                elif isinstance(x, (list, dict)):
                    walk(x)

    walk(value)
    return "\n".join(out)


def find_cwd(blob):
    for pat in CWD_PATTERNS:
        m = pat.search(blob)
        if m:
            return m.group(1).strip().rstrip(".")
    return None


# ---------------------------------------------------------------------------------------------
# Anthropic Messages API


def anthropic_conversation(body):
    """(latest prompt text, number of assistant turns since it)."""
    messages = body.get("messages") or []
    last_prompt_idx = None
    for i, m in enumerate(messages):
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            last_prompt_idx = i
        elif isinstance(content, list) and not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            last_prompt_idx = i
    if last_prompt_idx is None:
        return None, 0
    prompt = prompt_text(messages[last_prompt_idx].get("content"))
    step = sum(1 for m in messages[last_prompt_idx + 1 :] if m.get("role") == "assistant" and not is_tool_search_only(m))
    return prompt, step


def is_tool_search_only(message):
    """An assistant message that only loads deferred tools (the server's own ToolSearch step)."""
    content = message.get("content")
    if not isinstance(content, list):
        return False
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    return bool(uses) and all(b.get("name") == "ToolSearch" for b in uses)


def anthropic_blocks(turn, body, cwd):
    """Content blocks of the assistant message for a turn, mapped to Claude Code's tools."""
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    blocks = []
    if turn.get("text") and turn.get("tool"):
        blocks.append({"type": "text", "text": turn["text"]})
    tool = turn.get("tool")
    if tool == "write_file":
        if "Write" in tools:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": new_id("toolu_"),
                    "name": "Write",
                    "input": {"file_path": resolve_path(turn["path"], cwd), "content": turn["content"]},
                }
            )
        else:
            blocks.append({"type": "text", "text": "(the request offers no Write tool)"})
    elif tool == "shell":
        if "Bash" in tools:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": new_id("toolu_"),
                    "name": "Bash",
                    "input": {"command": turn["command"], "description": turn.get("description", "Run a command")},
                }
            )
        else:
            blocks.append({"type": "text", "text": "(the request offers no Bash tool)"})
    elif tool == "mcp":
        name = f"mcp__{turn['server']}__{turn['name']}"
        if name in tools:
            blocks.append({"type": "tool_use", "id": new_id("toolu_"), "name": name, "input": turn.get("arguments", {})})
        elif "ToolSearch" in tools:
            # Claude Code defers MCP tools behind ToolSearch: load the tool first; the same turn
            # is answered again once the tool is listed.
            query = {"query": f"select:{name}", "max_results": 1}
            blocks.append({"type": "tool_use", "id": new_id("toolu_"), "name": "ToolSearch", "input": query})
        else:
            blocks.append({"type": "text", "text": f"(the request offers no {name} tool)"})
    else:
        blocks.append({"type": "text", "text": turn.get("text", "")})
    return blocks


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def anthropic_response(turn, body, cwd, stream):
    model = body.get("model", "scripted")
    blocks = anthropic_blocks(turn, body, cwd)
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    inp, outp = turn_usage(turn)
    msg_id = new_id("msg_")
    usage = {
        "input_tokens": inp,
        "output_tokens": outp,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if not stream:
        return "application/json", json.dumps(
            {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
        )
    parts = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
        )
    ]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            parts.append(sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}))
            parts.append(sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}))
        else:
            start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
            parts.append(sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
            parts.append(
                sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}},
                )
            )
        parts.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    parts.append(
        sse(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": outp}},
        )
    )
    parts.append(sse("message_stop", {"type": "message_stop"}))
    return "text/event-stream", "".join(parts)


def anthropic_error(status, kind, message):
    return status, json.dumps({"type": "error", "error": {"type": kind, "message": message}})


# ---------------------------------------------------------------------------------------------
# OpenAI Responses API (as Codex uses it)

RESPONSES_TOOL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")


def responses_conversation(body):
    items = body.get("input")
    if isinstance(items, str):
        return items, 0
    items = items or []
    last = None
    for i, it in enumerate(items):
        if isinstance(it, dict) and it.get("type", "message") == "message" and it.get("role") == "user":
            txt = text_of(it.get("content"))
            # Codex sends its environment context and instructions as user messages too.
            if "<environment_context>" in txt or "<user_instructions>" in txt or "# AGENTS.md" in txt:
                continue
            last = i
    if last is None:
        return None, 0
    prompt = prompt_text(items[last].get("content"))
    step = sum(1 for it in items[last + 1 :] if isinstance(it, dict) and it.get("type") in RESPONSES_TOOL_ITEMS)
    return prompt, step


def responses_tools(body):
    """Tools by name: the request's `tools`, and those Codex lists in `additional_tools` input
    items (its "code mode" models get a namespaced custom `exec` tool there instead)."""
    out = {}

    def add(tools, namespace=None):
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                add(t.get("tools"), t.get("name"))
                continue
            name = t.get("name") or (t.get("function") or {}).get("name") or t.get("type")
            out.setdefault(name, {**t, "_namespace": namespace})

    add(body.get("tools"))
    items = body.get("input")
    if isinstance(items, list):
        for it in items:
            # Code-mode tool lists, and deferred tools a client-side tool search has loaded.
            if isinstance(it, dict) and it.get("type") in ("additional_tools", "tool_search_output"):
                add(it.get("tools"))
    return out


def code_mode_call(js):
    """A call of Codex's code-mode `exec` tool: JavaScript that calls the nested tools."""
    return {"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": new_id("call_"), "name": "exec", "input": js}


def shell_call_item(command, tools):
    call_id = new_id("call_")
    if "exec" in tools and tools["exec"].get("type") == "custom" and "exec_command" not in tools:
        js = f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});\ntext(r.output);\n"
        return code_mode_call(js)
    if "shell" in tools and tools["shell"].get("type") == "function":
        args = {"command": ["bash", "-lc", command]}
        return {"type": "function_call", "id": new_id("fc_"), "call_id": call_id, "name": "shell", "arguments": json.dumps(args)}
    if "shell_command" in tools:
        return {"type": "function_call", "id": new_id("fc_"), "call_id": call_id, "name": "shell_command", "arguments": json.dumps({"command": command})}
    if "exec_command" in tools:
        return {"type": "function_call", "id": new_id("fc_"), "call_id": call_id, "name": "exec_command", "arguments": json.dumps({"cmd": command})}
    if "local_shell" in tools:
        return {
            "type": "local_shell_call",
            "id": new_id("lsh_"),
            "call_id": call_id,
            "status": "completed",
            "action": {"type": "exec", "command": ["bash", "-lc", command], "env": {}},
        }
    return None


def responses_items(turn, body, cwd):
    tools = responses_tools(body)
    items = []
    tool = turn.get("tool")
    if tool == "write_file":
        patch = "*** Begin Patch\n*** Add File: {}\n{}*** End Patch\n".format(
            turn["path"], "".join("+" + line + "\n" for line in turn["content"].split("\n")[: -1 if turn["content"].endswith("\n") else None])
        )
        ap = tools.get("apply_patch")
        if ap is None and "exec" in tools and tools["exec"].get("type") == "custom":
            items.append(code_mode_call(f"text(await tools.apply_patch({json.dumps(patch)}));\n"))
        elif ap is not None and ap.get("type") == "custom":
            items.append({"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": new_id("call_"), "name": "apply_patch", "input": patch})
        elif ap is not None:
            items.append(
                {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"), "name": "apply_patch", "arguments": json.dumps({"input": patch})}
            )
        else:
            item = shell_call_item("apply_patch <<'EOF'\n" + patch + "EOF", tools)
            items.append(item or message_item("(the request offers no apply_patch or shell tool)"))
    elif tool == "shell":
        item = shell_call_item(turn["command"], tools)
        items.append(item or message_item("(the request offers no shell tool)"))
    elif tool == "mcp":
        namespace = f"mcp__{turn['server']}"
        args = json.dumps(turn.get("arguments", {}))
        t = tools.get(turn["name"])
        if t is not None and t.get("_namespace") == namespace:
            call = {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"), "name": turn["name"], "namespace": namespace, "arguments": args}
            items.append(call)
        elif f"{namespace}__{turn['name']}" in tools:
            name = f"{namespace}__{turn['name']}"
            items.append({"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"), "name": name, "arguments": args})
        elif "exec" in tools and tools["exec"].get("type") == "custom" and "exec_command" not in tools:
            # Code mode: nested tools, MCP ones included, are methods of `tools` in the script.
            ident = re.sub(r"[^A-Za-z0-9_$]", "_", f"{namespace}__{turn['name']}")
            items.append(code_mode_call(f"text(await tools.{ident}({args}));\n"))
        elif "tool_search" in tools and tools["tool_search"].get("execution") == "client":
            # Codex defers MCP tools behind its client-side tool search: search first; the same
            # turn is answered again once the search output has loaded the tool.
            items.append(
                {"type": "tool_search_call", "id": new_id("ts_"), "call_id": new_id("call_"), "status": "completed",
                 "execution": "client", "arguments": {"query": turn["name"]}}
            )
        else:
            items.append(message_item(f"(the request offers no {namespace}__{turn['name']} tool)"))
    else:
        items.append(message_item(turn.get("text", "")))
    return items


def message_item(text):
    return {
        "type": "message",
        "id": new_id("msg_"),
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def responses_response(turn, body, cwd, stream):
    model = body.get("model", "scripted")
    items = responses_items(turn, body, cwd)
    inp, outp = turn_usage(turn)
    resp_id = new_id("resp_")
    created = int(time.time())
    usage = {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": outp,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inp + outp,
    }
    base = {"id": resp_id, "object": "response", "created_at": created, "model": model}
    final = {**base, "status": "completed", "output": items, "usage": usage}
    if not stream:
        return "application/json", json.dumps(final)
    seq = iter(range(1_000_000))
    parts = []

    def ev(kind, **data):
        parts.append(f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': next(seq), **data})}\n\n")

    ev("response.created", response={**base, "status": "in_progress", "output": []})
    ev("response.in_progress", response={**base, "status": "in_progress", "output": []})
    for idx, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            ev("response.output_item.added", output_index=idx, item={**item, "status": "in_progress", "content": []})
            part0 = {"type": "output_text", "text": "", "annotations": []}
            ev("response.content_part.added", item_id=item["id"], output_index=idx, content_index=0, part=part0)
            ev("response.output_text.delta", item_id=item["id"], output_index=idx, content_index=0, delta=text)
            ev("response.output_text.done", item_id=item["id"], output_index=idx, content_index=0, text=text)
            ev("response.content_part.done", item_id=item["id"], output_index=idx, content_index=0, part={**part0, "text": text})
        elif item["type"] == "function_call":
            ev("response.output_item.added", output_index=idx, item={**item, "arguments": "", "status": "in_progress"})
            ev("response.function_call_arguments.delta", item_id=item["id"], output_index=idx, delta=item["arguments"])
            ev("response.function_call_arguments.done", item_id=item["id"], output_index=idx, arguments=item["arguments"])
        elif item["type"] == "custom_tool_call":
            ev("response.output_item.added", output_index=idx, item={**item, "input": ""})
            ev("response.custom_tool_call_input.delta", item_id=item["id"], output_index=idx, delta=item["input"])
            ev("response.custom_tool_call_input.done", item_id=item["id"], output_index=idx, input=item["input"])
        else:
            ev("response.output_item.added", output_index=idx, item=item)
        ev("response.output_item.done", output_index=idx, item=item)
    ev("response.completed", response=final)
    return "text/event-stream", "".join(parts)


def openai_error(status, code, message, kind="invalid_request_error"):
    return status, json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


# ---------------------------------------------------------------------------------------------
# Gemini API


def gemini_conversation(body):
    contents = body.get("contents") or []
    last = None
    for i, c in enumerate(contents):
        if c.get("role", "user") != "user":
            continue
        parts = c.get("parts") or []
        if any("functionResponse" in p for p in parts if isinstance(p, dict)):
            continue
        if any("text" in p for p in parts if isinstance(p, dict)):
            last = i
    if last is None:
        return None, 0
    prompt = prompt_text(contents[last].get("parts"))
    step = sum(1 for c in contents[last + 1 :] if c.get("role") == "model" and any("functionCall" in p for p in c.get("parts") or []))
    return prompt, step


def gemini_tools(body):
    names = set()
    for t in body.get("tools") or []:
        for fd in t.get("functionDeclarations") or t.get("function_declarations") or []:
            names.add(fd.get("name"))
    return names


def gemini_parts(turn, body, cwd):
    tools = gemini_tools(body)
    parts = []
    tool = turn.get("tool")
    if turn.get("text") and tool:
        parts.append({"text": turn["text"]})
    if tool == "write_file":
        if "write_file" in tools:
            parts.append({"functionCall": {"name": "write_file", "args": {"file_path": resolve_path(turn["path"], cwd), "content": turn["content"]}}})
        else:
            parts.append({"text": "(the request offers no write_file tool)"})
    elif tool == "shell":
        if "run_shell_command" in tools:
            args = {"command": turn["command"], "description": turn.get("description", "Run a command")}
            parts.append({"functionCall": {"name": "run_shell_command", "args": args}})
        else:
            parts.append({"text": "(the request offers no run_shell_command tool)"})
    elif tool == "mcp":
        name = next((n for n in (f"mcp_{turn['server']}_{turn['name']}", turn["name"]) if n in tools), None)
        if name:
            parts.append({"functionCall": {"name": name, "args": turn.get("arguments", {})}})
        else:
            parts.append({"text": f"(the request offers no mcp_{turn['server']}_{turn['name']} tool)"})
    else:
        parts.append({"text": turn.get("text", "")})
    return parts


def gemini_chunk(parts, model, inp, outp, finish=True):
    cand = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = "STOP"
    return {
        "candidates": [cand],
        "usageMetadata": {"promptTokenCount": inp, "candidatesTokenCount": outp, "totalTokenCount": inp + outp},
        "modelVersion": model,
        "responseId": new_id(""),
    }


def gemini_json_answer(body):
    """An answer for Gemini CLI's structured side requests (router, next-speaker check, ...)."""
    cfg = body.get("generationConfig") or {}
    schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema") or {}
    props = (schema.get("properties") or {}) if isinstance(schema, dict) else {}
    if "model_choice" in props:
        return {"reasoning": "scripted", "model_choice": "flash"}
    if "next_speaker" in props:
        return {"reasoning": "scripted", "next_speaker": "user"}
    out = {}
    for k, v in props.items():
        t = v.get("type") if isinstance(v, dict) else None
        t = t.lower() if isinstance(t, str) else t
        out[k] = {"string": "scripted", "boolean": False, "number": 0, "integer": 0, "array": [], "object": {}}.get(t, "scripted")
    return out


def gemini_error(status, message, status_name):
    return status, json.dumps({"error": {"code": status, "message": message, "status": status_name}})


# ---------------------------------------------------------------------------------------------
# HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-model-server/1"

    def log_message(self, fmt, *args):  # quiet; requests are recorded instead
        if os.environ.get("MODEL_SERVER_VERBOSE"):
            sys.stderr.write("model-server: " + (fmt % args) + "\n")

    def send(self, status, ctype, text, extra_headers=None):
        data = text.encode("utf-8") if isinstance(text, str) else text
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if ctype == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("body too large")
        raw = self.rfile.read(n) if n > 0 else b""
        if self.headers.get("Content-Encoding", "").lower() in ("gzip",):
            import gzip

            raw = gzip.decompress(raw)
        elif self.headers.get("Content-Encoding", "").lower() == "zstd":
            raise ValueError("zstd request bodies are not supported")
        return raw

    def do_HEAD(self):
        self.record(None, api="probe", kind="probe")
        self.send(200, "text/plain", "")

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/_requests":
            with STATE.lock:
                data = json.dumps(STATE.requests)
            return self.send(200, "application/json", data)
        if path == "/_health":
            return self.send(200, "application/json", '{"ok": true}')
        if path in ("/", ""):
            self.record(None, api="probe", kind="probe")
            return self.send(200, "text/plain", "scripted model server\n")
        if re.fullmatch(r"(/v1|/v1beta)?/models", path):
            # A model list, if a CLI asks: an empty one leaves it with its built-in defaults.
            self.record(None, api="probe", kind="probe")
            return self.send(200, "application/json", json.dumps({"object": "list", "data": [], "models": []}))
        self.record(None, api="unknown", kind="unknown")
        return self.send(404, "application/json", json.dumps({"error": {"message": f"scripted model server: no route for GET {path}"}}))

    def record(self, body, api, kind, **extra):
        entry = {
            "time": time.time(),
            "method": self.command,
            "path": self.path,
            "api": api,
            "kind": kind,
            "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("authorization", "x-api-key", "x-goog-api-key")},
            "body": body,
        }
        entry.update(extra)
        return STATE.record(entry)

    def do_POST(self):
        try:
            return self.post()
        except (BrokenPipeError, ConnectionResetError):
            return None
        except Exception as e:  # a server bug must answer, not hang the client
            import traceback

            traceback.print_exc()
            msg = f"scripted model server: internal error: {type(e).__name__}: {e}"
            try:
                return self.send(500, "application/json", json.dumps({"error": {"message": msg}}))
            except OSError:
                return None

    def post(self):
        parts = urlsplit(self.path)
        path, query = parts.path, parts.query
        try:
            raw = self.read_body()
            body = json.loads(raw) if raw.strip() else {}
        except (ValueError, json.JSONDecodeError) as e:
            self.record(None, api="unknown", kind="bad-request")
            return self.send(400, "application/json", json.dumps({"error": {"message": f"scripted model server: unreadable body: {e}"}}))

        if path == "/_script":
            try:
                new = normalise_script(body)
            except ValueError as e:
                return self.send(400, "application/json", json.dumps({"error": str(e)}))
            with STATE.lock:
                STATE.script = new
            return self.send(200, "application/json", '{"ok": true}')
        if path == "/_requests/clear":
            with STATE.lock:
                STATE.requests.clear()
            return self.send(200, "application/json", '{"ok": true}')
        if path == "/_mode":
            with STATE.lock:
                STATE.unauthorized = bool(body.get("unauthorized"))
            return self.send(200, "application/json", '{"ok": true}')

        if re.fullmatch(r"(/v1)?/messages/count_tokens", path):
            self.record(body, api="anthropic", kind="count_tokens")
            if STATE.unauthorized:
                status, text = anthropic_error(401, "authentication_error", "invalid x-api-key")
                return self.send(status, "application/json", text)
            n = max(1, len(json.dumps(body)) // 4)
            return self.send(200, "application/json", json.dumps({"input_tokens": n}))
        if re.fullmatch(r"(/v1)?/messages", path):
            return self.anthropic(body)
        if re.fullmatch(r"(/v1)?/responses", path):
            return self.openai_responses(body)
        m = re.fullmatch(r"(?:/v1beta|/v1|/v1alpha)?/models/([^/:]+):(streamGenerateContent|generateContent|countTokens)", path)
        if m:
            return self.gemini(body, m.group(1), m.group(2), query)
        self.record(body, api="unknown", kind="unknown")
        return self.send(404, "application/json", json.dumps({"error": {"message": f"scripted model server: no route for POST {path}"}}))

    # -- per API --------------------------------------------------------------------------

    def delay(self, turn):
        d = float(turn.get("delay", 0) or 0)
        if d > 0:
            time.sleep(min(d, MAX_DELAY))

    def anthropic(self, body):
        stream = bool(body.get("stream"))
        if STATE.unauthorized:
            self.record(body, api="anthropic", kind="unauthorized")
            status, text = anthropic_error(401, "authentication_error", "invalid x-api-key")
            return self.send(status, "application/json", text, {"request-id": new_id("req_")})
        if not body.get("tools"):
            # Side requests (quota probe, titles, summaries): a short text answer.
            self.record(body, api="anthropic", kind="side")
            side = {"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 1}}
            ctype, text = anthropic_response(side, body, None, stream)
            return self.send(200, ctype, text)
        prompt, step = anthropic_conversation(body)
        blob = text_of(body.get("system")) + "\n" + text_of(body.get("messages"))
        cwd = find_cwd(blob) or STATE.script.get("cwd")
        turn = STATE.pick_turn(prompt, step)
        self.record(body, api="anthropic", kind="main", step=step, prompt=prompt, turn=turn, cwd=cwd)
        if "error" in turn:
            status, text = anthropic_error(int(turn.get("status", 500)), "api_error", turn["error"])
            return self.send(status, "application/json", text)
        self.delay(turn)
        ctype, text = anthropic_response(turn, body, cwd, stream)
        return self.send(200, ctype, text, {"request-id": new_id("req_")})

    def openai_responses(self, body):
        stream = bool(body.get("stream"))
        if STATE.unauthorized:
            self.record(body, api="responses", kind="unauthorized")
            status, text = openai_error(401, "invalid_api_key", "Incorrect API key provided.")
            return self.send(status, "application/json", text)
        if not responses_tools(body):
            self.record(body, api="responses", kind="side")
            side = {"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 1}}
            ctype, text = responses_response(side, body, None, stream)
            return self.send(200, ctype, text)
        prompt, step = responses_conversation(body)
        blob = text_of(body.get("instructions")) + "\n" + text_of(body.get("input"))
        cwd = find_cwd(blob) or STATE.script.get("cwd")
        turn = STATE.pick_turn(prompt, step)
        self.record(body, api="responses", kind="main", step=step, prompt=prompt, turn=turn, cwd=cwd)
        if "error" in turn:
            status, text = openai_error(int(turn.get("status", 500)), "server_error", turn["error"], "server_error")
            return self.send(status, "application/json", text)
        self.delay(turn)
        ctype, text = responses_response(turn, body, cwd, stream)
        return self.send(200, ctype, text)

    def gemini(self, body, model, method, query):
        if STATE.unauthorized:
            self.record(body, api="gemini", kind="unauthorized")
            status, text = gemini_error(401, "API key not valid. Please pass a valid API key.", "UNAUTHENTICATED")
            return self.send(status, "application/json", text)
        if method == "countTokens":
            self.record(body, api="gemini", kind="count_tokens")
            n = max(1, len(json.dumps(body)) // 4)
            return self.send(200, "application/json", json.dumps({"totalTokens": n}))
        stream = method == "streamGenerateContent"
        cfg = body.get("generationConfig") or {}
        if not body.get("tools") or cfg.get("responseMimeType") == "application/json":
            self.record(body, api="gemini", kind="side", model=model)
            if cfg.get("responseMimeType") == "application/json":
                parts = [{"text": json.dumps(gemini_json_answer(body))}]
            else:
                parts = [{"text": "ok"}]
            chunk = gemini_chunk(parts, model, 10, 1)
            if stream:
                return self.send(200, "text/event-stream", "data: " + json.dumps(chunk) + "\r\n\r\n")
            return self.send(200, "application/json", json.dumps(chunk))
        prompt, step = gemini_conversation(body)
        blob = text_of(body.get("systemInstruction")) + "\n" + text_of(body.get("contents"))
        cwd = find_cwd(blob) or STATE.script.get("cwd")
        turn = STATE.pick_turn(prompt, step)
        self.record(body, api="gemini", kind="main", model=model, step=step, prompt=prompt, turn=turn, cwd=cwd)
        if "error" in turn:
            status, text = gemini_error(int(turn.get("status", 500)), turn["error"], "INTERNAL")
            return self.send(status, "application/json", text)
        self.delay(turn)
        inp, outp = turn_usage(turn)
        chunk = gemini_chunk(gemini_parts(turn, body, cwd), model, inp, outp)
        if stream:
            return self.send(200, "text/event-stream", "data: " + json.dumps(chunk) + "\r\n\r\n")
        return self.send(200, "application/json", json.dumps(chunk))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", help="JSON script file")
    ap.add_argument("--port-file", help="write the chosen port here")
    ap.add_argument("--log", help="append every request as a JSON line here")
    ap.add_argument("--unauthorized", action="store_true", help="answer every model request with 401")
    ap.add_argument("--port", type=int, default=0, help="port (default: chosen by the OS)")
    args = ap.parse_args(argv)

    script = None
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
    global STATE
    STATE = State(script, args.log, args.unauthorized)

    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"PORT={port}", flush=True)

    def stop(*_):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    httpd.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
