"""Webhook deliveries checked by a receiver that verifies every one with the Standard Webhooks
reference library (`standardwebhooks` from PyPI), runs created through the official client:
every delivery verifies and carries the run as the API returns it; a receiver answering 500
twice then 200 gets the same `webhook-id` three times, and the deliveries endpoint shows the
attempts; a URL that resolves to a private address is refused without a request arriving, the
record saying why; 410 Gone disables the subscription; another team's run's deliveries are a
404, and a subscription limited to a team hears of that team's runs only."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterable

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from conftest import CONFIG, Server, create_run, serving, unique

# 24 random bytes in the specification's `whsec_` form.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class Receiver:
    """A local receiver: `/ok` answers 200, `/flaky` 500 to the first two requests of each
    `webhook-id` then 200, `/gone` 410; any other path 200. Every request is verified with
    the library and kept by path."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: dict[str, list[dict]] = defaultdict(list)
        self.failures: list[str] = []
        self.seen: dict[str, int] = defaultdict(int)
        verifier = Webhook(SECRET)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    payload = verifier.verify(body, headers)
                except Exception as e:  # noqa: BLE001 (any failure to verify is the finding)
                    with receiver.lock:
                        receiver.failures.append(f"{self.path} {headers.get('webhook-id')}: {e!r}")
                    payload = json.loads(body)
                wid = headers.get("webhook-id", "")
                with receiver.lock:
                    receiver.seen[wid] += 1
                    n = receiver.seen[wid]
                    status = {"/flaky": 500 if n <= 2 else 200, "/gone": 410}.get(self.path, 200)
                    receiver.got[self.path].append({"id": wid, "payload": payload, "status": status, "headers": headers})
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def requests(self, path: str, run_id: str | None = None, topic: str | None = None) -> list[dict]:
        with self.lock:
            return [
                r
                for r in self.got[path]
                if (run_id is None or r["payload"]["data"]["run_id"] == run_id)
                and (topic is None or r["payload"]["type"] == topic)
            ]


def wait_for(predicate, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def receiver() -> Iterable[Receiver]:
    r = Receiver()
    yield r
    r.httpd.shutdown()


@pytest.fixture(scope="module")
def server(receiver: Receiver, tmp_path_factory) -> Iterable[Server]:
    secret_file = Path(tmp_path_factory.mktemp("webhook-secret")) / "secret"
    secret_file.write_text(SECRET + "\n")
    hook = 'secret_file = "{}"\nretry_initial_ms = 100\ntimeout_secs = 5\n'.format(secret_file)
    config = CONFIG + f"""
[[webhooks]]
name = "all"
url = "{receiver.url('/ok')}"
allow_private = true
{hook}
[[webhooks]]
name = "flaky"
url = "{receiver.url('/flaky')}"
events = ["run.succeeded"]
allow_private = true
{hook}
[[webhooks]]
name = "gone"
url = "{receiver.url('/gone')}"
events = ["run.succeeded"]
allow_private = true
{hook}
# Only the runs of one team.
[[webhooks]]
name = "team-only"
url = "{receiver.url('/team-only')}"
events = ["run.succeeded"]
teams = ["hooks-other"]
allow_private = true
{hook}
# The same receiver, without allow_private: by name (the resolver refuses) and by address.
[[webhooks]]
name = "private-name"
url = "{receiver.url('/private-name', 'localhost')}"
events = ["run.succeeded"]
{hook}
[[webhooks]]
name = "private-literal"
url = "{receiver.url('/private-literal')}"
events = ["run.succeeded"]
{hook}"""
    yield from serving(config, "runledger-sdk-webhooks-")


def deliveries(server: Server, run_id: str, secret: str | None = None) -> httpx.Response:
    key = secret or server.admin.secret
    return httpx.get(
        f"{server.base_url}/agent/runs/{run_id}/deliveries", headers={"Authorization": f"Bearer {key}"}, timeout=5
    )


def finished_run(server: Server, client) -> str:
    run = create_run(client, prompt=unique("webhooks"), config={"environment_id": "fast"})
    wait_for(lambda: client.agent.runs.retrieve(run.run_id).state == "SUCCEEDED", "the run to succeed")
    return run.run_id


@pytest.fixture(scope="module")
def first_run(server: Server, client) -> str:
    return finished_run(server, client)


def test_every_delivery_verifies_with_the_standardwebhooks_library(server, client, receiver, first_run):
    topics = ["run.queued", "run.started", "run.succeeded"]
    got = wait_for(
        lambda: (lambda rs: rs if {r["payload"]["type"] for r in rs} >= set(topics) else None)(
            receiver.requests("/ok", first_run)
        ),
        "every state change at /ok",
    )
    assert not receiver.failures, receiver.failures
    by_type = {r["payload"]["type"]: r for r in got}
    run = client.agent.runs.retrieve(first_run)
    done = by_type["run.succeeded"]["payload"]
    # The data is the run as GET returns it, as of the event.
    assert done["data"]["run_id"] == run.run_id
    assert done["data"]["state"] == "SUCCEEDED"
    assert done["data"]["title"] == run.title
    assert done["data"]["prompt"] == run.prompt
    assert by_type["run.queued"]["payload"]["data"]["state"] == "QUEUED"
    assert by_type["run.started"]["payload"]["data"]["state"] == "INPROGRESS"
    assert done["timestamp"].endswith("Z")
    for r in got:
        h = r["headers"]
        assert h["webhook-id"] == f"msg_{first_run}_{h['webhook-id'].split('_')[2]}_all"
        assert h["webhook-signature"].startswith("v1,")
        assert abs(int(h["webhook-timestamp"]) - time.time()) < 120
        assert h["content-type"] == "application/json"


def test_500_twice_then_200_is_one_delivery_with_one_id(server, receiver, first_run):
    got = wait_for(lambda: (lambda rs: rs if len(rs) >= 3 else None)(receiver.requests("/flaky", first_run)), "three attempts")
    assert [r["status"] for r in got] == [500, 500, 200]
    assert len({r["id"] for r in got}) == 1, [r["id"] for r in got]
    assert not receiver.failures, receiver.failures

    def delivered():
        r = deliveries(server, first_run)
        assert r.status_code == 200, r.text
        flaky = [d for d in r.json()["deliveries"] if d["subscription"] == "flaky"]
        return flaky if flaky and flaky[0]["state"] == "delivered" else None

    (flaky,) = wait_for(delivered, "the delivery's record")
    assert flaky["webhook_id"] == got[0]["id"]
    assert flaky["type"] == "run.succeeded"
    assert [a["attempt"] for a in flaky["attempts"]] == [1, 2, 3]
    assert [a.get("status") for a in flaky["attempts"]] == [500, 500, 200]
    assert all("next_retry_at" in a for a in flaky["attempts"][:2])
    assert "next_retry_at" not in flaky["attempts"][2]
    assert all(isinstance(a["latency_ms"], int) and a["at"].endswith("Z") for a in flaky["attempts"])


def test_a_private_address_is_refused_and_no_request_arrives(server, receiver, first_run):
    def refused():
        r = deliveries(server, first_run).json()["deliveries"]
        by = {d["subscription"]: d for d in r}
        return by if "private-name" in by and "private-literal" in by else None

    by = wait_for(refused, "the refused attempts' records")
    for name in ("private-name", "private-literal"):
        d = by[name]
        assert d["state"] == "pending", d
        first = d["attempts"][0]
        assert "status" not in first, d
        assert "refused" in first["error"] and "loopback" in first["error"], first
        assert "allow_private" in first["error"]
    assert "localhost" in by["private-name"]["attempts"][0]["error"]
    assert receiver.requests("/private-name") == []
    assert receiver.requests("/private-literal") == []
    assert any("webhook delivery attempt failed" in line for line in server.stderr_lines)
    assert not any(SECRET in line for line in server.stderr_lines)


def test_gone_disables_the_subscription(server, client, receiver, first_run):
    wait_for(lambda: receiver.requests("/gone", first_run), "the 410")

    def disabled():
        d = [d for d in deliveries(server, first_run).json()["deliveries"] if d["subscription"] == "gone"]
        return d if d and d[0]["state"] == "disabled" else None

    wait_for(disabled, "the disabled record")
    second = finished_run(server, client)
    # The others still hear of the second run; the disabled one does not.
    wait_for(lambda: receiver.requests("/flaky", second, "run.succeeded"), "the second run at /flaky")
    wait_for(lambda: receiver.requests("/ok", second, "run.succeeded"), "the second run at /ok")
    assert receiver.requests("/gone", second) == []
    assert len(receiver.requests("/gone")) == 1
    assert any("webhook disabled" in line for line in server.stderr_lines)


def test_another_teams_run_has_no_deliveries_to_show(server, receiver, first_run):
    admin = {"Authorization": f"Bearer {server.admin.secret}"}
    r = httpx.post(f"{server.base_url}/admin/teams", json={"name": "hooks-other"}, headers=admin, timeout=5)
    assert r.status_code == 201, r.text
    r = httpx.post(f"{server.base_url}/admin/keys", json={"name": "outsider", "team": "hooks-other"}, headers=admin, timeout=5)
    assert r.status_code == 200, r.text
    outsider = r.json()["key"]
    r = deliveries(server, first_run, outsider)
    assert r.status_code == 404, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert deliveries(server, "01ARZ3NDEKTSV4RRFFQ69G5FAV").status_code == 404
    # A subscription limited to that team hears of its runs only.
    theirs = finished_run(server, server.client(outsider))
    wait_for(lambda: receiver.requests("/team-only", theirs, "run.succeeded"), "the team's run at /team-only")
    assert receiver.requests("/team-only", first_run) == []
    assert [d["subscription"] for d in deliveries(server, theirs, outsider).json()["deliveries"]].count("team-only") == 1
