"""The informers' slim stores (watch/store.py): what a compact (encoded) store gives back, by table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kuberaven.kube.reflector import WatchEvent
from kuberaven.network.rules.policy import POD_POLICY_FIELDS
from kuberaven.network.rules.translate import POD_PORT_FIELDS
from kuberaven.watch.store import Store
from tests.helpers import least_traced_bytes

VIF = "kuberaven.io/vif"
POD_FIELDS = (*POD_PORT_FIELDS, *POD_POLICY_FIELDS)  # what the network translator's listers declare


def pod(name: str, rv: int = 1, *, namespace: str = "ns", uid: str = "u", **extra: Any) -> dict[str, Any]:
    """A whole pod as the API server gives it: more than any store keeps."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "resourceVersion": str(rv),
        "creationTimestamp": "2026-11-24T10:00:00Z",
        "labels": {"app": "web", "tier": "bench"},
        "annotations": {VIF: '{"port": "p-1", "ip": "10.0.0.9"}', "other": "y" * 100},
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
    }
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": "n1",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1",
                    "env": [{"name": "A", "value": "b"}],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP", "hostPort": 80}],
                }
            ],
        },
        "status": {"phase": "Running", "podIP": "10.0.0.9", "conditions": [{"type": "Ready"}]},
    }
    for path, value in extra.items():  # section__field=value
        section, _, field = path.partition("__")
        obj.setdefault(section, {})[field] = value
    return obj


def store_of(fields: tuple[str, ...] = POD_FIELDS, annotations: tuple[str, ...] = (VIF,), **indexers: Any) -> Store:
    store = Store()
    store.declare(fields, annotations, indexers)
    return store


def by_app(obj: dict[str, Any]) -> list[str]:
    return [v for v in [(obj["metadata"].get("labels") or {}).get("app")] if v]


def by_port_names(obj: dict[str, Any]) -> list[str]:
    """More than one value per object."""
    containers = (obj.get("spec") or {}).get("containers") or []
    return sorted({p["name"] for c in containers for p in c.get("ports") or [] if p.get("name")})


# -- every declared field comes back as it was, whatever its JSON type ---------------------------------------------

ROUND_TRIPS = [
    ("the translator's pod", pod("a"), None),
    ("deletionTimestamp and hostNetwork", pod("a", metadata__deletionTimestamp="2026-11-24T11:00:00Z"), None),
    ("a boolean", pod("a", spec__hostNetwork=True), None),
    ("null labels", pod("a", metadata__labels=None), None),
    ("empty labels", pod("a", metadata__labels={}), None),
    ("unicode and escapes", pod("a", metadata__labels={"team": 'équipe "ü" \n'}), None),
    ("no containers", pod("a", spec__containers=None), None),
    ("a container without ports", pod("a", spec__containers=[{"name": "c"}, {"ports": None}]), None),
    ("large and negative numbers", pod("a", spec__containers=[{"ports": [{"containerPort": 2**40}]}]), None),
    ("a port number as a float", pod("a", spec__containers=[{"ports": [{"containerPort": 8080.5}]}]), None),
    ("no status", pod("a", status__phase=None), None),
    ("a field kept whole", pod("a", spec__nodeName={"nested": [1, "two", None, {"x": False}]}), None),
    ("a namespace's labels", {"metadata": {"name": "ns", "uid": "n", "labels": {"a": "b"}}}, ("metadata.labels",)),
]


@pytest.mark.parametrize(("case", "obj", "fields"), ROUND_TRIPS, ids=[c[0] for c in ROUND_TRIPS])
def test_what_a_store_gives_back_is_the_slim_object_it_was_given(case: str, obj: dict, fields: tuple | None) -> None:
    store = store_of(fields or POD_FIELDS)
    store.update(WatchEvent("ADDED", obj))
    key = WatchEvent("ADDED", obj).key
    got = store.get(key)
    assert got == store.slim(obj)
    assert type(got) is dict
    assert list(store.all()) == [got]
    assert key in store and len(store) == 1


def test_only_declared_fields_are_kept() -> None:
    store = store_of()
    store.update(WatchEvent("ADDED", pod("a")))
    got = store.get("ns/a")
    assert got is not None
    assert set(got) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert set(got["metadata"]) == {"name", "namespace", "uid", "resourceVersion", "labels", "annotations"}
    assert got["spec"] == {
        "nodeName": "n1",
        "containers": [{"ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}],
    }
    assert got["status"] == {"phase": "Running", "podIP": "10.0.0.9"}


ANNOTATIONS = [
    # declared keys, the pod's annotations, what the store keeps
    ((VIF,), {VIF: "x", "other": "y"}, {VIF: "x"}),
    ((VIF,), {"other": "y"}, {}),
    ((VIF,), None, {}),
    ((VIF, "b"), {VIF: "x", "b": "", "c": "z"}, {VIF: "x", "b": ""}),
    ((), {VIF: "x"}, None),  # no annotation declared: none decoded, none kept
]


@pytest.mark.parametrize(("declared", "given", "kept"), ANNOTATIONS)
def test_a_store_keeps_only_the_annotation_keys_declared(
    declared: tuple, given: dict | None, kept: dict | None
) -> None:
    store = store_of(("metadata.labels",), declared)
    obj = pod("a", metadata__annotations=given)
    store.update(WatchEvent("ADDED", store.projection.apply(obj) if declared else obj))
    got = store.get("ns/a")
    assert got is not None
    assert got["metadata"].get("annotations") == kept


def test_each_read_is_a_fresh_object_that_the_reader_may_change() -> None:
    store = store_of(app=by_app)
    store.update(WatchEvent("ADDED", pod("a")))
    first = store.get("ns/a")
    assert first is not None
    first["metadata"]["labels"]["app"] = "changed"
    first["spec"]["containers"].clear()
    for read in (store.get("ns/a"), store.by_index("app", "web")[0], next(store.all())):
        assert read is not None and read is not first
        assert read["metadata"]["labels"]["app"] == "web" and read["spec"]["containers"]


def test_all_decodes_the_objects_of_the_call_one_by_one() -> None:
    store = store_of()
    for name in ("a", "b", "c"):
        store.update(WatchEvent("ADDED", pod(name)))
    every = store.all()
    first = next(every)
    store.update(WatchEvent("DELETED", pod("b", 2)))  # during the iteration: not seen, and no error
    store.update(WatchEvent("ADDED", pod("d")))
    rest = list(every)
    assert [o["metadata"]["name"] for o in (first, *rest)] == ["a", "b", "c"]
    assert sorted(o["metadata"]["name"] for o in store.all()) == ["a", "c", "d"]


# -- indices and what an event replaced ---------------------------------------------------------------------------

EVENTS: list[tuple[str, list[tuple[str, dict]], dict[str, list[str]], str | None]] = [
    # case, events, index "app" value → names, the label "app" of `previous` after the last event
    ("added", [("ADDED", pod("a"))], {"web": ["a"]}, None),
    ("two, sorted by key", [("ADDED", pod("b")), ("ADDED", pod("a"))], {"web": ["a", "b"]}, None),
    (
        "relabelled",
        [("ADDED", pod("a")), ("MODIFIED", pod("a", 2, metadata__labels={"app": "db"}))],
        {"web": [], "db": ["a"]},
        "web",
    ),
    (
        "label removed",
        [("ADDED", pod("a")), ("MODIFIED", pod("a", 2, metadata__labels=None))],
        {"web": []},
        "web",
    ),
    ("deleted", [("ADDED", pod("a")), ("DELETED", pod("a", 3))], {"web": []}, "web"),
    ("deleted, never known", [("DELETED", pod("a", 3))], {"web": []}, None),
    (
        "one of two deleted",
        [("ADDED", pod("a")), ("ADDED", pod("b")), ("DELETED", pod("b", 3))],
        {"web": ["a"]},
        "web",
    ),
    (
        "same key in another namespace",
        [("ADDED", pod("a")), ("ADDED", pod("a", namespace="other", metadata__labels={"app": "db"}))],
        {"web": ["a"], "db": ["a"]},
        None,
    ),
]


@pytest.mark.parametrize(("case", "events", "index", "previous_app"), EVENTS, ids=[c[0] for c in EVENTS])
def test_indices_and_previous_follow_the_events(
    case: str, events: list, index: dict[str, list[str]], previous_app: str | None
) -> None:
    store = store_of(app=by_app, ports=by_port_names)
    for kind, obj in events:
        store.update(WatchEvent(kind, obj))
    for value, names in index.items():
        assert [o["metadata"]["name"] for o in store.by_index("app", value)] == names
    previous = store.previous
    assert (previous["metadata"]["labels"]["app"] if previous else None) == previous_app
    assert store.by_index("app", "none") == []
    live = [o["metadata"]["name"] for o in store.all()]
    assert sorted(o["metadata"]["name"] for o in store.by_index("ports", "http")) == sorted(live)


def test_previous_is_the_whole_slim_object_replaced() -> None:
    store = store_of()
    store.update(WatchEvent("ADDED", pod("a")))
    before = store.get("ns/a")
    store.update(WatchEvent("MODIFIED", pod("a", 2, status__phase="Succeeded")))
    assert store.previous == before
    assert store.get("ns/a")["status"]["phase"] == "Succeeded"  # type: ignore[index]
    store.update(WatchEvent("DELETED", pod("a", 3)))
    assert store.previous is not None and store.previous["status"]["phase"] == "Succeeded"
    assert store.get("ns/a") is None and len(store) == 0 and "ns/a" not in store


# -- reads that fill the store: the watch stays the writer of what is current -------------------------------------

READS = [
    # case, what the watch knew before, what it did while the read ran, what the read found, resourceVersion kept
    ("new to the store", [], [], [pod("a", 4)], "4"),
    ("older than the watch's", [pod("a", 9)], [], [pod("a", 4)], "9"),
    ("newer than the watch's", [pod("a", 3)], [], [pod("a", 4)], "4"),
    ("deleted during the read", [pod("a", 3)], [("DELETED", pod("a", 5))], [pod("a", 4)], None),
    ("modified during the read", [], [("MODIFIED", pod("a", 6))], [pod("a", 4)], "6"),
    (
        "deleted then re-made during the read",
        [],
        [("DELETED", pod("a", 5)), ("ADDED", pod("a", 6))],
        [pod("a", 4)],
        "6",
    ),
    ("not a revision", [pod("a", 3)], [], [pod("a", 4, metadata__resourceVersion="x")], "3"),
]


@pytest.mark.parametrize(("case", "known", "during", "found", "kept"), READS, ids=[c[0] for c in READS])
def test_a_read_keeps_only_what_the_watch_has_not_superseded(
    case: str, known: list, during: list, found: list, kept: str | None
) -> None:
    store = store_of(app=by_app)
    for obj in known:
        store.update(WatchEvent("ADDED", obj))
    read = store.begin_read()
    for kind, obj in during:
        store.update(WatchEvent(kind, obj))
    store.end_read(read, [store.slim(obj) for obj in found])
    got = store.get("ns/a")
    assert (got["metadata"]["resourceVersion"] if got else None) == kept
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == (["a"] if kept else [])


def test_a_store_holds_a_pod_in_well_under_a_kibibyte() -> None:
    """The point of the encoded form: nested dicts held ~2.9 KiB a pod (docs/benchmarks.md)."""
    count = 2000

    def prepare() -> Callable[[], None]:
        store = store_of()
        pods = [pod(f"pod-{i:05d}", 100 + i, uid=f"{i:08d}-aaaa-bbbb-cccc-dddddddddddd") for i in range(count)]

        def step() -> None:
            for obj in pods:
                store.update(WatchEvent("ADDED", obj))

        return step

    per_pod = least_traced_bytes(prepare) / count
    assert per_pod < 1024, per_pod


def test_the_store_keeps_the_reflectors_key_string_not_a_copy() -> None:
    """One key string per object for the reflector's record and the store (kube/reflector.py's known_key)."""
    key = "/".join(["ns", "a"])  # a string object of its own, equal to the object's key
    store = store_of()
    store.update(WatchEvent("ADDED", pod("a"), known_key=key))
    store.update(WatchEvent("MODIFIED", pod("a", 2), known_key="/".join(["ns", "a"])))
    assert [k for k in store._objects] == ["ns/a"]
    assert next(iter(store._objects)) is key  # the first one stays: a dict keeps the key it was given
    assert WatchEvent("ADDED", pod("b")).key == "ns/b"  # without one: made from the object
