"""A pool whose refill fails (network/pools.py's run loop) on a real database and a Neutron stand-in that refuses.

Seen on the local Neutron: a namespace's subnet out of addresses answers every bulk request 409, and a loop
that looked again at once sent the same request ten times a second.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kuberaven.kube.loops import Loops
from kuberaven.model import Database
from kuberaven.network.backend import CNI_KUBERAVEN, BackendError, NetworkOptions
from kuberaven.network.drivers.port_pools import PooledPort
from kuberaven.network.drivers.ports import Port
from kuberaven.network.pools import RETRY_FAILED, PoolAsk, PoolEmpty, PortPools
from kuberaven.network.state import TranslationStore

OPTIONS = NetworkOptions(cni=CNI_KUBERAVEN, pool_min=2, pool_max=10, pool_batch=2, pool_prewarm_limit=30)
NAMESPACE = {
    "network": "net-1",
    "subnet": "sub-1",
    "cidr": "10.64.3.0/24",
    "gateway": "10.64.3.1",
    "security_group": "sg",
}
REFUSAL = "No more IP addresses available on network net-1"


class FullSubnet:
    """Neutron with a namespace's subnet out of addresses: every bulk request of ports is refused."""

    name = "openstack"

    def __init__(self) -> None:
        self.requests: list[float] = []
        self.pools, self.trunks = self, None  # its pools driver is itself; no node is nested

    def create_pool_ports(
        self, network: str, subnet: str, node: str, security_groups: list[str], count: int, cluster: str
    ) -> list[Port]:
        self.requests.append(time.monotonic())
        raise BackendError(f"409: {REFUSAL}")

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        return []


async def test_a_refused_refill_is_tried_again_after_a_pause_and_waiting_pods_are_told_why(
    database: Database,
) -> None:
    neutron = FullSubnet()
    store = TranslationStore(database, "c", neutron)  # type: ignore[arg-type]  # the stand-in
    store.save_many([("Namespace", "ns-uid", None, "shop", NAMESPACE)])

    async def nodes() -> dict[str, str | None]:
        return {"node-a": None}

    pools = PortPools(store, neutron, OPTIONS, "c", nodes)  # type: ignore[arg-type]  # the stand-in
    loops = Loops()

    async def blocking(function: Any, *args: Any) -> Any:
        return await asyncio.to_thread(function, *args)

    running = asyncio.create_task(pools.run(blocking, loops))
    try:
        await asyncio.sleep(RETRY_FAILED / 2)
        assert len(neutron.requests) == 1, f"{len(neutron.requests)} requests in {RETRY_FAILED / 2} s"
        [empty] = pools.take([PoolAsk("pod-1", "shop", "pod-1", "node-a", None, ("sg",), NAMESPACE)])
        assert isinstance(empty, PoolEmpty) and REFUSAL in str(empty), empty
        await asyncio.sleep(RETRY_FAILED)
        assert len(neutron.requests) == 2, "tried again once the pause is over"
        assert neutron.requests[1] - neutron.requests[0] >= RETRY_FAILED
    finally:
        loops.stop()
        await running
