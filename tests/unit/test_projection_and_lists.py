"""Decode-time projection (kube/projection.py) and the rule that every LIST is paged (kube/client.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kuberaven.inventory.records import POD_FIELDS, pod_record
from kuberaven.kube.client import KubeClient, is_collection
from kuberaven.kube.errors import UnboundedList
from kuberaven.kube.projection import Projection

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-1",
        "namespace": "shop",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"app": "web"},
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 2000},
    },
    "spec": {
        "nodeName": "node-1",
        "serviceAccountName": "web",
        "containers": [{"name": "app", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}] * 30}],
        "volumes": [{"name": "v", "emptyDir": {}}],
    },
    "status": {
        "phase": "Running",
        "podIP": "10.1.0.5",
        "podIPs": [{"ip": "10.1.0.5"}],
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "containerStatuses": [{"name": "app", "ready": True, "restartCount": 2, "imageID": "sha256:abc"}],
    },
}


def test_a_projected_pod_keeps_what_the_inventory_reads_and_nothing_else() -> None:
    projection = Projection(POD_FIELDS)
    frame = projection.frame.decode(json.dumps({"type": "MODIFIED", "object": POD}).encode())
    slim = frame["object"]
    assert pod_record(slim) == pod_record(POD)  # the record is the same as from the whole object
    assert "managedFields" not in slim["metadata"] and "annotations" not in slim["metadata"]
    assert "env" not in slim["spec"]["containers"][0] and "volumes" not in slim["spec"]
    assert len(msgspec.json.encode(slim)) < len(json.dumps(POD)) / 4


def test_a_list_page_is_projected_item_by_item_and_keeps_its_metadata() -> None:
    page = {"metadata": {"resourceVersion": "50", "continue": "t", "remainingItemCount": 7}, "items": [POD, POD]}
    decoded = Projection(("status.phase",)).page.decode(json.dumps(page).encode())
    assert decoded["metadata"] == page["metadata"] and decoded["items"] is not None
    assert decoded["items"][0] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "42"},
        "status": {"phase": "Running"},
    }


def test_null_fields_decode_and_an_error_status_does_not_fit_a_pod() -> None:
    projection = Projection(POD_FIELDS)
    nulls = {"type": "ADDED", "object": {**POD, "metadata": {**POD["metadata"], "labels": None}, "status": None}}
    assert projection.frame.decode(json.dumps(nulls).encode())["object"]["status"] is None
    status = {"type": "ERROR", "object": {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"}}
    with pytest.raises(msgspec.ValidationError):  # the reflector then reads the frame whole
        projection.frame.decode(json.dumps(status).encode())


def test_a_consumer_that_wants_whole_objects_gets_them() -> None:
    union = Projection(("status.phase",)).union(Projection(None))
    assert union.frame.decode(json.dumps({"type": "ADDED", "object": POD}).encode())["object"] == POD


@pytest.mark.parametrize(
    ("path", "collection"),
    [
        ("/api/v1/pods", True),
        ("/api/v1/namespaces", True),
        ("/api/v1/namespaces/shop/pods", True),
        ("/apis/apps/v1/namespaces/shop/deployments", True),
        ("/apis/apps/v1/deployments", True),
        ("/api/v1/namespaces/shop", False),
        ("/api/v1/namespaces/shop/pods/web-1", False),
        ("/api/v1/namespaces/shop/pods/web-1/status", False),
        ("/api/v1/nodes/node-1/status", False),
        ("/api/v1", False),
        ("/apis/apps/v1", False),
        ("/version", False),
    ],
)
def test_which_paths_are_lists(path: str, collection: bool) -> None:
    assert is_collection(path) is collection


async def test_a_list_without_limit_is_refused_before_it_is_sent() -> None:
    """The guard every caller goes through: adding an unpaged LIST anywhere fails the tests that reach it."""
    client = KubeClient.__new__(KubeClient)  # no server: the request must not get as far as the network
    with pytest.raises(UnboundedList, match="LIST /api/v1/pods without limit"):
        await client.request("GET", "/api/v1/pods")
    with pytest.raises(UnboundedList):
        await client.request("GET", "/api/v1/namespaces/shop/pods", params={"labelSelector": "app=web"})


def test_each_consumer_of_a_shared_informer_keeps_only_its_own_fields() -> None:
    inventory, translator = Projection(POD_FIELDS), Projection(("status.podIP", "spec.hostNetwork"))
    union = inventory.union(translator)
    decoded = union.frame.decode(json.dumps({"type": "ADDED", "object": POD}).encode())["object"]
    assert translator.apply(decoded) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "42"},
        "spec": {},
        "status": {"podIP": "10.1.0.5"},
    }
    assert pod_record(inventory.apply(decoded)) == pod_record(POD)
    assert inventory.narrower_than(union) and translator.narrower_than(union) and not union.narrower_than(union)
    assert not Projection(None).narrower_than(union)
    assert Projection(None).apply(POD) is POD
