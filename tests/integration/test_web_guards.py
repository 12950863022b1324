"""Hostile requests to the HTTP server (web/guards.py, web/auth.py, the apply endpoint), on a real uvicorn.

Each is refused with a clear answer, nothing is stored, and the server keeps answering others meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx2 as httpx
import pytest
import sqlalchemy as sa

from kuberaven.model import Database, Slice, TrustDomain
from kuberaven.web.app import create_app
from kuberaven.web.auth import TokenError, load_token
from kuberaven.web.guards import MAX_BODY_BYTES, HostRule
from tests.helpers import serving

BOMB = "\n".join(
    ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    + ["kind: Slice", "name: bomb", "trust_domain: kubernetes/default"]
)


@pytest.fixture
def url(database: Database) -> Iterator[str]:
    """The API as `kuberaven run` serves it on loopback without a token."""
    with serving(create_app(database, hosts_rule=HostRule.for_listener("127.0.0.1:8080", token=None))) as base:
        yield base


def stored(database: Database) -> int:
    """Rows a refused request must not have added (what the hostile bodies would create)."""
    with database.session() as session:
        return sum(
            int(session.scalar(sa.select(sa.func.count()).select_from(model)) or 0) for model in (Slice, TrustDomain)
        )


async def test_an_alias_bomb_is_refused_while_the_probes_keep_answering(url: str, database: Database) -> None:
    before = stored(database)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        started = time.monotonic()
        bomb = asyncio.create_task(
            client.post("/api/v1/apply", content=BOMB, headers={"Content-Type": "application/yaml"})
        )
        probes = [await client.get("/healthz") for _ in range(5)]
        answer = await bomb
    assert all(p.status_code == 200 for p in probes)
    assert answer.status_code == 422 and "aliases expand to" in answer.json()["detail"], answer.text
    assert time.monotonic() - started < 5  # refused before anything is expanded
    assert stored(database) == before


def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(url: str, database: Database) -> None:
    before = stored(database)

    def chunks() -> Iterator[bytes]:
        line = b"- kind: Slice\n  name: s\n  trust_domain: kubernetes/default\n"
        for _ in range(MAX_BODY_BYTES // len(line) + 100):
            yield line

    with httpx.Client(base_url=url, timeout=30) as client:
        answer = client.post("/api/v1/apply", content=chunks(), headers={"Content-Type": "application/yaml"})
    assert answer.status_code == 413 and "at most" in answer.json()["detail"]
    assert stored(database) == before


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({"Content-Type": "text/plain"}, 415, "needs Content-Type application/json"),
        ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403, "another origin"),
        ({"Content-Type": "application/json", "Host": "evil.example"}, 403, "not a name of this server"),
    ],
    ids=["text/plain", "origin", "host"],
)
def test_cross_site_writes_and_foreign_hosts_are_refused(
    url: str, database: Database, headers: dict[str, str], status: int, says: str
) -> None:
    before = stored(database)
    body = '[{"kind": "TrustDomain", "name": "csrf", "owner": "kubernetes"}]'
    with httpx.Client(base_url=url, timeout=10) as client:
        answer = client.post("/api/v1/apply", content=body, headers=headers)
        assert answer.status_code == status and says in answer.json()["detail"], answer.text
        assert stored(database) == before
        # The same write as the page sends it goes through.
        page = client.post("/api/v1/apply", content=body, headers={"Content-Type": "application/json"})
        assert page.status_code == 200, page.text
    assert stored(database) == before + 1


def test_a_query_token_opens_only_the_event_stream(database: Database) -> None:
    with serving(create_app(database, token="s3cret")) as base, httpx.Client(base_url=base, timeout=5) as client:
        assert client.get("/api/v1/Slice", params={"access_token": "s3cret"}).status_code == 401
        assert client.get("/api/v1/Slice", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        with client.stream("GET", "/api/v1/events/stream", params={"access_token": "s3cret"}) as stream:
            assert stream.status_code == 200


def test_a_blank_token_is_refused_at_start() -> None:
    with pytest.raises(TokenError, match="blank"):
        load_token("   ", None)
