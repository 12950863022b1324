"""The relay's bookkeeping of what it publishes (events/scope.py, events/publisher.py), from plain data."""

from __future__ import annotations

import os
import subprocess
import sys

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


# Every relay of every replica takes the same cluster's lock under the same key: pinned, so that a key that
# changed with the process (Python's salted hash()) or the release (another digest) fails here.
PINNED_KEYS = {"edge-0": -2625917914733302289, "edge-1": 4276215486930485580}


def test_cluster_lock_keys_are_pinned_values() -> None:
    assert {name: cluster_lock_key(name) for name in PINNED_KEYS} == PINNED_KEYS


def test_cluster_lock_keys_are_the_same_in_another_process_with_another_hash_seed() -> None:
    code = "from kuberaven.events.publisher import cluster_lock_key as k; print(k('edge-0'), k('edge-1'))"
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert found.stdout.split() == [str(key) for key in PINNED_KEYS.values()], found.stderr
