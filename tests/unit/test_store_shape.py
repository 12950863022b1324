"""The store's fixed-shape encoding (watch/shape.py): every lister's projection round-trips, by table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from kuberaven.kube.projection import Projection
from kuberaven.kube.reflector import WatchEvent
from kuberaven.network.annotations import ANNOTATION
from kuberaven.network.endpointslices import ENDPOINTS_FIELDS, SLICE_FIELDS
from kuberaven.network.reconcilers.loadbalancers import SERVICE_FIELDS
from kuberaven.network.reconcilers.network_policies import LABELS
from kuberaven.network.rules.lb_annotations import ANNOTATIONS as LB_ANNOTATIONS
from kuberaven.network.rules.policy import POD_POLICY_FIELDS
from kuberaven.network.rules.translate import POD_PORT_FIELDS
from kuberaven.network.vif import VIF_ANNOTATION
from kuberaven.watch.shape import Shape
from kuberaven.watch.store import Store
from tests.helpers import least_traced_bytes

META: dict[str, Any] = {"name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"}
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {**META, "labels": {"app": "web"}, "annotations": {VIF_ANNOTATION: "{}"}},
    "spec": {
        "nodeName": "n1",
        "hostNetwork": False,
        "containers": [{"ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}, {"ports": None}, {}],
    },
    "status": {"phase": "Running", "podIP": "10.0.0.9"},
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {**META, "annotations": {ANNOTATION: "x"}},
    "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": "web"}},
    "status": {"loadBalancer": {}},
}
SLICE = {
    "apiVersion": "discovery.k8s.io/v1beta1",
    "kind": "EndpointSlice",
    "metadata": {**META, "labels": {"kubernetes.io/service-name": "s"}},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.0.0.9"], "conditions": {"ready": True}}],
    "ports": None,
}
ENDPOINTS = {"apiVersion": "v1", "kind": "Endpoints", "metadata": META, "subsets": [{"addresses": [{"ip": "1.2.3.4"}]}]}
POLICY = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": META, "spec": {"podSelector": {}}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "uid": "n", "labels": None}}

# (what, the lister's fields, its annotation keys, an object of that kind): every store the translator declares
LISTERS = [
    ("pods: ports and policies", (*POD_PORT_FIELDS, *POD_POLICY_FIELDS), (VIF_ANNOTATION,), POD),
    ("pods: ports only", POD_PORT_FIELDS, (VIF_ANNOTATION,), POD),
    ("services", SERVICE_FIELDS, (ANNOTATION, *LB_ANNOTATIONS), SERVICE),
    ("endpoint slices", SLICE_FIELDS, (), SLICE),
    ("endpoints", ENDPOINTS_FIELDS, (), ENDPOINTS),
    ("network policies", ("spec",), (), POLICY),
    ("namespaces: labels", (LABELS,), (), NAMESPACE),
    ("namespaces: annotation", (), (ANNOTATION,), NAMESPACE),
]


def store_of(fields: tuple[str, ...], annotations: tuple[str, ...]) -> Store:
    store = Store()
    store.declare(fields, annotations, {})
    return store


@pytest.mark.parametrize(("what", "fields", "annotations", "obj"), LISTERS, ids=[c[0] for c in LISTERS])
def test_every_listers_projection_round_trips_without_its_field_names(
    what: str, fields: tuple[str, ...], annotations: tuple[str, ...], obj: dict[str, Any]
) -> None:
    store = store_of(fields, annotations)
    slim = store.slim(obj)
    blob = store.shape.encode(slim)
    assert store.shape.decode(blob) == slim
    assert isinstance(msgspec.msgpack.decode(blob), list)  # the fixed shape, not a map
    assert b"resourceVersion" not in blob and b"metadata" not in blob
    assert len(blob) < len(msgspec.msgpack.encode(slim))
    store.update(WatchEvent("ADDED", obj))
    assert store.get(WatchEvent("ADDED", obj).key) == slim


# (case, paths, value given, whether it keeps the fixed shape)
SHAPES: list[tuple[str, tuple[str, ...], dict[str, Any], bool]] = [
    ("every field absent", ("a.b", "c"), {}, True),
    ("absent differs from null", ("a.b", "c"), {"a": None}, True),
    ("null inside", ("a.b", "c"), {"a": {"b": None}, "c": None}, True),
    ("a leaf keeps any JSON value", ("a",), {"a": {"x": [1, {"y": None}], "z": 1.5}}, True),
    ("a list of dicts, with nulls and empty ones", ("l[].x",), {"l": [{"x": 1}, None, {}]}, True),
    ("an empty list", ("l[].x",), {"l": []}, True),
    ("lists in lists", ("l[].m[].x",), {"l": [{"m": [{"x": "1"}, {}]}, {"m": None}]}, True),
    ("a list where the tree names a dict", ("a.b",), {"a": [{"b": 1}]}, False),
    ("a dict where the tree names a list", ("l[].x",), {"l": {"x": 1}}, False),
    ("a number where the tree names a dict", ("a.b",), {"a": 3}, False),
    ("a string in a list of dicts", ("l[].x",), {"l": ["x"]}, False),
    ("a field the tree does not name", ("a.b",), {"a": {"b": 1, "other": 2}}, False),
    ("a field the tree does not name, at the top", ("a",), {"a": 1, "other": 2}, False),
]


@pytest.mark.parametrize(("case", "paths", "value", "fixed"), SHAPES, ids=[c[0] for c in SHAPES])
def test_a_value_round_trips_in_the_fixed_shape_or_else_as_the_map_it_is(
    case: str, paths: tuple[str, ...], value: dict[str, Any], fixed: bool
) -> None:
    shape = Shape(Projection(paths).tree)
    blob = shape.encode(value)
    decoded = shape.decode(blob)
    assert decoded == value
    assert type(decoded) is dict
    assert isinstance(msgspec.msgpack.decode(blob), list) is fixed


def test_without_a_tree_objects_are_kept_as_maps() -> None:
    shape = Shape(None)
    assert shape.decode(shape.encode(POD)) == POD
    assert isinstance(msgspec.msgpack.decode(shape.encode(POD)), dict)


def test_a_lister_declared_after_objects_were_kept_reencodes_them() -> None:
    """A wider shape reads what the narrower one wrote (listers are declared before the informer runs, but if not)."""
    store = store_of(POD_PORT_FIELDS, (VIF_ANNOTATION,))
    store.update(WatchEvent("ADDED", POD))
    store.update(WatchEvent("MODIFIED", POD))  # ``previous`` is now an encoded object too
    narrow = store.get("ns/a")
    store.declare(POD_POLICY_FIELDS, (), {})
    assert store.get("ns/a") == narrow
    assert store.previous == narrow
    store.update(WatchEvent("MODIFIED", POD))
    assert store.get("ns/a") == store.slim(POD) != narrow  # now with the labels and container ports


def test_a_pods_store_keeps_a_pod_in_about_a_quarter_of_a_kibibyte() -> None:
    """0.46 KiB a pod with the field names (msgpack maps), about 0.27 KiB without."""
    count = 2000

    def prepare() -> Callable[[], None]:
        store = store_of((*POD_PORT_FIELDS, *POD_POLICY_FIELDS), (VIF_ANNOTATION,))
        events = []
        for i in range(count):
            meta = {**POD["metadata"], "name": f"pod-{i:05d}", "uid": f"{i:08d}-aaaa-bbbb-cccc-dddddddddddd"}
            events.append(WatchEvent("ADDED", {**POD, "metadata": meta}, known_key=f"ns/pod-{i:05d}"))

        def step() -> None:
            for event in events:
                store.update(event)
            store._previous = None

        return step

    per_pod = least_traced_bytes(prepare) / count
    assert per_pod < 320, per_pod
