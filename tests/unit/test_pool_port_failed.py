"""A pod whose pool cannot be refilled until a user acts (the port quota, a subnet out of addresses): the pool says
so (network/pools.py), and the node agent fails the pod's ADD with that cause at once (node/pods.py), rather than
wait for a VIF that will not come and blame the pool's pace."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from kuberaven.cni.spec import CniError, ErrorCode
from kuberaven.kube.loops import Loops
from kuberaven.kube.reflector import WatchEvent
from kuberaven.model import Database
from kuberaven.network.backend import AddressesExhausted, BackendError
from kuberaven.network.drivers.port_pools import PooledPort
from kuberaven.network.drivers.ports import Port
from kuberaven.network.pools import PoolAsk, PoolEmpty, PortPools, actionable
from kuberaven.network.state import TranslationStore
from kuberaven.network.vif import PORT_FAILED_ANNOTATION
from kuberaven.node.pods import AgentPods
from tests.unit.test_pool_refill_failures import NAMESPACE, OPTIONS

QUOTA = "409: Quota exceeded for resources: ['port']."


def test_a_quota_or_a_full_subnet_is_actionable_and_a_servers_error_is_not() -> None:
    assert actionable(BackendError(QUOTA))
    assert actionable(AddressesExhausted("No more IP addresses available on network net-1"))
    assert not actionable(BackendError("500: Internal Server Error"))


class Refusing:
    """Neutron refusing every bulk request with ``error``."""

    name = "openstack"

    def __init__(self, error: BackendError) -> None:
        self.error, self.refused = error, threading.Event()
        self.pools, self.trunks = self, None  # its pools driver is itself; no node is nested

    def create_pool_ports(self, *args: Any) -> list[Port]:
        self.refused.set()
        raise self.error

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        return []


@pytest.mark.parametrize(("error", "cause"), [(BackendError(QUOTA), True), (BackendError("500: oops"), False)])
async def test_a_pod_finding_its_pool_empty_is_told_the_cause_only_when_a_user_must_act(
    database: Database, error: BackendError, cause: bool
) -> None:
    neutron = Refusing(error)
    store = TranslationStore(database, "c", neutron)  # type: ignore[arg-type]  # the stand-in
    store.save_many([("Namespace", "ns-uid", None, "shop", NAMESPACE)])

    async def nodes() -> dict[str, str | None]:
        return {"node-a": None}

    async def blocking(function: Any, *args: Any) -> Any:
        return await asyncio.to_thread(function, *args)

    pools = PortPools(store, neutron, OPTIONS, "c", nodes)  # type: ignore[arg-type]  # the stand-in
    loops = Loops()
    running = asyncio.create_task(pools.run(blocking, loops))
    try:
        assert await asyncio.to_thread(neutron.refused.wait, 5)
        await asyncio.sleep(0.1)  # the refill's failure recorded, after the request
        [empty] = pools.take([PoolAsk("pod-1", "shop", "pod-1", "node-a", None, ("sg",), NAMESPACE)])
        assert isinstance(empty, PoolEmpty)
        assert (empty.cause is not None) == cause and str(error) in str(empty)
    finally:
        loops.stop()
        await running


def pod_event(annotations: dict[str, str]) -> WatchEvent:
    metadata = {"name": "web", "namespace": "shop", "uid": "u-1", "annotations": annotations}
    return WatchEvent("MODIFIED", {"apiVersion": "v1", "kind": "Pod", "metadata": metadata})


async def test_an_add_waiting_for_its_vif_fails_at_once_with_the_cause_the_translator_wrote() -> None:
    pods = AgentPods()
    pods.on_synced()
    pods.on_event(pod_event({}))
    said = f"no free port in the pool of namespace shop on node n yet (its last refill failed: {QUOTA})"
    asyncio.get_running_loop().call_later(0.2, pods.on_event, pod_event({PORT_FAILED_ANNOTATION: said}))
    started = time.monotonic()
    with pytest.raises(CniError) as caught:
        await pods.wait("shop/web", "u-1", lambda _: True, 30)
    assert time.monotonic() - started < 1, "woken by the event, not at the bound"
    assert caught.value.code == ErrorCode.NO_PORT and QUOTA in caught.value.msg
    assert "quota" in caught.value.details
