"""Octavia at scale: a pool's 100 members made by one batch update, beside one member at a time.

cloud-provider-openstack's Octavia controller adds a Service's members one
call at a time, each waiting for the load balancer to be ACTIVE again before
the next (Octavia refuses changes while one is pending). kuberaven replaces a
pool's whole member set with Octavia's batch member update
(``PUT /v2/lbaas/pools/{pool_id}/members``, ``set_members``): one call per
pool per change, however many members change.

Runs its own local OpenStack (Neutron ML2/OVN + Octavia's ovn provider when
the data path is installed, else the amphora provider with noop drivers) and, on
a fresh load balancer each, measures from the first call until every member
is ACTIVE:

* baseline: ``--members`` create_member calls, each followed by a wait for the load balancer to be ACTIVE
  polled as cloud-provider-openstack's WaitActiveAndGetLoadBalancer polls it (a GET at once, then after
  1 s, 1.2 s, 1.44 s, …: its waitLoadbalancerInitDelay, waitLoadbalancerFactor);
* kuberaven: one set_members() of the same members (its own wait polls from 50 ms, at most 1 s apart;
  the members' status is polled every 50 ms on both sides);
* the same batch with the fewest attributes Octavia takes (address, port, subnet: no name, no tags), to
  see whether what kuberaven sends costs the provider anything;

then scales the batch pool 100 → 50 → 100 and counts Octavia's member calls per step.

    python bench/octavia_members_bench.py [--members 100] [--provider ovn|amphora]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from common import print_table
from kuberaven.network.backend import tags
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.drivers.load_balancers import MemberSpec
from kuberaven.testing.openstack import LocalOpenStack, data_path_installed

CLUSTER = "members-bench"
SUBNET_CIDR = "10.200.0.0/16"
# cloud-provider-openstack's pkg/util/openstack/loadbalancer.go: waitLoadbalancerInitDelay, waitLoadbalancerFactor,
# waitLoadbalancerActiveSteps.
CPO_INIT_DELAY, CPO_FACTOR, CPO_ACTIVE_STEPS = 1.0, 1.2, 23


def specs(count: int) -> list[MemberSpec]:
    return [MemberSpec(f"bench/pod-{i}:8080", f"10.200.{i // 250}.{i % 250 + 2}", 8080) for i in range(count)]


def all_active(backend: OpenStackBackend, pool: str, count: int) -> None:
    """Until the pool has ``count`` members, each provisioning_status ACTIVE."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = list(backend.context.lbaas.members(pool))
        if len(found) == count and all(m.provisioning_status == "ACTIVE" for m in found):
            return
        time.sleep(0.05)
    raise TimeoutError(f"pool {pool}: members not ACTIVE after 600 s")


class CountingCalls:
    """Counts the member calls sent to Octavia (create, delete, batch PUT) through one backend."""

    def __init__(self, backend: OpenStackBackend) -> None:
        self.calls: Counter[str] = Counter()
        lbaas = backend.context.lbaas
        for name in ("create_member", "delete_member", "put"):
            setattr(lbaas, name, self._counted(name, getattr(lbaas, name)))

    def _counted(self, name: str, call: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return call(*args, **kwargs)

        return counted


def pool_on_new_lb(backend: OpenStackBackend, name: str, subnet: str, vip: str, marks: list[str]) -> tuple[str, str]:
    lb = backend.ensure_load_balancer(name, subnet, vip, marks)
    listener = backend.create_listener(lb.id, f"{name}:TCP:80", "TCP", 80, marks)
    assert listener.pool is not None
    return lb.id, listener.pool


def wait_active_as_cpo(backend: OpenStackBackend, load_balancer: str) -> None:
    """cloud-provider-openstack's WaitActiveAndGetLoadBalancer: k8s wait.ExponentialBackoff, a GET at once,
    then one after each sleep of 1 s, 1.2 s, 1.44 s, … (23 tries)."""
    delay = CPO_INIT_DELAY
    for _ in range(CPO_ACTIVE_STEPS):
        if backend.context.lbaas.get_load_balancer(load_balancer).provisioning_status == "ACTIVE":
            return
        time.sleep(delay)
        delay *= CPO_FACTOR
    raise TimeoutError(f"load balancer {load_balancer} not ACTIVE after {CPO_ACTIVE_STEPS} tries")


def one_by_one(backend: OpenStackBackend, lb: str, pool: str, members: list[MemberSpec], subnet: str) -> float:
    """As cloud-provider-openstack adds a Service's members: each create, then a wait for ACTIVE."""
    started = time.perf_counter()
    for member in members:
        backend.context.lbaas.create_member(
            pool, name=member.name, address=member.address, protocol_port=member.port, subnet_id=subnet
        )
        wait_active_as_cpo(backend, lb)
    all_active(backend, pool, len(members))
    return time.perf_counter() - started


def bare_batch(backend: OpenStackBackend, lb: str, pool: str, members: list[MemberSpec], subnet: str) -> float:
    """The batch update with the fewest attributes a member needs (no name, no tags), until every member is
    ACTIVE."""
    body = {"members": [{"address": m.address, "protocol_port": m.port, "subnet_id": subnet} for m in members]}
    started = time.perf_counter()
    response = backend.context.lbaas.put(f"/lbaas/pools/{pool}/members", json=body)
    assert response.status_code == 202, response.text
    all_active(backend, pool, len(members))
    return time.perf_counter() - started


def measure(backend: OpenStackBackend, count: int) -> list[tuple[str, str, str, str]]:
    marks = tags(CLUSTER, "bench")
    network = backend.ensure_network("members-bench", marks)
    subnet = backend.ensure_subnet(network, "members-bench", marks, cidr=SUBNET_CIDR).id
    members = specs(count)

    lb, pool = pool_on_new_lb(backend, "bench/one-by-one", subnet, "10.200.255.10", marks)
    baseline = one_by_one(backend, lb, pool, members, subnet)

    lb, pool = pool_on_new_lb(backend, "bench/bare-batch", subnet, "10.200.255.12", marks)
    bare = bare_batch(backend, lb, pool, members, subnet)

    lb, pool = pool_on_new_lb(backend, "bench/batch", subnet, "10.200.255.11", marks)
    counting = CountingCalls(backend)
    started = time.perf_counter()
    backend.set_members(lb, pool, members, subnet, marks)
    all_active(backend, pool, count)
    batch = time.perf_counter() - started
    steps = []
    for size in (count // 2, count):
        counting.calls.clear()
        started = time.perf_counter()
        backend.set_members(lb, pool, members[:size], subnet, marks)
        all_active(backend, pool, size)
        steps.append((size, time.perf_counter() - started, sum(counting.calls.values())))
    rows = [
        (
            f"{count} members → every member ACTIVE",
            f"{batch:.2f} s (1 call)",
            f"{baseline:.2f} s ({count} calls)",
            f"{batch / baseline:.3f}",
        ),
        ("  the same batch, no name or tags", f"{bare:.2f} s (1 call)", "", f"{bare / baseline:.3f}"),
        ("  per member", f"{batch / count * 1000:.0f} ms", f"{baseline / count * 1000:.0f} ms", ""),
    ]
    previous = count
    for size, took, calls in steps:
        rows.append((f"scale {previous} → {size}", f"{took:.2f} s ({calls} call)", "", ""))
        previous = size
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument(
        "--provider",
        choices=("ovn", "amphora"),
        default=None,
        help="Octavia's provider (default: ovn where the data path is installed, else amphora)",
    )
    args = parser.parse_args()
    provider = args.provider or ("ovn" if data_path_installed() else "amphora")
    openstack = LocalOpenStack(data_path=provider == "ovn")
    openstack.start()
    try:
        backend = openstack.backend()
        print(f"Octavia members, {provider} provider:")
        print_table(measure(backend, args.members))
    finally:
        openstack.stop()


if __name__ == "__main__":
    main()
