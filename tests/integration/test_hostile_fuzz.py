"""Arbitrary input to the REST API and to ``apply -f``: never a 5xx or a traceback, nothing changed on refusal."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kuberaven.model import Database
from kuberaven.web.app import create_app
from tests.helpers import serving

KINDS = ["Slice", "Site", "Image", "TrustDomain", "KubernetesSecret", "KubernetesResourceInstance", "Nope"]
FIELDS = ["name", "kind", "site", "trust_domain", "max_instances", "id", "slice", "image", "data", "tag", "owner"]
REFERENCES = ["mysite", "1", "²", "kubernetes/default", str(2**63), "../x"]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3), max_leaves=8
)
BODIES = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), JSON, max_size=5) | JSON
QUERIES = st.dictionaries(
    st.sampled_from(["limit", "offset", *FIELDS]) | st.text(min_size=1, max_size=8), st.text(), max_size=3
)
FUZZ = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def stored(database: Database) -> dict[str, int]:
    with database.engine.connect() as connection:
        tables = sa.inspect(connection).get_table_names()
        return {t: connection.execute(sa.select(sa.func.count()).select_from(sa.table(t))).scalar_one() for t in tables}


@pytest.fixture
def api(database: Database) -> Iterator[httpx.Client]:
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def check(answer: httpx.Response, database: Database, before: dict[str, int]) -> None:
    assert answer.status_code < 500, (answer.request.method, answer.request.url, answer.text)
    assert "Traceback" not in answer.text
    if answer.status_code >= 400:
        assert stored(database) == before, "a refused request changed nothing"


@FUZZ
@given(
    method=st.sampled_from(["POST", "PATCH"]),
    kind=st.sampled_from(KINDS),
    reference=st.sampled_from(REFERENCES),
    body=BODIES,
)
# Found by this test: a list as a natural key's value was looked up as is (SQLite: a 500 binding it).
@example(method="POST", kind="Slice", reference="mysite", body={"name": [None]})
@example(method="PATCH", kind="TrustDomain", reference="kubernetes", body={"name": {"a": 1}})
def test_arbitrary_json_bodies(
    api: httpx.Client, database: Database, method: str, kind: str, reference: str, body: Any
) -> None:
    before = stored(database)
    path = f"/api/v1/{kind}" if method == "POST" else f"/api/v1/{kind}/{reference}"
    check(api.request(method, path, json=body), database, before)


@FUZZ
@given(kind=st.sampled_from([*KINDS, "events"]), query=QUERIES)
def test_arbitrary_query_strings(api: httpx.Client, database: Database, kind: str, query: dict[str, str]) -> None:
    before = stored(database)
    check(api.get(f"/api/v1/{kind}", params=query), database, before)


@pytest.mark.parametrize("query", [{"name": "\x00"}, {"q": "a\x00b"}, {"na\x00me": "x"}])
def test_a_nul_in_a_query_is_refused_and_named(api: httpx.Client, database: Database, query: dict[str, str]) -> None:
    before = stored(database)
    answer = api.get("/api/v1/Slice", params=query)
    check(answer, database, before)
    assert answer.status_code == 422 and "contains a NUL character" in answer.text, answer.text


NUL_BODIES = [  # (URL, body, the field the refusal names)
    ("/api/v1/TrustDomain", {"name": "a\x00b", "owner": "kubernetes"}, "TrustDomain.name"),
    ("/api/v1/TrustDomain", {"name": "ok", "owner": "kube\x00rnetes"}, "TrustDomain.owner"),
    ("/api/v1/Service", {"name": "s", "trust_domain": "kubernetes/default\x00"}, "Service.trust_domain"),
    (
        "/api/v1/KubernetesConfigMap",
        {"name": "c", "trust_domain": "kubernetes/default", "data": {"k\x00": "v"}},
        "KubernetesConfigMap.data",
    ),
    (
        "/api/v1/KubernetesConfigMap",
        {"name": "c", "trust_domain": "kubernetes/default", "data": {"k": "\x00"}},
        "KubernetesConfigMap.data",
    ),
    ("/api/v1/TrustDomain", {"name": "ok", "owner": "kubernetes", "n\x00": 1}, "TrustDomain.'n\\x00'"),
]


@pytest.mark.parametrize(("path", "body", "field"), NUL_BODIES)
def test_a_nul_in_a_json_body_is_refused_naming_its_field(
    api: httpx.Client, database: Database, path: str, body: dict[str, Any], field: str
) -> None:
    """No stored text may hold a NUL (PostgreSQL refuses it mid-statement): the same 422 on both databases."""
    before = stored(database)
    answer = api.post(path, json=body)
    check(answer, database, before)
    assert answer.status_code == 422 and f"{field}: contains a NUL character" in answer.json()["detail"], answer.text


def test_a_nul_in_an_applied_document_or_a_url_is_refused_and_named(api: httpx.Client, database: Database) -> None:
    before = stored(database)
    document = (
        'kind: TrustDomain\nname: ok\nowner: kubernetes\n---\nkind: TrustDomain\nname: "b\\0"\nowner: kubernetes\n'
    )
    answer = api.post("/api/v1/apply", content=document.encode(), headers={"Content-Type": "application/yaml"})
    check(answer, database, before)
    assert answer.status_code == 422 and "line 5: TrustDomain.name: contains a NUL" in answer.text, answer.text
    for method in ("GET", "PATCH", "DELETE"):
        answer = api.request(method, "/api/v1/TrustDomain/kubernetes%00", json={} if method == "PATCH" else None)
        check(answer, database, before)
        assert answer.status_code == 422 and "contains a NUL" in answer.text, (method, answer.text)


@FUZZ
@given(text=st.text())
def test_arbitrary_yaml_bodies(api: httpx.Client, database: Database, text: str) -> None:
    before = stored(database)
    answer = api.post("/api/v1/apply", content=text.encode(), headers={"Content-Type": "application/yaml"})
    check(answer, database, before)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(max_size=60)
    | st.builds(
        lambda k, n, v: f"- kind: {k}\n  name: {n}\n  max_instances: {v}\n",
        st.sampled_from(KINDS),
        st.text(max_size=8),
        st.integers(),
    )
)
def test_arbitrary_text_to_cli_apply(database: Database, database_url: str, text: str) -> None:
    before = stored(database)
    result = subprocess.run(
        [sys.executable, "-m", "kuberaven", "apply", "-f", "-", "--db", database_url],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    if result.returncode == 1:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert stored(database) == before
