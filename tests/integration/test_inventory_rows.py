"""What the inventory's batched statements store (inventory/rows.py): the bookkeeping of a found row in the
SQL, one timestamp per batch, JSON encoded by msgspec; on SQLite and PostgreSQL, read back through the model."""

from __future__ import annotations

import datetime as dt
import re
import threading
from typing import Any

import pytest
import sqlalchemy as sa

from kuberaven.inventory.records import Item, SliceRef
from kuberaven.inventory.writer import InventoryWriter
from kuberaven.kube.reflector import WatchEvent
from kuberaven.model import Database, Image, KubernetesService, KubernetesServiceInstance, OutboxEvent, Slice
from kuberaven.model.base import STATUS_OK, SyncCode, table_of

LABELS = {"app": "web", "note": 'naïve ☃ "quoted"'}  # non-ASCII and quotes: the JSON survives as it was


def pod(name: str, uid: str, rv: str, labels: dict[str, str], ip: str = "10.1.0.3") -> WatchEvent:
    return WatchEvent(
        "ADDED" if rv == "3" else "MODIFIED",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "a", "uid": uid, "resourceVersion": rv, "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1.2"}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]},
        },
    )


def namespace() -> WatchEvent:
    return WatchEvent(
        "ADDED",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "uid": "ns-a", "resourceVersion": "1"}},
    )


def rows(database: Database, model: Any) -> list[Any]:
    with database.session() as session:
        return list(session.scalars(sa.select(model).order_by(model.id)))


def test_a_batch_of_new_pods_stores_their_values_and_a_found_rows_bookkeeping(database: Database) -> None:
    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    before = dt.datetime.now(dt.UTC)
    writer.apply(
        [Item.of("namespaces", namespace(), "1")]
        + [Item.of("pods", pod(f"p{i}", f"uid-{i}", "3", LABELS, f"10.1.0.{i}"), str(10 + i)) for i in range(3)]
    )
    pods = rows(database, KubernetesServiceInstance)
    assert [(p.name, p.pod_ip, p.pod_ips, p.labels, p.phase) for p in pods] == [
        (f"p{i}", f"10.1.0.{i}", [f"10.1.0.{i}"], LABELS, "Running") for i in range(3)
    ]
    for row in pods + rows(database, Slice) + rows(database, Image):
        assert before - dt.timedelta(seconds=1) <= row.created <= dt.datetime.now(dt.UTC), row
        assert row.created == row.updated == row.enacted, row
        assert (row.backend_status, row.backend_code, row.policy_code) == (STATUS_OK, SyncCode.OK, SyncCode.NEW), row
        assert not (row.xos_managed or row.deleted or row.backend_need_delete or row.no_sync or row.no_policy), row
    assert [p.backend_handle for p in pods] == [f"a/p{i}/uid-{i}" for i in range(3)]
    if database.is_sqlite:  # stored as the text UTCDateTime makes (the text is what SQL compares)
        with database.engine.connect() as db:
            stored = db.exec_driver_sql("select created, updated, enacted from service_instance").all()
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", text) for row in stored for text in row)
    assert pods[0].containers == [{"name": "c", "image": "nginx:1.2", "ready": False, "restart_count": 0}]
    events = rows(database, OutboxEvent)
    assert [(e.status, e.payload["labels"], e.payload["kubernetesserviceinstance_id"]) for e in events] == [
        ("created", LABELS, p.id) for p in pods
    ]


@pytest.mark.parametrize("labels", [{}, {"app": "web", "tier": "ü"}])
def test_an_update_of_a_batch_stores_the_new_json(database: Database, labels: dict[str, str]) -> None:
    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    writer.apply([Item.of("namespaces", namespace(), "1"), Item.of("pods", pod("p", "uid-p", "3", LABELS), "2")])
    result = writer.apply([Item.of("pods", pod("p", "uid-p", "4", labels, "10.1.0.9"), "3")])
    (row,) = rows(database, KubernetesServiceInstance)
    assert (row.labels, row.pod_ips, row.resource_version) == (labels, ["10.1.0.9"], "4")
    assert result.statuses and rows(database, OutboxEvent)[-1].payload["labels"] == labels


def test_a_failed_batch_stores_nothing_of_its_rows(database: Database) -> None:
    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    bad = pod("p", "uid-p", "3", LABELS)
    bad.object["metadata"]["labels"] = {"x": object()}  # not JSON: the batch fails before its commit
    with pytest.raises(TypeError):
        writer.apply([Item.of("namespaces", namespace(), "1"), Item.of("pods", bad, "2")])
    assert rows(database, KubernetesServiceInstance) == [] and rows(database, OutboxEvent) == []


def test_a_pod_that_comes_and_goes_within_one_batch_leaves_no_slice(database: Database) -> None:
    # A batch's slices, images and service accounts are made at write time, for the pods still there then.
    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    added = pod("brief", "uid-brief", "3", LABELS)
    gone = WatchEvent("DELETED", {**added.object, "metadata": {**added.object["metadata"], "resourceVersion": "5"}})
    kept = pod("kept", "uid-kept", "3", LABELS)
    items = [Item.of("namespaces", namespace(), "1"), Item.of("pods", added, "2"), Item.of("pods", kept, "3")]
    writer.apply([*items, Item.of("pods", gone, "4")])
    assert [p.name for p in rows(database, KubernetesServiceInstance)] == ["kept"]
    assert [s.name for s in rows(database, Slice)] == ["kept"]


def test_a_batchs_events_have_distinct_ids_one_time_and_their_rows_ids(database: Database) -> None:
    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    writer.apply(
        [Item.of("namespaces", namespace(), "1")]
        + [Item.of("pods", pod(f"p{i}", f"uid-{i}", "3", LABELS, f"10.1.0.{i}"), str(10 + i)) for i in range(3)]
    )
    events, pods = rows(database, OutboxEvent), {p.name: p.id for p in rows(database, KubernetesServiceInstance)}
    assert [(e.status, e.payload["name"]) for e in events] == [("created", f"p{i}") for i in range(3)]
    assert len({e.event_id for e in events}) == 3 and all(e.payload["event_id"] == e.event_id for e in events)
    assert len({e.payload["time"] for e in events}) == 1
    assert [e.payload["kubernetesserviceinstance_id"] for e in events] == [pods[f"p{i}"] for i in range(3)]


def test_bare_pods_slices_are_not_cached_and_their_updates_do_not_look_them_up(database: Database) -> None:
    """A bare pod's own slice is made once; its id lives on the pod's row, not in a cache that would grow with
    the cluster. An orphaned pod (its controller gone) moves to a slice of its own, and back."""
    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    owned = Item.of("pods", pod("owned", "uid-o", "3", LABELS), "3")
    owned.slice = SliceRef("web", "ReplicaSet", "uid-rs")
    writer.apply([Item.of("namespaces", namespace(), "1"), Item.of("pods", pod("p", "uid-p", "3", LABELS), "2"), owned])
    slices = {s.name: s.id for s in rows(database, Slice)}
    assert sorted(slices) == ["p", "web"]
    assert list(writer.implied.caches.slices) == [(rows(database, Slice)[0].trust_domain_id, "web")]

    statements: list[str] = []

    def executed(connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement)

    sa.event.listen(database.engine, "before_cursor_execute", executed)
    writer.apply([Item.of("pods", pod("p", "uid-p", "4", {"app": "db"}, "10.1.0.9"), "4")])
    sa.event.remove(database.engine, "before_cursor_execute", executed)
    assert statements, "the batch's statements were seen"
    table = table_of(Slice).name
    assert not [s for s in statements if re.search(rf"^\s*(INSERT INTO|SELECT\s.*\sFROM)\s+{table}\b", s, re.S)]
    assert {p.name: (p.slice_id, p.pod_ip) for p in rows(database, KubernetesServiceInstance)} == {
        "p": (slices["p"], "10.1.0.9"),
        "owned": (slices["web"], "10.1.0.3"),
    }
    assert list(writer.implied.caches.slices) == [(rows(database, Slice)[0].trust_domain_id, "web")]

    orphaned = Item.of("pods", pod("owned", "uid-o", "5", {"app": "web", "orphan": "yes"}), "5")  # no controller
    writer.apply([orphaned])
    adopted = Item.of("pods", pod("owned", "uid-o", "6", LABELS), "6")
    adopted.slice = SliceRef("web", "ReplicaSet", "uid-rs2")
    stored = {p.name: p.slice_id for p in rows(database, KubernetesServiceInstance)}
    own = {s.name: s.id for s in rows(database, Slice)}["owned"]
    assert stored["owned"] == own != slices["web"]
    writer.apply([adopted])
    assert {p.name: p.slice_id for p in rows(database, KubernetesServiceInstance)}["owned"] == slices["web"]


def test_a_processs_events_become_visible_in_the_order_of_their_ids(database: Database) -> None:
    """Two clusters' batches in one process: the first pauses between its events' INSERT and its COMMIT. The
    second's events wait for that COMMIT, so no reader sees an id above events still to come (the relay reads
    in id order from a cursor: on PostgreSQL, where ids are drawn at INSERT, it would pass the first's)."""
    with database.session() as session:
        session.add(KubernetesService(name="edge"))
    first, second = InventoryWriter(database, "kubernetes"), InventoryWriter(database, "edge")
    first.load()
    second.load()
    other = pod("q", "uid-q", "3", LABELS)
    other.object["spec"]["containers"][0]["image"] = "redis:7"  # no image row the first batch has locked
    batches = {
        "first": [Item.of("namespaces", namespace(), "1"), Item.of("pods", pod("p", "uid-p", "3", LABELS), "2")],
        "second": [Item.of("namespaces", namespace(), "1"), Item.of("pods", other, "2")],
    }
    outbox = table_of(OutboxEvent)
    inserted, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def pause_the_first(connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if threading.current_thread().name == "first" and statement.lstrip().startswith(f"INSERT INTO {outbox.name}"):
            inserted.set()
            release.wait(30)

    def apply(writer: InventoryWriter, name: str) -> threading.Thread:
        def run() -> None:
            try:
                writer.apply(batches[name])
            except BaseException as error:  # the test asserts none happened
                failures.append(error)

        thread = threading.Thread(target=run, name=name)
        thread.start()
        return thread

    def visible() -> list[str]:
        with database.engine.connect() as db:
            return list(db.execute(sa.select(outbox.c.cluster).order_by(outbox.c.id)).scalars())

    sa.event.listen(database.engine, "after_cursor_execute", pause_the_first)
    try:
        threads = [apply(first, "first")]
        assert inserted.wait(30), "the first batch never wrote its events"
        threads.append(apply(second, "second"))
        threads[1].join(2)
        assert threads[1].is_alive() and visible() == [], "the second batch committed before the first"
        release.set()
        for thread in threads:
            thread.join(30)
    finally:
        release.set()
        sa.event.remove(database.engine, "after_cursor_execute", pause_the_first)
    assert not failures
    assert visible() == ["kubernetes", "edge"]
