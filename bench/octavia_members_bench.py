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

* baseline: ``--members`` create_member calls, each after the load balancer is ACTIVE again;
* kuberaven: one set_members() of the same members;

then scales the batch pool 100 → 50 → 100 and counts Octavia's member calls per step.

    python bench/octavia_members_bench.py [--members 100] [--provider ovn|amphora]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from common import print_table
from kuberaven.network.backend import MemberSpec, tags
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.testing.openstack import LocalOpenStack, data_path_installed

CLUSTER = "members-bench"
SUBNET_CIDR = "10.200.0.0/16"


def specs(count: int) -> list[MemberSpec]:
    return [MemberSpec(f"bench/pod-{i}:8080", f"10.200.{i // 250}.{i % 250 + 2}", 8080) for i in range(count)]


def all_active(backend: OpenStackBackend, pool: str, count: int) -> None:
    """Until the pool has ``count`` members, each provisioning_status ACTIVE."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = list(backend.lbaas.members(pool))
        if len(found) == count and all(m.provisioning_status == "ACTIVE" for m in found):
            return
        time.sleep(0.05)
    raise TimeoutError(f"pool {pool}: members not ACTIVE after 600 s")


class CountingCalls:
    """Counts the member calls sent to Octavia (create, delete, batch PUT) through one backend."""

    def __init__(self, backend: OpenStackBackend) -> None:
        self.calls: Counter[str] = Counter()
        lbaas = backend.lbaas
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


def measure(backend: OpenStackBackend, count: int) -> list[tuple[str, str, str, str]]:
    marks = tags(CLUSTER, "bench")
    network = backend.ensure_network("members-bench", marks)
    subnet = backend.ensure_subnet(network, "members-bench", marks, cidr=SUBNET_CIDR).id
    members = specs(count)

    lb, pool = pool_on_new_lb(backend, "bench/one-by-one", subnet, "10.200.255.10", marks)
    started = time.perf_counter()
    for member in members:  # as cloud-provider-openstack does: each call after the load balancer is ACTIVE
        backend.create_member(lb, pool, member.name, member.address, member.port, subnet, marks)
    all_active(backend, pool, count)
    one_by_one = time.perf_counter() - started

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
            f"{one_by_one:.2f} s ({count} calls)",
            f"{batch / one_by_one:.3f}",
        )
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
