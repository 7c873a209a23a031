"""Per-key rate limiting as the official client sees it: with retries off, a 429 raises
`RateLimitError` (problem+json, `retryable`, `Retry-After`); with the client's built-in retries,
a burst of calls all succeed, because the client waits as long as `Retry-After` says."""

from __future__ import annotations

import time
from typing import Iterable

import httpx
import pytest
from oz_agent_sdk import RateLimitError

from conftest import Server, serving

# Two requests at once, then one every 250 ms. A refused request is told `Retry-After: 1`
# (the 250 ms wait rounded up to whole seconds); one second later the bucket is full again, so
# each call needs at most one retry. Without the header the client's first retry would come
# after its own backoff of at most 0.5 s, which the timing check below tells apart.
LIMITED_CONFIG = """\
[server]
bind = "127.0.0.1:0"

[limits]
rate_per_sec = 4
burst = 2

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 100
"""


@pytest.fixture(scope="module")
def limited() -> Iterable[Server]:
    yield from serving(LIMITED_CONFIG, "runledger-sdk-limits-")


def rate_limited_total(server: Server) -> int:
    """The server's own count of 429s (`/metrics`, read with the admin key and not rate
    limited)."""
    headers = {"Authorization": f"Bearer {server.admin.secret}"}
    text = httpx.get(f"{server.root_url}/metrics", headers=headers, timeout=5).text
    for line in text.splitlines():
        if line.startswith("runledger_rate_limited_total "):
            return int(line.split()[1])
    raise AssertionError(f"no runledger_rate_limited_total in /metrics:\n{text}")


def test_without_retries_a_429_raises_rate_limit_error(limited):
    client = limited.client(max_retries=0)
    before = rate_limited_total(limited)
    with pytest.raises(RateLimitError) as e:
        # Back-to-back calls take a few ms each, far quicker than the 4/s refill: the burst of
        # 2 is gone within a few calls.
        for _ in range(50):
            client.agent.runs.list(limit=1)
    err = e.value
    assert err.status_code == 429
    assert err.response.headers["content-type"].startswith("application/problem+json")
    assert err.response.headers["retry-after"] == "1"
    body = err.body
    assert isinstance(body, dict), body
    assert body["status"] == 429
    assert body["type"].endswith("/resource_unavailable"), body["type"]
    assert body["retryable"] is True
    assert body["error"] == f"{body['title']} ({body['detail']})"
    assert "4 requests per second" in body["detail"], body
    assert body["trace_id"] == err.response.headers["x-request-id"]
    assert rate_limited_total(limited) == before + 1


def test_the_clients_retries_wait_as_long_as_retry_after_says(limited):
    # (kind, monotonic time, status, Retry-After) of every request the client sends and every
    # response it gets, retries included.
    events: list[tuple[str, float, int | None, str | None]] = []

    def on_request(request: httpx.Request) -> None:
        events.append(("request", time.monotonic(), None, None))

    def on_response(response: httpx.Response) -> None:
        events.append(("response", time.monotonic(), response.status_code, response.headers.get("retry-after")))

    http = httpx.Client(event_hooks={"request": [on_request], "response": [on_response]})
    client = limited.client(max_retries=3, http_client=http)
    before = rate_limited_total(limited)
    calls = 6
    started = time.monotonic()
    for _ in range(calls):
        client.agent.runs.list(limit=1)  # raises if a call fails after its retries
    elapsed = time.monotonic() - started

    statuses = [status for kind, _, status, _ in events if kind == "response"]
    assert statuses.count(200) == calls, statuses
    refusals = statuses.count(429)
    assert refusals >= 2 and set(statuses) == {200, 429}, statuses
    assert rate_limited_total(limited) == before + refusals
    for i, (kind, at, status, retry_after) in enumerate(events):
        if status != 429:
            continue
        assert retry_after == "1", events
        retried_at = next(t for k, t, _, _ in events[i + 1 :] if k == "request")
        assert retried_at - at >= 1.0, f"retried {retried_at - at:.3f} s after a 429 with Retry-After: 1"
    assert elapsed >= refusals * 1.0
