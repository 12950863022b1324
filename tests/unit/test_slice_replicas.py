"""Who writes a slice's controller_replica_count (inventory/replicas.py, records.replicas_watched()): plain data."""

from __future__ import annotations

from typing import Any

import pytest

from kuberaven.inventory.records import SliceRef, replicas_watched
from kuberaven.inventory.replicas import counted, desired_replicas, first_count, pod_sets_count

DEPLOYMENT = SliceRef("web", "Deployment", "uid-web", 2, watched=True)  # the owner walk read 2 (maybe long ago)
FLOCK = SliceRef("birds", "Flock", "uid-birds", 4)  # a custom kind's scale subresource said 4
BARE = SliceRef("lonely", "Pod", "uid-lonely")


@pytest.mark.parametrize(
    ("api_version", "kind", "watched"),
    [
        ("apps/v1", "Deployment", True),
        ("apps/v1", "ReplicaSet", True),
        ("apps/v1", "StatefulSet", True),
        ("v1", "ReplicationController", True),
        ("apps/v1beta2", "Deployment", True),  # another version of the same group: the same objects
        ("apps/v1", "DaemonSet", False),  # no replicas
        ("batch/v1", "Job", False),
        ("example.io/v1", "Deployment", False),  # a custom kind of that name: its scale subresource
        ("", "Deployment", False),  # no apiVersion given: not the apps group's
    ],
)
def test_only_built_in_replicated_kinds_are_counted_by_their_watches(
    api_version: str, kind: str, watched: bool
) -> None:
    assert replicas_watched(api_version, kind) is watched


def controller(replicas: int | None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "uid": "uid-web"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": {} if replicas is None else {"replicas": replicas}}


@pytest.mark.parametrize(
    ("event_type", "obj", "expected"),
    [
        ("ADDED", controller(3), True),
        ("MODIFIED", controller(0), True),
        ("DELETED", controller(3), False),  # its slices go with their pods
        ("MODIFIED", controller(3, {"kind": "Deployment", "uid": "d", "controller": True}), False),
        ("MODIFIED", controller(3, {"kind": "Deployment", "uid": "d"}), True),  # an owner, not its controller
    ],
)
def test_a_controllers_event_counts_for_slices_only_while_it_is_a_top_controller(
    event_type: str, obj: dict[str, Any], expected: bool
) -> None:
    assert counted(event_type, obj) is expected


def test_desired_replicas_are_spec_replicas_or_none() -> None:
    assert (desired_replicas(controller(3)), desired_replicas(controller(None)), desired_replicas({})) == (
        3,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("ref", "watched", "expected"),
    [
        (DEPLOYMENT, {"uid-web": 5}, 5),  # the watch scaled it since the owner cache read 2
        (DEPLOYMENT, {"uid-web": None}, None),
        (DEPLOYMENT, {}, 2),  # its watch event has not come yet: it will correct the first value
        (DEPLOYMENT, {"uid-other": 9}, 2),
        (FLOCK, {"uid-birds": 9}, 4),  # never a watch's for a custom kind
        (BARE, {}, None),
    ],
)
def test_a_new_slice_starts_from_the_watch_else_the_owner_walk(
    ref: SliceRef, watched: dict[str, int | None], expected: int | None
) -> None:
    assert first_count(ref, watched) == expected


@pytest.mark.parametrize(
    ("ref", "stored", "writes"),
    [
        (DEPLOYMENT, 5, False),  # a stale owner cache never overwrites the watch's count
        (DEPLOYMENT, None, False),
        (DEPLOYMENT, 2, False),
        (FLOCK, 3, True),  # the custom kind scaled: the owner walk is its writer
        (FLOCK, None, True),  # a found slice whose count this process has not written
        (FLOCK, 4, False),
        (BARE, None, False),
    ],
)
def test_a_pods_path_writes_a_found_slices_count_only_for_custom_controllers(
    ref: SliceRef, stored: int | None, writes: bool
) -> None:
    assert pod_sets_count(ref, stored) is writes
