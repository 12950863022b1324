"""The port pools' arithmetic (network/rules/pools.py): which pool a pod takes from, what is made, what is deleted."""

from __future__ import annotations

import pytest

from kuberaven.network.backend import CNI_KUBERAVEN, NetworkOptions
from kuberaven.network.rules.pools import DEMAND_WINDOW, PoolKey, choose, recent_demand, refill_plan, shrink_plan

OPTIONS = NetworkOptions(cni=CNI_KUBERAVEN, pool_min=5, pool_max=20, pool_batch=10, pool_prewarm_limit=30)
DEFAULT = PoolKey.of("node-a", "shop", ["sg-ns"])
POLICY = PoolKey.of("node-a", "shop", ["sg-policy", "sg-ns"])


def test_a_pod_takes_from_its_own_pool_first_without_changing_groups() -> None:
    assert choose(POLICY, {DEFAULT: 3, POLICY: 1}) == (POLICY, False)


def test_a_pod_whose_pool_is_empty_takes_a_port_of_its_node_and_namespace_whose_groups_are_then_set() -> None:
    other_node = PoolKey.of("node-b", "shop", ["sg-policy", "sg-ns"])
    other_namespace = PoolKey.of("node-a", "bank", ["sg-policy", "sg-ns"])
    assert choose(POLICY, {DEFAULT: 2, other_node: 9, other_namespace: 9, POLICY: 0}) == (DEFAULT, True)


def test_no_free_port_on_the_node_and_namespace_means_one_is_made() -> None:
    assert choose(DEFAULT, {PoolKey.of("node-b", "shop", ["sg-ns"]): 4}) == (None, False)


def test_the_groups_of_a_key_do_not_depend_on_their_order() -> None:
    assert PoolKey.of("n", "ns", ["b", "a"]) == PoolKey.of("n", "ns", ["a", "b"])


def test_a_pool_below_its_minimum_asks_for_a_whole_batch_and_one_in_flight_counts() -> None:
    assert refill_plan({DEFAULT: 4}, {}, {DEFAULT: 1}, {}, [], OPTIONS) == [(DEFAULT, 10)]
    assert refill_plan({DEFAULT: 4}, {DEFAULT: 10}, {DEFAULT: 1}, {}, [], OPTIONS) == []


def test_a_pool_in_demand_grows_to_what_it_gave_out_recently_in_batches_but_never_past_max() -> None:
    assert refill_plan({DEFAULT: 6}, {}, {DEFAULT: 18}, {}, [], OPTIONS) == [(DEFAULT, 10), (DEFAULT, 10)]
    assert refill_plan({DEFAULT: 0}, {}, {DEFAULT: 100}, {}, [], OPTIONS) == [(DEFAULT, 10), (DEFAULT, 10)]


def test_pods_waiting_for_a_pool_add_to_its_target_and_come_first() -> None:
    busy = PoolKey.of("node-b", "shop", ["sg-ns"])
    plan = refill_plan({DEFAULT: 0, busy: 0}, {DEFAULT: 10}, {DEFAULT: 10, busy: 10}, {DEFAULT: 25}, [], OPTIONS)
    # 10 target + 25 waiting - 10 in flight: 25 more; the 15 waiting pods no request in flight brings first, in
    # two requests Neutron serves at once, then the target's 10.
    assert plan[:3] == [(DEFAULT, 8), (DEFAULT, 7), (DEFAULT, 10)]
    assert plan[3:] == [(busy, 10)]


def test_ports_of_terminating_pods_count_toward_the_target_but_never_toward_pods_waiting() -> None:
    # A rolling update: 12 new pods took ports (its target is 12, 8 are left), and the 12 old pods terminate.
    assert refill_plan({DEFAULT: 8}, {}, {DEFAULT: 12}, {}, [], OPTIONS, {DEFAULT: 12}) == []
    assert refill_plan({DEFAULT: 8}, {}, {DEFAULT: 12}, {}, [], OPTIONS, {DEFAULT: 2}) == [(DEFAULT, 10)]
    # Pods waiting on an empty pool get ports made, however many are coming back: theirs, no more.
    plan = refill_plan({DEFAULT: 0}, {}, {DEFAULT: 12}, {DEFAULT: 3}, [], OPTIONS, {DEFAULT: 40})
    assert plan == [(DEFAULT, 2), (DEFAULT, 1)]


def test_a_pools_demand_is_what_it_gave_out_lately_less_what_came_back() -> None:
    takes = {DEFAULT: [100.0 + i / 10 for i in range(30)], POLICY: [95.0, 101.0]}
    assert recent_demand(takes, {}, 104.0) == {DEFAULT: 30, POLICY: 2}
    # A rollout: 30 taken, 30 given back (its old pods' ports): no demand, so its target stays the minimum.
    assert recent_demand(takes, {DEFAULT: [101.0 + i / 10 for i in range(30)]}, 104.0) == {POLICY: 2}
    assert recent_demand(takes, {}, 100.0 + DEMAND_WINDOW + 0.5) == {DEFAULT: 25, POLICY: 1}, "the window"


def test_prewarming_fills_wanted_pools_to_their_minimum_within_its_limit() -> None:
    wanted = [PoolKey.of(f"node-{i}", "shop", ["sg-ns"]) for i in range(7)]
    assert refill_plan({}, {}, {}, {}, wanted, OPTIONS) == [(key, 5) for key in wanted[:6]], "6 × 5: the limit"


def test_pools_in_use_are_refilled_even_past_the_prewarm_limit() -> None:
    full = {PoolKey.of(f"node-{i}", "shop", ["sg-ns"]): 10 for i in range(3)}
    assert refill_plan({**full, DEFAULT: 0}, {}, {DEFAULT: 3}, {}, [], OPTIONS) == [(DEFAULT, 10)]


def test_idle_pools_shrink_to_their_minimum_and_any_pool_to_its_maximum() -> None:
    idle = PoolKey.of("node-b", "shop", ["sg-ns"])
    busy = PoolKey.of("node-c", "shop", ["sg-ns"])
    plan = shrink_plan({DEFAULT: 25, idle: 8, busy: 8}, {DEFAULT: 990.0, idle: 0.0, busy: 995.0}, 1000.0, OPTIONS)
    assert plan == [(DEFAULT, 5), (idle, 3)]
    assert shrink_plan({idle: 8}, {}, 1000.0, OPTIONS) == [], "a pool nobody took from is not idle yet"


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"pool_min": 61}, "network_pool_min (61) must be between 0 and network_pool_max (60)"),
        ({"pool_min": -1}, "network_pool_min (-1)"),
        ({"pool_batch": 0}, "network_pool_batch must be at least 1"),
    ],
)
def test_bad_pool_sizes_are_refused_by_name(changes: dict[str, int], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        NetworkOptions(**changes)  # type: ignore[arg-type]


def test_our_cni_defaults_to_a_subnet_per_namespace_and_refuses_one_for_the_cluster() -> None:
    assert NetworkOptions(cni=CNI_KUBERAVEN).subnet_mode == "namespace"
    assert NetworkOptions().subnet_mode == "cluster"
    with pytest.raises(ValueError, match="network_subnet_mode=cluster cannot work with network_cni=kuberaven"):
        NetworkOptions(cni=CNI_KUBERAVEN, subnet_mode="cluster")
