"""Cursor pagination over several pages: the SDK's own pager on 0.15 (`SyncRunsCursorPage`,
auto-pagination by iterating it), manual `cursor` paging with the plain `RunListResponse` on
0.10.1. Every run exactly once, has_next_page/next_cursor consistent. Own server."""

from __future__ import annotations

import pytest
from oz_agent_sdk import BadRequestError

from conftest import NEW_SDK, create_run, list_all, list_page, wait_all

N = 25
LIMIT = 4


@pytest.fixture(scope="module")
def runs(server, client):
    ids = []
    for i in range(N):
        # Titles in an order unrelated to creation order.
        title = f"page run {(i * 7) % N:02d}"
        ids.append(create_run(client, prompt=f"pagination run {i}", title=title, config={"name": "pager"}).run_id)
    # Paging returns each run exactly once "when nothing changes meanwhile": let them finish.
    wait_all(client, ids, "SUCCEEDED", timeout=30)
    return ids


def manual_pages(client, **filters):
    pages = []
    cursor = None
    while True:
        kw = dict(filters)
        if cursor is not None:
            kw["cursor"] = cursor
        page = list_page(client, **kw)
        pages.append(page)
        if not page.has_next_page:
            assert page.next_cursor is None
            return pages
        assert page.next_cursor
        cursor = page.next_cursor
        assert len(pages) < 100


@pytest.mark.parametrize(
    "sort",
    [{}, {"sort_by": "created_at", "sort_order": "asc"}, {"sort_by": "created_at"}, {"sort_by": "title", "sort_order": "asc"}, {"sort_by": "updated_at", "sort_order": "asc"}],
)
def test_sdk_pager_visits_every_run_once(client, runs, sort):
    if NEW_SDK:
        from oz_agent_sdk.pagination import SyncRunsCursorPage

        first = client.agent.runs.list(limit=LIMIT, **sort)
        assert isinstance(first, SyncRunsCursorPage)
        assert len(first.runs) == LIMIT and first.has_next_page()
        pages = list(first.iter_pages())
        sizes = [len(p.runs) for p in pages]
        assert pages[-1].page_info.has_next_page is False and pages[-1].page_info.next_cursor is None
        assert all(p.page_info.has_next_page for p in pages[:-1])
        seen = [r.run_id for r in client.agent.runs.list(limit=LIMIT, **sort)]  # auto-pagination
        assert seen == [r.run_id for p in pages for r in p.runs]
    else:
        from oz_agent_sdk.types.agent import RunListResponse

        plain = client.agent.runs.list(limit=LIMIT, **sort)
        assert isinstance(plain, RunListResponse) and plain.page_info.has_next_page is True
        pages = manual_pages(client, limit=LIMIT, **sort)
        sizes = [len(p.runs) for p in pages]
        seen = [r.run_id for p in pages for r in p.runs]
    assert sizes == [LIMIT] * (N // LIMIT) + [N % LIMIT]
    assert len(seen) == N and set(seen) == set(runs)
    if sort.get("sort_by") == "created_at":
        assert seen == (runs if sort.get("sort_order") == "asc" else runs[::-1])
    if sort.get("sort_by") == "title":
        assert seen == sorted(runs, key=lambda rid: client.agent.runs.retrieve(rid).title.lower())


def test_filtered_pages_and_page_sizes(client, runs):
    for limit in (1, 4, 7, 24, 25, 26, 500):
        got = [r.run_id for r in list_all(client, name="pager", limit=limit, sort_by="created_at", sort_order="asc")]
        assert got == runs, limit
    page = list_page(client, name="pager", limit=N)
    assert len(page.runs) == N and page.has_next_page is False and page.next_cursor is None


def test_default_limit_is_20(client, runs):
    page = list_page(client)
    assert len(page.runs) == 20 and page.has_next_page is True and page.next_cursor


def test_cursor_is_bound_to_its_query(client, runs):
    page = list_page(client, limit=LIMIT)
    assert page.next_cursor
    with pytest.raises(BadRequestError):
        list_page(client, limit=LIMIT, cursor=page.next_cursor, sort_by="title")
    with pytest.raises(BadRequestError):
        list_page(client, limit=LIMIT, cursor="not-a-cursor")
    # The page size may change between pages.
    rest = [r.run_id for r in list_all(client, limit=9, cursor=page.next_cursor)]
    first = [r.run_id for r in page.runs]
    assert len(rest) == N - LIMIT and set(first + rest) == set(runs)


@pytest.mark.parametrize("limit", [0, -1, 501, 10_000])
def test_bad_limit(client, runs, limit):
    with pytest.raises(BadRequestError) as e:
        list_page(client, limit=limit)
    assert e.value.status_code == 400
