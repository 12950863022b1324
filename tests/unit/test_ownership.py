"""Which clusters a replica takes and releases (runtime/ownership.py), from plain data."""

from __future__ import annotations

import pytest

from kuberaven.runtime.ownership import (
    LeaseView,
    Observation,
    Plan,
    alive_replicas,
    cluster_lease,
    plan_ownership,
    replica_group,
    replica_lease,
)

ME, OTHER = "me", "other"
FREE = LeaseView("", expired=False)
MINE = LeaseView(ME, expired=False)
HELD = LeaseView(OTHER, expired=False)
EXPIRED = LeaseView(OTHER, expired=True)


@pytest.mark.parametrize(
    ("clusters", "leases", "alive", "plan"),
    [
        # Alone: every cluster is ours to take, Leases never made count as free.
        (["a", "b"], {}, 1, Plan(take=("a", "b"), release=())),
        # Two replicas, two clusters: one each; the one holding both hands one back (the last by name).
        (["a", "b"], {"a": MINE, "b": MINE}, 2, Plan(take=(), release=("b",))),
        (["a", "b"], {"a": HELD, "b": FREE}, 2, Plan(take=("b",), release=())),
        # At its share: takes nothing more even when a cluster is free.
        (["a", "b"], {"a": MINE, "b": FREE}, 2, Plan(take=(), release=())),
        # A held Lease is left alone, an expired one is taken (its holder died).
        (["a", "b"], {"a": HELD, "b": HELD}, 1, Plan(take=(), release=())),
        (["a", "b"], {"a": HELD, "b": EXPIRED}, 1, Plan(take=("b",), release=())),
        # The other replica died: alone again, it takes the expired cluster as well.
        (["a", "b"], {"a": MINE, "b": EXPIRED}, 1, Plan(take=("b",), release=())),
        # ceil(3 / 2) = 2: holding all three, it keeps two.
        (["c", "a", "b"], {"a": MINE, "b": MINE, "c": MINE}, 2, Plan(take=(), release=("c",))),
        # ceil(4 / 3) = 2 with one held by another: takes up to two, in name order.
        (["a", "b", "c", "d"], {"a": HELD}, 3, Plan(take=("b", "c"), release=())),
        # More replicas than clusters: a share of one each, and nothing to take when all are held.
        (["a"], {"a": HELD}, 3, Plan(take=(), release=())),
        # No clusters: nothing to do (and no division by zero with no replica counted).
        ([], {}, 0, Plan(take=(), release=())),
    ],
)
def test_plan_ownership(clusters: list[str], leases: dict[str, LeaseView], alive: int, plan: Plan) -> None:
    assert plan_ownership(ME, clusters, leases, alive) == plan


def test_two_replicas_starting_together_end_with_one_cluster_each() -> None:
    """Replayed rounds: each replica plans from the Leases as the other left them; a take succeeds if free."""
    leases: dict[str, LeaseView] = {}
    for _ in range(3):
        for identity in ("r1", "r2"):
            view = {c: LeaseView(h.holder if h.holder != identity else ME, h.expired) for c, h in leases.items()}
            plan = plan_ownership(ME, ["a", "b"], view, alive=2)
            for cluster in plan.release:
                leases[cluster] = FREE
            for cluster in plan.take:
                leases[cluster] = LeaseView(identity, expired=False)
    assert sorted(lease.holder for lease in leases.values()) == ["r1", "r2"]


@pytest.mark.parametrize(
    ("observations", "now", "alive"),
    [
        ([Observation("a", 15.0, 100.0), Observation("b", 15.0, 90.0)], 100.0, 2),
        ([Observation("a", 15.0, 100.0), Observation("b", 15.0, 80.0)], 100.0, 1),  # b not renewed for 20 s
        ([Observation("a", 15.0, 100.0), Observation("", 1.0, 100.0)], 100.0, 1),  # b released its Lease
        ([], 100.0, 0),
    ],
)
def test_alive_replicas(observations: list[Observation], now: float, alive: int) -> None:
    assert alive_replicas(observations, now) == alive


def test_lease_names_are_dns_subdomains() -> None:
    assert cluster_lease("kuberaven", "kubernetes") == "kuberaven-cluster-kubernetes"
    assert cluster_lease("kuberaven", "Edge_Site 1") == "kuberaven-cluster-edge-site-1"
    assert replica_lease("kuberaven", "Pod-7f9.local-12") == "kuberaven-replica-pod-7f9.local-12"
    assert len(cluster_lease("kuberaven", "x" * 400)) == 253


def test_replicas_of_one_lease_name_form_one_group_whose_label_is_valid() -> None:
    """Replicas count only their own kind (one lease_name): another kuberaven in the namespace shares no cluster."""
    assert replica_group("kuberaven") == "kuberaven"
    assert replica_group("kuberaven") != replica_group("bench-1a2b3c")
    long = replica_group("k" * 200)  # a Lease name may be 253 long, a label value only 63
    assert len(long) == 63 and long != replica_group("k" * 199)
    assert all(c in "0123456789abcdef" for c in replica_group("Odd_Name"))
