"""Pure functions of the inventory: image references, pod records, what is kept of an object, what is watched."""

from __future__ import annotations

import pytest

from kuberaven.inventory.component import TARGETS, inventory_targets
from kuberaven.inventory.records import data_keys, pod_record, service_ports, slim
from kuberaven.model.images import parse_image
from kuberaven.settings import load_settings


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("nginx", ("nginx", "latest", "")),
        ("nginx:1.25", ("nginx", "1.25", "")),
        ("registry:5000/img", ("registry:5000/img", "latest", "")),
        ("registry:5000/org/img:tag", ("registry:5000/org/img", "tag", "")),
        ("registry:5000/org/img:tag@sha256:abc", ("registry:5000/org/img", "tag", "sha256:abc")),
        ("img@sha256:abc", ("img", "", "sha256:abc")),
        ("k8s.gcr.io/pause-amd64:3.0", ("k8s.gcr.io/pause-amd64", "3.0", "")),
    ],
)
def test_image_references_parse_like_kubernetes(reference: str, expected: tuple[str, str, str]) -> None:
    parsed = parse_image(reference)
    assert tuple(parsed) == expected
    assert str(parsed) == (
        reference if ":" in reference.rpartition("/")[2] or "@" in reference else reference + ":latest"
    )


@pytest.mark.parametrize(
    "bad", ["", "  ", "img:", "has space:1", "@sha256:abc", "nginx:1.25:bad", "reg:5000/img:a:b", "img:-x"]
)
def test_bad_image_references_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_image(bad)


POD = {
    "metadata": {
        "name": "p",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "7",
        "labels": {"app": "a"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}],
    },
    "spec": {
        "nodeName": "n1",
        "serviceAccountName": "robot",
        "containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "busybox"}],
    },
    "status": {
        "phase": "Running",
        "podIP": "10.1.0.5",
        "podIPs": [{"ip": "10.1.0.5"}, {"ip": "fd00::5"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "a", "ready": True, "restartCount": 2},
            {"name": "b", "ready": True, "restartCount": 0},
        ],
    },
}


def test_pod_record_reads_every_container_and_ip() -> None:
    record = pod_record(POD)
    assert record.pod_ips == ["10.1.0.5", "fd00::5"] and record.pod_ip == "10.1.0.5"
    assert record.restart_count == 2 and record.ready and record.service_account == "robot"
    assert [i.name for i in record.images] == ["nginx", "busybox"]
    assert record.controller is not None and record.controller["name"] == "rs"


def test_data_keys_never_include_values() -> None:
    assert data_keys({"data": {"b": "x"}, "binaryData": {"a": "y"}}) == ["a", "b"]


def test_slim_keeps_what_the_inventory_reads_and_drops_values() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "s",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "3",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"big": "x" * 1000},
        },
        "data": {"password": "c2VjcmV0"},
        "stringData": {"token": "plain"},
    }
    slimmed = slim(secret)
    assert slimmed["metadata"] == {"name": "s", "namespace": "ns", "uid": "u", "resourceVersion": "3"}
    assert data_keys(slimmed) == ["password", "token"]
    assert "c2VjcmV0" not in repr(slimmed) and "plain" not in repr(slimmed)

    ports = [{"port": 80, "targetPort": 8080, "nodePort": 30080}]
    service = {
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "4"},
        "spec": {"selector": {"app": "a"}, "ports": ports},
    }
    assert service_ports(slim(service)) == service_ports(service)

    pod = {**POD, "kind": "Pod"}
    assert slim(pod)["metadata"] == POD["metadata"]  # what the owner walk reads
    assert "spec" not in slim(pod) and "status" not in slim(pod)  # the record has read them already


def test_the_secret_inventory_can_be_turned_off_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().inventory.inventory_secrets, "on by default, as before the setting"
    monkeypatch.setenv("KUBERAVEN_INVENTORY_SECRETS", "false")
    options = load_settings().inventory
    assert inventory_targets(options.inventory_secrets) == {t: k for t, k in TARGETS.items() if k != ("v1", "Secret")}
    assert inventory_targets(True) == TARGETS
