"""Create (both create paths), retrieve with the resolved config, the state progression, creators,
idempotency and environments — through the official client with strict validation."""

from __future__ import annotations

from datetime import datetime, timezone

import httpx
import pytest

from conftest import (
    cancel,
    NEW_SDK,
    create_run,
    list_all,
    poll,
    run_events,
    transcript,
    unique,
    wait_state,
)

FULL_CONFIG = {
    "name": "full-config-run",
    "model_id": "model-x",
    "base_prompt": "You are a careful engineer.",
    "environment_id": "fast",
    "skill_spec": "acme/tools:deploy",
    "mcp_servers": {
        "docs": {"url": "https://mcp.example.com/sse", "headers": {"X-Token": "secret-token"}},
        "local": {"command": "npx", "args": ["-y", "@acme/mcp-server"], "env": {"LOG_LEVEL": "debug"}},
        "shared": {"warp_id": "0f8e2a1c-3c0e-4d5e-9d1b-4f1e2b3c4d5e"},
    },
}
METADATA = {"team": "core", "ticket_id": "VIS-238", "build.number-1_x": "42"}


def check_full_config(run, prompt: str, title: str) -> None:
    assert run.prompt == prompt
    assert run.title == title
    c = run.agent_config
    assert c is not None
    assert c.name == "full-config-run"  # explicit name wins over the skill's name
    assert c.api_model_id == "model-x"
    assert c.base_prompt == "You are a careful engineer."
    assert c.environment_id == "fast"
    assert c.skill_spec == "acme/tools:deploy"
    servers = c.mcp_servers
    assert servers is not None and set(servers) == {"docs", "local", "shared"}
    assert servers["docs"].url == "https://mcp.example.com/sse"
    # Credentials are never echoed: names stay, values read `***` (docs/security.md).
    assert servers["docs"].headers == {"X-Token": "***"}
    assert "secret-token" not in run.model_dump_json()
    assert servers["docs"].command is None and servers["docs"].warp_id is None
    assert servers["local"].command == "npx"
    assert servers["local"].args == ["-y", "@acme/mcp-server"]
    assert servers["local"].env == {"LOG_LEVEL": "***"}
    assert servers["local"].url is None
    assert servers["shared"].warp_id == "0f8e2a1c-3c0e-4d5e-9d1b-4f1e2b3c4d5e"


@pytest.mark.parametrize("path", [None, "/agent/run", "/agent/runs"])
def test_create_with_full_config_and_retrieve(client, server, path):
    """`client.agent.run` (POST /agent/run on 0.10.1, /agent/runs on 0.15) and both paths
    explicitly through `client.post`, each strictly validated into `AgentRunResponse`."""
    prompt = f"Deploy the service\nthen check the dashboards ({path})"
    title = unique("Full config")
    created = create_run(client, path=path, prompt=prompt, title=title, config=FULL_CONFIG, metadata=METADATA)
    assert created.state == "QUEUED"
    assert created.run_id and created.task_id == created.run_id
    assert created.at_capacity is False

    run = client.agent.runs.retrieve(created.run_id)
    assert run.run_id == created.run_id and run.task_id == created.run_id
    check_full_config(run, prompt, title)
    assert run.source == "API"
    assert run.creator is not None
    assert run.creator.type == "user"
    assert run.creator.uid == server.admin.id
    assert run.creator.display_name == server.admin.name
    assert run.created_at.tzinfo is not None and run.updated_at >= run.created_at
    assert abs((datetime.now(timezone.utc) - run.created_at).total_seconds()) < 60
    if NEW_SDK:
        assert run.metadata == METADATA
    else:
        # 0.10.1's RunItem has no metadata field; strict validation keeps unknown fields.
        assert run.model_extra.get("metadata") == METADATA

    done = wait_state(client, created.run_id, "SUCCEEDED")
    check_full_config(done, prompt, title)


def test_sdk_create_method_uses_expected_path(server):
    """Which path `client.agent.run` posts to: /agent/run on 0.10.1, /agent/runs on 0.15."""
    seen: list[str] = []

    import httpx

    def hook(request: httpx.Request) -> None:
        seen.append(request.url.path)

    client = server.client(http_client=httpx.Client(event_hooks={"request": [hook]}))
    client.agent.run(prompt="which path?")
    assert seen == ["/api/v1/agent/runs" if NEW_SDK else "/api/v1/agent/run"]


def test_defaults_are_resolved(client):
    created = create_run(client, prompt="\n   Fix the flaky test in CI   \nIt fails one time in ten.")
    run = client.agent.runs.retrieve(created.run_id)
    assert run.title == "Fix the flaky test in CI"  # generated from the prompt's first line
    c = run.agent_config
    assert c is not None
    assert c.environment_id == "fast"  # the first configured environment
    assert c.api_model_id == "demo-model"  # the environment's model
    assert c.name is None and c.skill_spec is None and c.base_prompt is None
    assert not c.mcp_servers

    other = create_run(client, prompt="default model", config={"environment_id": "slow"})
    c = client.agent.runs.retrieve(other.run_id).agent_config
    assert c.environment_id == "slow" and c.api_model_id == "demo"
    assert cancel(client, other.run_id) == other.run_id


@pytest.mark.parametrize(
    "how,spec,name",
    [
        ("skill", "acme/tools:deploy", "deploy"),
        ("skill", "acme/tools:.claude/skills/release-notes/SKILL.md", "release-notes"),
        ("config", "acme/tools:triage", "triage"),
    ],
)
def test_name_comes_from_the_skill(client, how, spec, name):
    if how == "skill":
        created = create_run(client, skill=spec)  # no prompt: the skill is the task
    else:
        created = create_run(client, prompt="run the skill", config={"skill_spec": spec})
    run = client.agent.runs.retrieve(created.run_id)
    assert run.agent_config.name == name
    assert run.agent_config.skill_spec == spec
    assert created.run_id in [r.run_id for r in list_all(client, name=name)]
    if how == "skill":
        assert run.prompt == ""
        assert run.title  # always present, even without a prompt


def test_state_progression_queued_inprogress_succeeded(client):
    """QUEUED → INPROGRESS → SUCCEEDED, each seen by polling. The `single` environment runs one
    run at a time, so the second run is at capacity and observably QUEUED first."""
    first = create_run(client, prompt="occupy the environment", config={"environment_id": "single"})
    second = create_run(client, prompt="wait for a slot", config={"environment_id": "single"})
    assert first.state == "QUEUED" and second.state == "QUEUED"
    assert second.at_capacity is True

    seen: list[str] = []
    last = {}

    def observe():
        r = client.agent.runs.retrieve(second.run_id)
        if not seen or seen[-1] != r.state:
            seen.append(r.state)
        last["run"] = r
        return r

    poll(observe, lambda r: r.state == "SUCCEEDED", "the queued run to succeed", timeout=20, every=0.02)
    assert seen == ["QUEUED", "INPROGRESS", "SUCCEEDED"], seen
    run = last["run"]
    assert run.started_at is not None and run.started_at >= run.created_at
    assert run.updated_at >= run.started_at
    assert run.session_link and run.session_id and run.run_time and run.run_time.startswith("PT")
    assert run.status_message is None or run.status_message.message
    assert client.agent.runs.retrieve(first.run_id).state == "SUCCEEDED"

    kinds = [e["type"] for e in run_events(client, second.run_id)]
    assert kinds == ["Created", "Started", "Succeeded"]
    t = transcript(client, second.run_id)
    assert t["state"] == "SUCCEEDED"
    assert any("wait for a slot" in e["text"] for e in t["entries"])


def test_queued_and_inprogress_fields(client):
    created = create_run(client, prompt="long job", config={"environment_id": "long"})
    queued_or_running = client.agent.runs.retrieve(created.run_id)
    assert queued_or_running.state in ("QUEUED", "INPROGRESS")
    running = wait_state(client, created.run_id, "INPROGRESS")
    assert running.started_at is not None
    assert running.session_link and running.session_id
    assert cancel(client, created.run_id) == created.run_id


def test_creator_type_follows_the_key_kind(server):
    for key, kind in ((server.admin, "user"), (server.personal, "user"), (server.agent, "service_account")):
        c = server.client(key)
        created = create_run(c, prompt=f"created by {key.name}")
        # Every key of the instance sees every run; creator tells them apart.
        run = server.client(server.personal).agent.runs.retrieve(created.run_id)
        assert run.creator is not None
        assert run.creator.type == kind
        assert run.creator.uid == key.id
        assert run.creator.display_name == key.name


@pytest.mark.parametrize("path", [None, "/agent/run", "/agent/runs"])
def test_idempotency_key_returns_the_same_run(server, client, path):
    key = unique("idem")
    headers = {"Idempotency-Key": key}
    body = dict(prompt="exactly once please", title=unique("idempotent"))
    first = create_run(client, path=path, extra_headers=headers, **body)
    again = create_run(client, path=path, extra_headers=headers, **body)
    assert again.run_id == first.run_id
    # Through the other create path too: the key names the run, not the route.
    other_path = "/agent/run" if path != "/agent/run" else "/agent/runs"
    assert create_run(client, path=other_path, extra_headers=headers, **body).run_id == first.run_id

    # Without the header, or with another key, it is a new run.
    assert create_run(client, path=path, **body).run_id != first.run_id
    assert create_run(client, path=path, extra_headers={"Idempotency-Key": key + "-b"}, **body).run_id != first.run_id
    # Keys are scoped to the API key that used them.
    other = server.client(server.personal)
    assert create_run(other, path=path, extra_headers=headers, **body).run_id != first.run_id

    # The same key with a different body is a conflict, not a silent second run. The client
    # would retry a 409 twice by its own rules; `x-should-retry: false` makes it ask once.
    from oz_agent_sdk import ConflictError

    before = conflicts_answered(server)
    with pytest.raises(ConflictError) as e:
        create_run(client, path=path, extra_headers=headers, prompt="something else")
    assert e.value.status_code == 409
    assert e.value.response.headers["x-should-retry"] == "false"
    assert conflicts_answered(server) == before + 1


def conflicts_answered(server) -> int:
    """How many 409s the server has answered (its own request metrics)."""
    headers = {"Authorization": f"Bearer {server.admin.secret}"}
    text = httpx.get(f"{server.root_url}/metrics", headers=headers, timeout=5).text
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("runledger_http_request_duration_seconds_count{") and 'status="409"' in line
    )


def test_list_environments(client):
    if NEW_SDK:
        envs = client.agent.list_environments().environments
        ids = [e.uid for e in envs]
        fast = envs[0]
        assert fast.config.name == "Fast demo"
        assert fast.config.description == "demo agent, 300 ms"
        assert fast.setup_failed is False and fast.last_updated.tzinfo is not None
    else:
        data = client.get("/agent/environments", cast_to=object)
        ids = [e["uid"] for e in data["environments"]]
        assert data["environments"][0]["config"]["name"] == "Fast demo"
        assert data["environments"][0]["setup_failed"] is False
    assert ids == ["fast", "slow", "single", "long", "long1", "usage"]


def test_special_characters_round_trip_through_filters(client):
    """Values that need escaping in a query string and non-ASCII text, as the SDK sends them."""
    tag = unique("odd")
    title = f"Ünïcode títle {tag} — ÄÖÜ"
    prompt = "Prompt with & = + ? # / % and emoji 🚀"
    metadata = {"weird.key-1_x": "a b&c=d/é+%2F?#", "tag": tag}
    name = "name with spaces & symbols/é"
    created = create_run(client, prompt=prompt, title=title, config={"name": name}, metadata=metadata)
    run = client.agent.runs.retrieve(created.run_id)
    assert run.title == title and run.prompt == prompt and run.agent_config.name == name
    only = [created.run_id]
    assert [r.run_id for r in list_all(client, metadata=metadata)] == only
    assert [r.run_id for r in list_all(client, name=name)] == only
    assert [r.run_id for r in list_all(client, q="ünïcode títle " + tag)] == only  # case-insensitive
    assert [r.run_id for r in list_all(client, q="ÜNÏCODE TÍTLE " + tag.upper())] == only
    assert created.run_id in [r.run_id for r in list_all(client, q="& = + ? #")]
    assert created.run_id in [r.run_id for r in list_all(client, q="🚀")]


def test_request_usage_parses_on_retrieve_and_list(client):
    """`request_usage` (OpenAPI `RequestUsage`) is filled once known and parses strictly; a run
    without known costs leaves it out."""
    run_id = create_run(client, prompt=unique("usage"), config={"environment_id": "usage"}).run_id
    run = wait_state(client, run_id, "SUCCEEDED")
    usage = run.request_usage
    assert usage is not None
    assert usage.inference_cost == pytest.approx(0.0123)
    # Only where the host measures CPU time (a cgroup the server can create).
    assert usage.compute_cost is None or usage.compute_cost >= 0
    listed = [r for r in list_all(client) if r.run_id == run_id]
    assert len(listed) == 1 and listed[0].request_usage == usage
    demo = create_run(client, prompt=unique("no usage"), config={"environment_id": "fast"}).run_id
    assert wait_state(client, demo, "SUCCEEDED").request_usage is None
