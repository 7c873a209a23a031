#!/usr/bin/env python3
"""A minimal MCP server on stdio (newline-delimited JSON-RPC), standard library only.

    python3 mcp_server.py CALLS_FILE

Offers one tool, `record_marker` ({"text": string}), which appends its text as a line to
CALLS_FILE and answers "recorded: <text>". Lets a test check that a CLI passed an MCP server to
the model (the tool is listed) and that a model's call reached it (the line is in CALLS_FILE).
"""

import json
import sys

TOOL = {
    "name": "record_marker",
    "description": "Record a marker text (test tool).",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def answer(msg_id, result=None, error=None):
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def main():
    calls_file = sys.argv[1]
    for line in sys.stdin:  # ends when the client closes stdin
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:  # a notification
            continue
        params = msg.get("params") or {}
        if method == "initialize":
            answer(
                msg_id,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "probe", "version": "1.0.0"},
                },
            )
        elif method == "ping":
            answer(msg_id, {})
        elif method == "tools/list":
            answer(msg_id, {"tools": [TOOL]})
        elif method == "tools/call" and params.get("name") == TOOL["name"]:
            text = str((params.get("arguments") or {}).get("text", ""))
            with open(calls_file, "a", encoding="utf-8") as f:
                f.write(text + "\n")
            answer(msg_id, {"content": [{"type": "text", "text": f"recorded: {text}"}], "isError": False})
        elif method in ("resources/list", "resources/templates/list", "prompts/list"):
            key = {"resources/list": "resources", "resources/templates/list": "resourceTemplates", "prompts/list": "prompts"}[method]
            answer(msg_id, {key: []})
        else:
            answer(msg_id, error={"code": -32601, "message": f"method not found: {method}"})


if __name__ == "__main__":
    main()
