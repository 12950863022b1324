"""How a pool's refill is sized and sent (network/rules/pools.py: refill_plan(), requests(), startable()), with plain
numbers, and a stream then a burst played against a model of Neutron's pace."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kuberaven.network.backend import CNI_KUBERAVEN, NetworkOptions
from kuberaven.network.rules import pools
from kuberaven.network.rules.pools import (
    BULK_MAX,
    DEMAND_WINDOW,
    IN_FLIGHT,
    PoolKey,
    refill_plan,
    requests,
    startable,
)

DEFAULTS = NetworkOptions(cni=CNI_KUBERAVEN)  # pool_min 45, pool_max 60, pool_batch 5
POOL = PoolKey.of("node-a", "shop", ["sg-ns"])
OTHER = PoolKey.of("node-b", "shop", ["sg-ns"])


def test_waiting_pods_ports_come_first_split_over_the_requests_neutron_serves_at_once() -> None:
    assert IN_FLIGHT == 2
    assert requests(15, 15, 5) == [8, 7], "each waiting pod waits for a request of 8 ports at most, not 15"
    assert requests(25, 15, 5) == [8, 7, 5, 5], "then the target's 10, in whole batches over the requests"
    assert requests(3, 3, 5) == [2, 1], "no batch rounding for pods that wait: their ports, no more"


def test_the_rest_of_a_target_goes_in_batches_the_next_sent_as_one_ends() -> None:
    assert requests(7, 0, 5) == [5, 5], "rounded to whole batches"
    assert requests(30, 0, 5) == [5] * 6, "Neutron's rate is the same at 5 as at 30: the first 5 come sooner"
    assert requests(12, 0, 5, whole=False) == [5, 5, 2], "prewarming: no rounding"
    assert requests(100, 70, 5)[:4] == [18, 18, 17, 17], "70 waiting pods: 4 requests, none over BULK_MAX"
    assert all(size <= BULK_MAX for size in requests(100, 70, 5))
    assert sum(requests(100, 70, 5)) == 100


def test_a_burst_on_an_empty_pool_sends_its_waiting_pods_ports_first_then_its_target() -> None:
    plan = refill_plan({POOL: 0}, {}, {POOL: 60}, {POOL: 15}, [], DEFAULTS)
    assert plan[:2] == [(POOL, 8), (POOL, 7)]
    assert plan[2:] == [(POOL, 5)] * 12, "60, the demand of the last 10 s: pool_max"


def test_a_pool_with_waiting_pods_comes_before_one_that_is_merely_low() -> None:
    plan = refill_plan({POOL: 0, OTHER: 2}, {}, {POOL: 5, OTHER: 45}, {POOL: 4}, [], DEFAULTS)
    assert plan[0][0] == POOL and startable(plan, []) == [(POOL, 2), (POOL, 2)]


def test_at_most_in_flight_requests_at_once_and_one_per_trunk() -> None:
    nested = PoolKey.of("vm-1", "shop", ["sg-ns"], "trunk-1")
    plan = [(POOL, 8), (POOL, 7), (OTHER, 5)]
    assert startable(plan, []) == [(POOL, 8), (POOL, 7)]
    assert startable(plan, [OTHER]) == [(POOL, 8)]
    assert startable(plan, [POOL, OTHER]) == []
    assert startable([(nested, 3), (nested, 2), (POOL, 5)], []) == [(nested, 3), (POOL, 5)], "VLAN ids: one a trunk"
    assert startable([(nested, 3), (POOL, 5)], [nested]) == [(POOL, 5)]


@dataclass
class Neutron:
    """A request of n ports ends ``fixed + n × per_port`` seconds after it is sent, whatever else is in flight
    (Neutron's workers serve requests in parallel); its ports come together at its end."""

    fixed: float
    per_port: float
    requests: list[tuple[float, int]] = field(default_factory=list)  # (when it ends, its ports)

    def send(self, now: float, count: int) -> None:
        self.requests.append((now + self.fixed + self.per_port * count, count))

    def done(self, now: float) -> int:
        ended = sum(count for end, count in self.requests if end <= now)
        self.requests = [(end, count) for end, count in self.requests if end > now]
        return ended


def play(neutron: Neutron, arrivals: list[float], free: int, step: float = 0.05) -> tuple[list[float], list[int]]:
    """Pods arriving at ``arrivals`` (seconds) take a port of one pool holding ``free``, refilled as pools.py
    refills it (a look every ``step``): each pod's wait for its port, and the pool's free ports at each arrival."""
    waiting: deque[float] = deque()
    takes: deque[float] = deque()
    waits, seen, due, now = [], [], deque(sorted(arrivals)), 0.0
    while due or waiting:
        free += neutron.done(now)
        while due and due[0] <= now:
            seen.append(free)
            waiting.append(due.popleft())
        while waiting and free:
            free -= 1
            waits.append(now - waiting.popleft())
            takes.append(now)
        while takes and takes[0] < now - DEMAND_WINDOW:
            takes.popleft()
        making = sum(count for _, count in neutron.requests)
        plan = refill_plan({POOL: free}, {POOL: making}, {POOL: len(takes)}, {POOL: len(waiting)}, [], DEFAULTS)
        for _, count in startable(plan, [POOL] * len(neutron.requests)):
            neutron.send(now, count)
        now += step
    return waits, seen


STEP = 0.05  # seconds between two looks of play(): a pod arriving between two looks waits for the next


def test_a_stream_at_2_a_second_then_a_burst_of_60_at_20_a_second_on_a_loaded_neutron(monkeypatch: Any) -> None:
    """Neutron as the stream loads it on two cores: 5 ports in 3.5 s (1.4 a second, one request at a time), 20 in
    11 s. Two requests in flight keep the pool near full through the stream, and the burst's pods past the pool
    wait for the waiting pods' requests, not for the target's; one request at a time lets the stream drain it."""
    stream = [i / 2 for i in range(60)]
    burst = [30 + i / 20 for i in range(60)]
    waits, seen = play(Neutron(fixed=1.0, per_port=0.5), stream + burst, DEFAULTS.pool_min, STEP)
    assert max(waits[:60]) <= STEP, "no pod of the stream waits"
    assert seen[60] >= DEFAULTS.pool_min - 5, f"the burst finds the pool full: {seen[60]}"
    assert max(waits[60:]) <= 5 + STEP, f"the burst's last port in {max(waits[60:]):.1f} s"
    monkeypatch.setattr(pools, "IN_FLIGHT", 1)
    _, alone = play(Neutron(fixed=1.0, per_port=0.5), stream + burst, DEFAULTS.pool_min, STEP)
    assert alone[60] <= seen[60] - 15, f"one request at a time: {alone[60]} left for the burst"
