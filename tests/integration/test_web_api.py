"""The REST API (web/) on a real uvicorn, against SQLite and PostgreSQL: CRUD, feeds, auth, bad input."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx2 as httpx
import pytest
import sqlalchemy as sa

from kuberaven.events.schema import event_key, pod_event
from kuberaven.model import Database, TrustDomain
from kuberaven.model.tables import OutboxEvent
from kuberaven.web.app import create_app
from tests.helpers import serving

TOKEN = "test-token-not-a-secret"


@pytest.fixture
def api(database: Database) -> Iterator[httpx.Client]:
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def count(database: Database, model: type) -> int:
    with database.session() as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(model)) or 0)


def test_create_read_filter_page_update_delete(api: httpx.Client) -> None:
    # The cluster's own Service "kubernetes" (as the inventory records it) does not make the
    # cluster's name ambiguous: a whole qualified name means that one row.
    service = api.post("/api/v1/Service", json={"name": "kubernetes", "trust_domain": "kubernetes/default"})
    assert service.status_code == 201, service.text
    for name in ("shop", "blog", "wiki"):
        created = api.post("/api/v1/TrustDomain", json={"name": name, "owner": "kubernetes"})
        assert created.status_code == 201, created.text
        assert created.json()["owner"] == "kubernetes" and created.json()["xos_managed"] is True

    listed = api.get("/api/v1/TrustDomain", params={"owner": "kubernetes", "xos_managed": "true", "limit": 2})
    assert listed.status_code == 200
    assert listed.json()["total"] == 3 and [d["name"] for d in listed.json()["items"]] == ["shop", "blog"]
    second_page = api.get("/api/v1/TrustDomain", params={"xos_managed": "true", "limit": 2, "offset": 2}).json()
    assert [d["name"] for d in second_page["items"]] == ["wiki"]

    one = api.get("/api/v1/trustdomain/kubernetes/blog")  # kinds are case-insensitive, names qualified
    assert one.status_code == 200 and one.json()["name"] == "blog"
    assert api.get(f"/api/v1/TrustDomain/{one.json()['id']}").json()["name"] == "blog"

    patched = api.patch("/api/v1/TrustDomain/kubernetes/blog", json={"adopt": True})
    assert patched.status_code == 200 and patched.json()["adopt"] is True
    taken = api.patch("/api/v1/TrustDomain/kubernetes/blog", json={"name": "shop"})
    assert taken.status_code == 422 and "'shop' already exists" in taken.json()["detail"]
    assert api.get("/api/v1/TrustDomain/kubernetes/blog").json()["adopt"] is True  # nothing half-done

    assert api.delete("/api/v1/TrustDomain/kubernetes/blog").status_code == 200
    gone = api.get("/api/v1/TrustDomain/kubernetes/blog")
    assert gone.status_code == 404 and "does not exist" in gone.json()["detail"]


def test_lists_are_searched_and_sorted_by_the_server(api: httpx.Client) -> None:
    for name in ("shop", "shop-eu", "blog", "wiki_a", "wikiza"):
        assert api.post("/api/v1/TrustDomain", json={"name": name.replace("_", "-"), "owner": "kubernetes"}).is_success
    found = api.get("/api/v1/TrustDomain", params={"q": "SHOP", "sort": "-name"}).json()
    assert [d["name"] for d in found["items"]] == ["shop-eu", "shop"] and found["total"] == 2
    # % and _ are literal: "_" matches no name (the names have "-").
    assert api.get("/api/v1/TrustDomain", params={"q": "wiki_"}).json()["total"] == 0
    page = api.get("/api/v1/TrustDomain", params={"sort": "name", "limit": 2, "offset": 1}).json()
    assert [d["name"] for d in page["items"]] == ["default", "shop"]  # blog, default, shop, shop-eu, wiki-a, wikiza
    bad = api.get("/api/v1/TrustDomain", params={"sort": "colour"})
    assert bad.status_code == 422 and "no column 'colour'" in bad.json()["detail"]
    assert api.get("/api/v1/network/ports", params={"sort": "colour"}).status_code == 422
    assert api.get("/api/v1/inventory/pods", params={"q": "x" * 201}).status_code == 422


def test_apply_takes_the_documents_of_kuberaven_apply(api: httpx.Client) -> None:
    body = """\
- kind: TrustDomain
  name: shop
  owner: kubernetes
- kind: Slice
  name: web
  site: mysite
  trust_domain: kubernetes/shop
- kind: KubernetesSecret
  name: creds
  trust_domain: kubernetes/shop
  data: {password: hunter2}
- kind: Image
  name: nginx:1.25
- kind: KubernetesServiceInstance
  name: web-0
  slice: kubernetes/shop/web
  image: nginx:1.25
"""
    applied = api.post("/api/v1/apply", content=body, headers={"Content-Type": "application/yaml"})
    assert applied.status_code == 200, applied.text
    assert [(i["kind"], i["action"]) for i in applied.json()["items"]] == [
        ("TrustDomain", "created"),
        ("Slice", "created"),
        ("KubernetesSecret", "created"),
        ("Image", "created"),
        ("KubernetesServiceInstance", "created"),
    ]
    # Secret values are never returned, by any endpoint.
    for answer in (
        applied.text,
        api.get("/api/v1/KubernetesSecret").text,
        api.get("/api/v1/KubernetesSecret/creds").text,
    ):
        assert "hunter2" not in answer
    assert api.get("/api/v1/KubernetesSecret/creds").json()["data"] == {"password": "<hidden>"}
    again = api.post("/api/v1/apply", content=body, headers={"Content-Type": "application/yaml"})
    assert {i["action"] for i in again.json()["items"]} == {"unchanged"}
    # An image an instance runs cannot go.
    in_use = api.delete("/api/v1/Image/nginx:1.25")
    assert in_use.status_code == 409 and "still referenced" in in_use.json()["detail"]
    assert api.get("/api/v1/Image/nginx:1.25").status_code == 200


BAD_REQUESTS = [
    # (method, path, body, status, words the answer must say)
    ("GET", "/api/v1/Gadget", None, 404, "unknown kind"),
    ("POST", "/api/v1/Gadget", {"name": "x"}, 404, "unknown kind"),
    ("GET", "/api/v1/TrustDomain?colour=red", None, 422, "TrustDomain.colour: no such field"),
    ("GET", "/api/v1/TrustDomain?xos_managed=maybe", None, 422, "must be true or false"),
    ("GET", "/api/v1/TrustDomain?limit=0", None, 422, "limit: must be between 1 and 1000"),
    ("GET", "/api/v1/TrustDomain?offset=-1", None, 422, "offset: must be a non-negative integer"),
    (
        "POST",
        "/api/v1/TrustDomain",
        {"name": "shop", "owner": "no-such-cluster"},
        422,
        "'no-such-cluster' does not exist",
    ),
    (
        "POST",
        "/api/v1/TrustDomain",
        {"name": "shop", "owner": "kubernetes", "xos_managed": "yes"},
        422,
        "xos_managed: must be bool",
    ),
    ("POST", "/api/v1/TrustDomain", {"name": "s" * 300, "owner": "kubernetes"}, 422, "at most 63 are allowed"),
    (
        "POST",
        "/api/v1/TrustDomain",
        {"name": "shop", "owner": "kubernetes", "colour": "red"},
        422,
        "colour: no such field",
    ),
    ("POST", "/api/v1/TrustDomain", {"name": "shop", "owner": "kubernetes", "id": 7}, 422, "is set by kuberaven"),
    ("POST", "/api/v1/TrustDomain", {"kind": "Slice", "name": "shop"}, 422, "the body says 'Slice'"),
    ("POST", "/api/v1/TrustDomain", ["not", "a", "mapping"], 422, "body"),
    ("POST", "/api/v1/TrustDomain", b"{not json", 422, "not valid JSON"),
    ("POST", "/api/v1/TrustDomain", {"name": "default", "owner": "kubernetes"}, 409, "already exists"),
    ("POST", "/api/v1/apply", b"- kind: TrustDomain\n  name: [unclosed\n", 422, "invalid YAML"),
    (
        "POST",
        "/api/v1/apply",
        b"- kind: TrustDomain\n  name: ok\n  owner: kubernetes\n- kind: Gadget\n",
        422,
        "line 4: Gadget: unknown kind",
    ),
    ("POST", "/api/v1/apply", b"", 422, "no model objects"),
    (
        "POST",
        "/api/v1/TrustDomain",
        {"name": "big", "owner": "kubernetes", "x": "y" * (2 << 20)},
        413,
        "at most 1048576",
    ),
    ("PATCH", "/api/v1/TrustDomain/kubernetes/default", {"owner": "nowhere"}, 422, "'nowhere' does not exist"),
    ("PATCH", "/api/v1/TrustDomain/kubernetes/nowhere", {"adopt": True}, 404, "does not exist"),
    ("GET", "/api/v1/events?since=yesterday", None, 422, "since: must be an event sequence number"),
    ("GET", "/api/v1/network/translations?colour=red", None, 422, "no such filter"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "says"), BAD_REQUESTS, ids=lambda v: str(v)[:40])
def test_bad_input_is_refused_with_a_clear_message_and_nothing_stored(
    api: httpx.Client, database: Database, method: str, path: str, body: object, status: int, says: str
) -> None:
    before = {model: count(database, model) for model in (TrustDomain, OutboxEvent)}
    if isinstance(body, bytes):
        answer = api.request(method, path, content=body, headers={"Content-Type": "application/json"})
    else:
        answer = api.request(method, path, json=body)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["detail"], answer.json()
    assert {model: count(database, model) for model in before} == before


def test_the_api_explains_itself(api: httpx.Client) -> None:
    spec = api.get("/openapi.json").json()
    assert {"/api/v1/{kind}", "/api/v1/{kind}/{reference}", "/api/v1/events", "/api/v1/apply"} <= set(spec["paths"])
    assert api.get("/docs").status_code == 200
    kinds = {k["kind"]: k for k in api.get("/api/v1/kinds").json()}
    assert kinds["KubernetesServiceInstance"]["key"] == ["trust_domain", "name"]


def write_events(database: Database, names: list[str]) -> None:
    with database.session() as session:
        for name in names:
            event = pod_event(
                "created", cluster="kubernetes", namespace="demo", name=name, observed={"phase": "Pending"}
            )
            session.add(
                OutboxEvent(
                    event_id=event["event_id"],
                    cluster="kubernetes",
                    key=event_key("demo", name),
                    status="created",
                    payload=event,
                    created=time.time(),
                    attempts=0,
                )
            )


def test_event_log_pages_and_streams_live(api: httpx.Client, database: Database) -> None:
    write_events(database, ["a", "b", "c"])
    page = api.get("/api/v1/events", params={"since": 0, "limit": 2}).json()
    assert [e["name"] for e in page["items"]] == ["a", "b"]
    rest = api.get("/api/v1/events", params={"since": page["last"]}).json()
    assert [e["name"] for e in rest["items"]] == ["c"]
    # "newest" lets a client (the UI) start near the end instead of replaying the whole log.
    assert page["newest"] == rest["newest"] == rest["last"] == page["last"] + 1

    seen: list[dict] = []
    with api.stream("GET", "/api/v1/events/stream", params={"since": rest["last"]}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        threading.Timer(0.5, write_events, (database, ["d", "e"])).start()
        for line in stream.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
            if len(seen) == 2:
                break
    assert [(e["name"], e["status"], e["namespace"]) for e in seen] == [
        ("d", "created", "demo"),
        ("e", "created", "demo"),
    ]


@pytest.fixture
def guarded(database: Database) -> Iterator[httpx.Client]:
    with serving(create_app(database, token=TOKEN)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def test_a_token_guards_the_api_but_not_the_probes(guarded: httpx.Client) -> None:
    missing = guarded.get("/api/v1/TrustDomain")
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "API token" in missing.json()["detail"]
    assert guarded.get("/api/v1/TrustDomain", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guarded.post("/api/v1/TrustDomain", json={"name": "x", "owner": "kubernetes"}).status_code == 401
    good = guarded.get("/api/v1/TrustDomain", headers={"Authorization": f"Bearer {TOKEN}"})
    assert good.status_code == 200 and good.json()["total"] == 1
    # A token in the URL lands in proxies' logs: only the event stream (EventSource sends no header) takes one.
    assert guarded.get("/api/v1/events", params={"access_token": TOKEN}).status_code == 401
    assert guarded.get("/healthz").status_code == 200
    assert guarded.get("/metrics").status_code == 200
    assert guarded.get("/").status_code == 200  # the page; it asks for the token when the API says 401


def test_unreachable_database_is_a_503_that_names_it() -> None:
    database = Database("postgresql+psycopg://kuberaven@127.0.0.1:1/nowhere", connect_args={"connect_timeout": 2})
    with serving(create_app(database)) as url:
        answer = httpx.get(f"{url}/api/v1/TrustDomain", timeout=20)
    assert answer.status_code == 503 and "database unavailable" in answer.json()["detail"]


def history_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "metric-history"]


def test_an_apps_own_metric_history_samples_while_it_serves_and_stops_with_it(database: Database) -> None:
    """An app made without the daemon's history keeps one of its own, which must not outlive it (a test
    process makes dozens of apps, and each such thread reads the whole metrics registry every 10 s)."""
    before = history_threads()
    with serving(create_app(database)) as url:
        deadline = time.monotonic() + 5
        while not (plots := httpx.get(f"{url}/api/v1/metrics/history", timeout=10).json())["plots"][0]["times"]:
            assert time.monotonic() < deadline, "no point sampled"  # the first is read as the thread starts
            time.sleep(0.05)
        assert len(history_threads()) == len(before) + 1
    assert {plot["id"] for plot in plots["plots"]} >= {"events", "backlog"}
    deadline = time.monotonic() + 5
    while len(history_threads()) > len(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert history_threads() == before
