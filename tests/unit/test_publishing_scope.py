"""The relay's bookkeeping of what it publishes (events/scope.py, events/publisher.py), from plain data."""

from __future__ import annotations

from kuberaven.events.publisher import PUBLISHER_LOCK_KEY, cluster_lock_key
from kuberaven.events.scope import NOTHING, InFlight, Turn


def test_in_flight_counts_per_cluster_and_forgets_a_cluster_at_zero() -> None:
    flying = InFlight()
    flying.add(1, "a")
    flying.add(2, "a")
    flying.add(3, "b")
    assert (len(flying), dict(flying.by_cluster)) == (3, {"a": 2, "b": 1})
    flying.difference_update([1, 3, 99])  # 99: never in flight (a repeated delivery report)
    assert 2 in flying and 1 not in flying
    assert dict(flying.by_cluster) == {"a": 1}
    flying.difference_update([2])
    assert (len(flying), dict(flying.by_cluster)) == (0, {})


def test_a_turn_publishes_every_cluster_some_or_none() -> None:
    assert Turn(None).publish  # the one publisher
    assert Turn(frozenset({"a"})).publish
    assert not NOTHING.publish  # a standby, or only waiting for deliveries of clusters let go


def test_cluster_lock_keys_are_stable_signed_64_bit_and_distinct() -> None:
    keys = {cluster_lock_key(f"edge-{i}") for i in range(1000)}
    assert len(keys) == 1000 and PUBLISHER_LOCK_KEY not in keys
    assert all(-(2**63) <= key < 2**63 for key in keys)
    assert cluster_lock_key("edge-1") == cluster_lock_key("edge-1")
