"""The pod lifecycle (inventory/lifecycle.py): every row of the event contract's table, as plain data."""

from __future__ import annotations

from typing import Any

import pytest

from kuberaven.inventory.lifecycle import Observed, PodEvent, pod_transition
from kuberaven.inventory.records import PodRecord

CREATED, UPDATED, RESTARTED, DELETED = PodEvent


def pod(
    uid: str = "u1",
    ips: tuple[str, ...] = ("10.1.0.5",),
    phase: str = "Running",
    restarts: int = 0,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    node: str = "n1",
    rv: str = "7",
) -> PodRecord:
    return PodRecord(
        namespace="ns",
        name="web",
        uid=uid,
        resource_version=rv,
        phase=phase,
        node=node,
        pod_ips=list(ips),
        ready=ready,
        restart_count=restarts,
        labels=labels if labels is not None else {"app": "web"},
        containers=[{"name": "app", "image": "nginx", "ready": ready, "restart_count": restarts}],
    )


def run(*steps: PodRecord | None, start: Observed | None = None) -> tuple[list[tuple[PodEvent, str]], Observed | None]:
    """Feed successive observations (None: gone) from ``start``; the events (status, uid) and the last columns."""
    events: list[tuple[PodEvent, str]] = []
    state = start
    for step in steps:
        transition = pod_transition(state, step)
        events += [(status, observed["uid"]) for status, observed in transition.events]
        state = transition.next
    return events, state


PENDING = pod(ips=(), phase="Pending", node="")

TABLE: list[tuple[str, list[PodRecord | None], list[tuple[PodEvent, str]]]] = [
    ("first sight Pending without IP", [PENDING], []),
    ("IP assigned", [PENDING, pod()], [(CREATED, "u1")]),
    ("first sight already Running with an IP", [pod()], [(CREATED, "u1")]),
    ("Running, and ready only later: nothing more", [PENDING, pod(ready=False), pod()], [(CREATED, "u1")]),
    ("IP changed", [pod(), pod(ips=("10.1.0.9",))], [(CREATED, "u1"), (UPDATED, "u1")]),
    ("labels changed", [pod(), pod(labels={"app": "web", "v": "2"})], [(CREATED, "u1"), (UPDATED, "u1")]),
    ("phase changed", [pod(), pod(phase="Succeeded")], [(CREATED, "u1"), (UPDATED, "u1")]),
    ("a new resourceVersion only", [pod(), pod(rv="8"), pod(node="n1", rv="9")], [(CREATED, "u1")]),
    ("container restart", [pod(), pod(restarts=1)], [(CREATED, "u1"), (RESTARTED, "u1")]),
    (
        "restart before it had an IP: nothing yet",
        [PENDING, pod(ips=(), restarts=1), pod(restarts=1)],
        [(CREATED, "u1")],
    ),
    ("replaced under the same name", [pod(), pod(uid="u2")], [(CREATED, "u1"), (DELETED, "u1"), (CREATED, "u2")]),
    (
        "replaced, the new one without IP yet",
        [pod(), pod(uid="u2", ips=()), pod(uid="u2")],
        [(CREATED, "u1"), (DELETED, "u1"), (CREATED, "u2")],
    ),
    ("replaced before the old one had an IP", [PENDING, pod(uid="u2")], [(CREATED, "u2")]),
    ("deleted after it had created", [pod(), None], [(CREATED, "u1"), (DELETED, "u1")]),
    ("deleted before it ever had an IP", [PENDING, None], []),
    (
        "deleted after updates: once",
        [pod(), pod(ips=("10.1.0.9",)), None],
        [(CREATED, "u1"), (UPDATED, "u1"), (DELETED, "u1")],
    ),
]


@pytest.mark.parametrize(("steps", "expected"), [(s, e) for _, s, e in TABLE], ids=[name for name, *_ in TABLE])
def test_the_event_contract(steps: list[PodRecord | None], expected: list[tuple[PodEvent, str]]) -> None:
    assert run(*steps)[0] == expected


def test_deleted_while_the_daemon_was_down_is_announced_from_the_stored_row() -> None:
    """A relist finds the pod gone: only the row says what it was, and that it had "created"."""
    _, stored = run(pod(), pod(restarts=1))
    assert stored is not None and stored["last_event_sent"] == RESTARTED
    assert run(None, start=stored)[0] == [(DELETED, "u1")]


def test_created_is_sent_once_per_uid_across_restarts() -> None:
    """What the row stores is enough: the same observation again (a replay after a restart) sends nothing."""
    _, stored = run(pod())
    assert run(pod(), pod(rv="9"), start=stored)[0] == []


def test_a_managed_pod_provisioned_before_the_inventory_saw_it() -> None:
    """Provisioning writes no observed columns: its row starts without a uid, like a pod never seen."""
    provisioned: dict[str, Any] = {"uid": None, "last_event_sent": None}
    assert run(PENDING, pod(), start=provisioned)[0] == [(CREATED, "u1")]


def test_each_event_carries_the_state_it_describes() -> None:
    transition = pod_transition(run(pod())[1], pod(uid="u2", ips=("10.1.0.7",)))
    (deleted, old), (created, new) = transition.events
    assert (deleted, old["uid"], old["pod_ips"]) == (DELETED, "u1", ["10.1.0.5"])
    assert (created, new["uid"], new["pod_ips"]) == (CREATED, "u2", ["10.1.0.7"])
