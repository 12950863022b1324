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


@pytest.mark.parametrize(
    ("clusters", "leases", "alive", "plan"),
    [
        # Alone in its first round: half of the clusters (another replica may be starting with it).
        (["a", "b", "c", "d"], {}, 1, Plan(take=("a", "b"), release=())),
        # ceil(3 / 2) = 2; a single cluster is still taken.
        (["a", "b", "c"], {}, 1, Plan(take=("a", "b"), release=())),
        (["a"], {}, 1, Plan(take=("a",), release=())),
        # Joining two replicas already running, 6 clusters all held: a share of ceil(6 / 4) = 2 is free of none.
        (["a", "b", "c", "d", "e", "f"], dict.fromkeys("abcdef", HELD), 2, Plan(take=(), release=())),
    ],
)
def test_plan_ownership_when_joining(clusters: list[str], leases: dict[str, LeaseView], alive: int, plan: Plan) -> None:
    assert plan_ownership(ME, clusters, leases, alive, joining=True) == plan


def test_replicas_starting_together_take_no_more_than_their_share_at_first() -> None:
    """r1's first round counts only itself (r2's Lease comes 0.3 s later): it takes half, never hands over."""
    clusters = ["a", "b", "c", "d"]
    leases: dict[str, LeaseView] = {}
    released: list[str] = []
    rounds = [("r1", 1, True), ("r2", 2, True), ("r1", 2, False), ("r2", 2, False)]
    for identity, alive, joining in rounds:
        view = {c: LeaseView(h.holder if h.holder != identity else ME, h.expired) for c, h in leases.items()}
        plan = plan_ownership(ME, clusters, view, alive, joining=joining)
        released += plan.release
        for cluster in plan.take:
            leases[cluster] = LeaseView(identity, expired=False)
    assert released == []
    assert {c: lease.holder for c, lease in leases.items()} == {"a": "r1", "b": "r1", "c": "r2", "d": "r2"}
    # Without the joining round r1 would have taken all four and handed two over.
    assert plan_ownership(ME, clusters, {}, 1) == Plan(take=tuple(clusters), release=())


def test_a_replica_alone_takes_the_rest_on_its_second_round() -> None:
    first = plan_ownership(ME, ["a", "b", "c", "d"], {}, 1, joining=True)
    assert first == Plan(take=("a", "b"), release=())
    second = plan_ownership(ME, ["a", "b", "c", "d"], {"a": MINE, "b": MINE}, 1)
    assert second == Plan(take=("c", "d"), release=())


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
