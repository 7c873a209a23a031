"""The SDK's error classes for bad input, bad and revoked keys, unknown runs; the problem+json
body behind them; keys managed while the server runs."""

from __future__ import annotations

import pytest
from oz_agent_sdk import (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
)

from conftest import NEW_SDK, create_run, list_page, unique

PROBLEM_FIELDS = {"type", "title", "status", "detail", "instance", "error", "retryable", "trace_id"}


def check_problem(err, status: int, code: str) -> None:
    assert err.status_code == status
    assert err.response.headers["content-type"].startswith("application/problem+json")
    body = err.body
    assert isinstance(body, dict) and PROBLEM_FIELDS <= set(body), body
    assert body["status"] == status
    assert body["type"].endswith(code), body["type"]
    assert body["error"] == f"{body['title']} ({body['detail']})"
    assert isinstance(body["retryable"], bool)
    assert body["trace_id"]


# ---- create: bad input ----------------------------------------------------------------------

BAD_CREATES = {
    "no prompt": {},
    "empty prompt": {"prompt": ""},
    "blank prompt": {"prompt": "  \n "},
    "skill_spec without owner": {"prompt": "p", "config": {"skill_spec": "tools:deploy"}},
    "skill_spec without skill": {"prompt": "p", "config": {"skill_spec": "acme/tools:"}},
    "skill_spec without colon": {"prompt": "p", "config": {"skill_spec": "acme/tools"}},
    "skill_spec with spaces": {"prompt": "p", "config": {"skill_spec": "acme/tools:two words"}},
    "skill_spec escaping": {"prompt": "p", "config": {"skill_spec": "acme/tools:../SKILL.md"}},
    "bad top-level skill": {"skill": "not a skill"},
    "unknown environment": {"prompt": "p", "config": {"environment_id": "no-such-env"}},
    "empty environment": {"prompt": "p", "config": {"environment_id": ""}},
    "mcp server with nothing": {"prompt": "p", "config": {"mcp_servers": {"x": {}}}},
    "mcp server with url and command": {"prompt": "p", "config": {"mcp_servers": {"x": {"url": "https://a.example", "command": "npx"}}}},
    "mcp server with warp_id and url": {"prompt": "p", "config": {"mcp_servers": {"x": {"warp_id": "abc", "url": "https://a.example"}}}},
    "mcp server with a non-http url": {"prompt": "p", "config": {"mcp_servers": {"x": {"url": "ftp://files.example"}}}},
    "mcp server with an empty command": {"prompt": "p", "config": {"mcp_servers": {"x": {"command": ""}}}},
    "empty title": {"prompt": "p", "title": "  "},
}


@pytest.mark.parametrize("body", BAD_CREATES.values(), ids=BAD_CREATES.keys())
@pytest.mark.parametrize("path", [None, "/agent/run", "/agent/runs"])
def test_bad_create_is_400(client, body, path):
    with pytest.raises(BadRequestError) as e:
        create_run(client, path=path, **body)
    check_problem(e.value, 400, "invalid_request")


BAD_METADATA = {
    "bad key": {"bad key": "v"},
    "empty key": {"": "v"},
    "long key": {"k" * 65: "v"},
    "long value": {"k": "v" * 257},
    "NUL in value": {"k": "a\u0000b"},
    "21 keys": {f"k{i}": "v" for i in range(21)},
}


@pytest.mark.parametrize("metadata", BAD_METADATA.values(), ids=BAD_METADATA.keys())
def test_bad_metadata_is_400(client, metadata):
    with pytest.raises(BadRequestError):
        create_run(client, prompt="p", metadata=metadata)


def test_metadata_limits_are_inclusive(client):
    ok = {f"k{i}": "v" * 256 for i in range(19)} | {"K" * 64: ""}
    run = create_run(client, prompt="twenty keys", metadata=ok).run_id
    got = client.agent.runs.retrieve(run)
    assert (got.metadata if NEW_SDK else got.model_extra["metadata"]) == ok


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": 123},
        {"prompt": "p", "config": "fast"},
        {"prompt": "p", "config": {"mcp_servers": ["x"]}},
        {"prompt": "p", "metadata": {"k": 1}},
        {"prompt": "p", "title": ["t"]},
    ],
)
def test_wrong_types_are_400(client, body):
    with pytest.raises(BadRequestError) as e:
        client.post("/agent/runs", body=body, cast_to=object)
    check_problem(e.value, 400, "invalid_request")


def test_fields_of_the_document_runledger_does_not_use_are_accepted(client):
    run = create_run(client, prompt="with extras", extra_body={"interactive": False, "conversation_id": "c"})
    assert run.state == "QUEUED"


def test_unknown_request_fields_are_400_naming_them(client):
    with pytest.raises(BadRequestError) as e:
        create_run(client, prompt="with extras", extra_body={"interactive": False, "future_field": {"a": 1}})
    check_problem(e.value, 400, "invalid_request")
    assert e.value.body["detail"].startswith('unknown field "future_field"')


@pytest.mark.parametrize(
    "query",
    [{"limit": 0}, {"limit": 501}, {"limit": -5}, {"state": ["DONE"]}, {"sort_order": "sideways"}, {"created_after": "yesterday"}],
)
def test_bad_list_queries_are_400(client, query):
    with pytest.raises(BadRequestError) as e:
        list_page(client, extra_query=query)
    check_problem(e.value, 400, "invalid_request")


# ---- authentication ---------------------------------------------------------------------------


@pytest.mark.parametrize("secret", ["rl_" + "A" * 43, "not-a-runledger-key", "rl_", "Bearer x"])
def test_bad_key_is_401(server, secret):
    c = server.client(secret)
    with pytest.raises(AuthenticationError) as e:
        c.agent.runs.list()
    check_problem(e.value, 401, "authentication_required")
    with pytest.raises(AuthenticationError):
        c.agent.run(prompt="nope")
    with pytest.raises(AuthenticationError):
        c.agent.runs.retrieve("01KAQZZZZZZZZZZZZZZZZZZZZZ")


def _new_key(admin_client, name: str, kind: str = "personal") -> dict:
    made = admin_client.post("/admin/keys", body={"name": name, "kind": kind}, cast_to=object)
    assert made["key"].startswith("rl_") and made["kind"] == kind and made["revoked_at"] is None
    return made


def test_key_revoked_through_the_admin_api_is_401(server, client):
    made = _new_key(client, unique("to-revoke"), kind="agent")
    victim = server.client(made["key"])
    run = create_run(victim, prompt="before revocation").run_id
    assert client.agent.runs.retrieve(run).creator.type == "service_account"

    revoked = client.post(f"/admin/keys/{made['id']}/revoke", body={}, cast_to=object)
    assert revoked["id"] == made["id"] and revoked["revoked_at"]
    with pytest.raises(AuthenticationError):
        victim.agent.runs.retrieve(run)
    with pytest.raises(AuthenticationError):
        create_run(victim, prompt="after revocation")
    # Its runs stay, and other keys still work.
    assert client.agent.runs.retrieve(run).run_id == run
    listed = client.get("/admin/keys", cast_to=object)["keys"]
    assert next(k for k in listed if k["id"] == made["id"])["revoked_at"]


def test_key_revoked_with_the_cli_while_the_server_runs_is_401(server, client):
    made = _new_key(client, unique("cli-revoke"))
    victim = server.client(made["key"])
    list_page(victim, limit=1)
    proc = server.cli(
        "keys", "revoke", made["id"], "--url", server.root_url, env={"RUNLEDGER_ADMIN_KEY": server.admin.secret}
    )
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(AuthenticationError):
        list_page(victim, limit=1)
    # The CLI without an admin key explains itself instead of touching the held directory.
    proc = server.cli("keys", "revoke", server.personal.id, "--url", server.root_url, check=False)
    assert proc.returncode != 0 and "admin" in proc.stderr.lower()
    list_page(server.client(server.personal), limit=1)


def test_admin_api_needs_an_admin_key(server):
    for key in (server.personal, server.agent):
        with pytest.raises(PermissionDeniedError) as e:
            server.client(key).get("/admin/keys", cast_to=object)
        check_problem(e.value, 403, "not_authorized")
        with pytest.raises(PermissionDeniedError):
            server.client(key).post(f"/admin/keys/{server.admin.id}/revoke", body={}, cast_to=object)
    # The admin key still works.
    server.client(server.admin).get("/admin/keys", cast_to=object)


# ---- unknown runs -----------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["01KAQZZZZZZZZZZZZZZZZZZZZZ", "00000000000000000000000000", "nope", "x" * 300])
def test_unknown_run_is_404(client, run_id):
    with pytest.raises(NotFoundError) as e:
        client.agent.runs.retrieve(run_id)
    check_problem(e.value, 404, "resource_not_found")
    with pytest.raises(NotFoundError):
        client.agent.runs.cancel(run_id)
    with pytest.raises(NotFoundError):
        client.get(f"/agent/runs/{run_id}/events", cast_to=object)
    with pytest.raises(NotFoundError):
        client.get(f"/agent/runs/{run_id}/transcript", cast_to=object)


def test_unknown_route_is_404_problem(client):
    with pytest.raises(NotFoundError) as e:
        client.get("/agent/no-such-thing", cast_to=object)
    check_problem(e.value, 404, "resource_not_found")
