"""Port pools (network/pools.py) on a real Neutron: pods take ports made ahead, give them back, and nothing leaks.

The translator runs with our CNI on the session's local Neutron (API only;
the data path's tests wire pods for real). Pods are bound to a Node no
kubelet serves, so they stay without an IP, as they would until our CNI ran.
Every pool port of the test's cluster carries its tags: the test reads
Neutron directly to see what was made, recycled and removed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.network.backend import CNI_KUBERAVEN, pool_port_name
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.pools import KIND as POOLED
from kuberaven.network.pools import PERIOD, PortPools
from kuberaven.network.rules.pools import PoolKey
from kuberaven.network.state import TranslationStore
from kuberaven.network.translator import NetworkTranslator
from kuberaven.network.vif import Vif
from kuberaven.testing.namespaces import create_namespace
from tests.conftest import OPENSTACK_SECOND_GROUP
from tests.helpers import bound_pod, vif_of
from tests.helpers import eventually as on_loop

# Their checks call Neutron: off the loop.
from tests.helpers import eventually_off_loop as eventually
from tests.integration.test_network import cluster_name, net_database, translating

__all__ = ["net_database"]

pytestmark = pytest.mark.xdist_group(OPENSTACK_SECOND_GROUP)  # its group's one local OpenStack (tests/conftest.py)

# Small pools, and no prewarming of the other tests' namespaces (the translator serves the whole cluster).
MIN = 2
LOOKS = 3  # the pools' looks waited for where nothing must happen
POOLS: dict[str, Any] = {"cni": CNI_KUBERAVEN, "pool_min": MIN, "pool_max": 8, "pool_batch": 2, "pool_prewarm_limit": 0}


@pytest.fixture
def neutron(request: pytest.FixtureRequest) -> Iterator[OpenStackBackend]:
    backend = request.getfixturevalue("openstack").backend()
    yield backend
    backend.close()


def pool_ports(backend: OpenStackBackend, cluster: str, network: str | None = None) -> dict[str, Any]:
    """The cluster's pooled ports in Neutron, by id."""
    query: dict[str, Any] = {"name": pool_port_name(cluster)}
    if network:
        query["network_id"] = network
    return {port.id: port for port in backend.context.net.ports(**query)}


def holders(database: Database, cluster: str, backend: OpenStackBackend) -> dict[str, str | None]:
    """Each pooled port's row: the pod holding it (None: free)."""
    return {row.uid: row.state.get("pod") for row in TranslationStore(database, cluster, backend).rows_of(POOLED)}


def holds_free(pools: PortPools | None, key: PoolKey, count: int) -> None:
    """The pool holds at least ``count`` free ports (refills come in whole batches, and pods that waited add
    to them)."""
    assert pools is not None
    assert pools.free_counts().get(key, 0) >= count, pools.free_counts()


async def pod_and_refilled_pool(
    kube: KubeClient, translator: NetworkTranslator, namespace: str, name: str, node: str
) -> tuple[Vif, PoolKey]:
    """A pod bound to ``node`` and its VIF, once its pool (the port came from it) holds MIN free ports again."""
    await bound_pod(kube, namespace, name, node)
    vif = await vif_of(kube, namespace, name)
    key = PoolKey.of(node, namespace, vif.security_groups)
    await eventually(lambda: holds_free(translator.pools, key, MIN), timeout=60)
    return vif, key


async def test_pods_take_pooled_ports_bound_to_their_node_and_give_them_back_when_gone(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database, neutron: OpenStackBackend
) -> None:
    cluster = cluster_name()
    async with translating(kube, net_database, neutron, cluster, **POOLS) as translator:
        assert translator.pools is not None
        await bound_pod(kube, namespace, "first", unserved_node)
        first = await vif_of(kube, namespace, "first")
        made = pool_ports(neutron, cluster)
        assert made[first.port].binding_host_id == unserved_node, "bound to its node when made"
        assert made[first.port].device_id == "", "who holds a pooled port is the database's fact"

        # The pool refills in the background to its minimum: the next pod needs no Neutron call.
        key = PoolKey.of(unserved_node, namespace, first.security_groups)
        await eventually(lambda: holds_free(translator.pools, key, MIN), timeout=60)
        free_before = {p for p, pod in holders(net_database, cluster, neutron).items() if pod is None}
        made_before = translator.pools.ports.made
        await bound_pod(kube, namespace, "second", unserved_node)
        second = await vif_of(kube, namespace, "second")
        assert second.port in free_before and translator.pools.ports.made == made_before, "taken from the pool"
        assert second.security_groups == first.security_groups and second.ip != first.ip

        # A pod gone gives its port back: the same port, free in the database, still in Neutron.
        uid = (await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/first"))["metadata"]["uid"]
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/first", body={"gracePeriodSeconds": 0})

        def recycled() -> None:
            rows = holders(net_database, cluster, neutron)
            assert first.port in rows and rows[first.port] is None, rows.get(first.port)
            assert first.port in pool_ports(neutron, cluster)

        await eventually(recycled, timeout=30)
        assert holders(net_database, cluster, neutron)[second.port] is not None
        assert TranslationStore(net_database, cluster, neutron).state("Pod", uid) is None


async def test_a_namespace_deleted_takes_its_pools_with_it_and_nothing_is_left_in_neutron(
    kube: KubeClient, unserved_node: str, net_database: Database, neutron: OpenStackBackend
) -> None:
    cluster = cluster_name()
    name = f"pools-{uuid.uuid4().hex[:6]}"
    await create_namespace(kube, name)
    async with translating(kube, net_database, neutron, cluster, **POOLS) as translator:
        assert translator.pools is not None
        vif, _ = await pod_and_refilled_pool(kube, translator, name, "web", unserved_node)
        assert len(pool_ports(neutron, cluster, vif.network)) >= 1 + MIN

        await kube.request("DELETE", f"/api/v1/namespaces/{name}")

        def gone() -> None:
            assert not pool_ports(neutron, cluster, vif.network), "no pooled port of the namespace is left"
            assert not list(neutron.context.net.ports(network_id=vif.network)), "no port at all on its network"
            assert neutron.context.net.find_network(vif.network) is None
            assert not TranslationStore(net_database, cluster, neutron).rows_in(POOLED, name)

        await eventually(gone, timeout=120)
        assert not any(key.namespace == name for key in translator.pools.free_counts())


async def test_a_restart_rebuilds_the_pools_from_the_database_and_adopts_ports_made_before_a_crash(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database, neutron: OpenStackBackend
) -> None:
    cluster = cluster_name()
    async with translating(kube, net_database, neutron, cluster, **POOLS) as translator:
        assert translator.pools is not None
        vif, key = await pod_and_refilled_pool(kube, translator, namespace, "web", unserved_node)
        store = TranslationStore(net_database, cluster, neutron)
        network = store.state("Pod", (await pod_uid(kube, namespace, "web")))
        assert network is not None
    # What a SIGKILL between Neutron's answer and the database's commit leaves: a pool port no row names.
    [orphan] = await asyncio.to_thread(
        neutron.pools.create_pool_ports,
        network["network"],
        network["subnet"],
        unserved_node,
        list(vif.security_groups),
        1,
        cluster,
    )
    held_before = {p: pod for p, pod in holders(net_database, cluster, neutron).items() if pod is not None}

    async with translating(kube, net_database, neutron, cluster, **POOLS) as translator:
        assert translator.pools is not None
        rows = holders(net_database, cluster, neutron)
        assert orphan.id in rows and rows[orphan.id] is None, "adopted, free"
        assert {p: pod for p, pod in rows.items() if pod is not None} == held_before, "no holder changed"
        free = [p for p, pod in rows.items() if pod is None]
        assert translator.pools.free_counts()[key] == len(free), "the pool in memory is the database's"
        await bound_pod(kube, namespace, "api", unserved_node)
        api = await vif_of(kube, namespace, "api")
        assert api.port != vif.port and api.port in rows


async def pod_uid(kube: KubeClient, namespace: str, name: str) -> str:
    pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return str(pod["metadata"]["uid"])


async def test_a_terminating_pod_keeps_its_pooled_port_until_it_is_gone(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database, neutron: OpenStackBackend
) -> None:
    """A pod being deleted may still run on its port: the port goes back to the pool only once the pod is gone."""
    cluster = cluster_name()
    async with translating(kube, net_database, neutron, cluster, **POOLS) as translator:
        await bound_pod(kube, namespace, "slow", unserved_node)
        vif = await vif_of(kube, namespace, "slow")
        path = f"/api/v1/namespaces/{namespace}/pods/slow"
        uid = await pod_uid(kube, namespace, "slow")
        # No kubelet serves the node: with a grace period the pod stays Terminating.
        await kube.request("DELETE", path, body={"gracePeriodSeconds": 600})
        assert (await kube.request("GET", path))["metadata"].get("deletionTimestamp")
        # The translator has seen the deletionTimestamp and reconciled what it brought: nothing may change.
        await reconciled_terminating(translator, namespace, ["slow"])
        assert holders(net_database, cluster, neutron)[vif.port] == uid, "still the terminating pod's"

        await kube.request("DELETE", path, body={"gracePeriodSeconds": 0})

        def freed() -> None:
            assert holders(net_database, cluster, neutron)[vif.port] is None

        await eventually(freed, timeout=30)


ROLLOUT_MIN = 6  # above the takes of the test below within DEMAND_WINDOW (at most 6): its target is this


async def test_a_rollouts_new_pods_take_what_its_old_pods_give_back_and_no_port_is_made(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database, neutron: OpenStackBackend
) -> None:
    """Pods replaced as a rollout replaces them (each old pod terminating as its replacement comes) cost no
    Neutron port: the terminating pods' ports count toward their pool's target, and come back once gone."""
    cluster = cluster_name()
    async with translating(kube, net_database, neutron, cluster, **{**POOLS, "pool_min": ROLLOUT_MIN}) as translator:
        pools = translator.pools
        assert pools is not None
        old = ["old0", "old1", "old2"]
        for name in old:
            await bound_pod(kube, namespace, name, unserved_node)
        vifs = [await vif_of(kube, namespace, name) for name in old]
        key = PoolKey.of(unserved_node, namespace, vifs[0].security_groups)

        def at_rest() -> None:
            holds_free(pools, key, ROLLOUT_MIN)
            assert pools.making() == 0, "no refill in flight"

        await eventually(at_rest, timeout=60)
        free, made = pools.free_counts()[key], pools.ports.made
        # Enough replaced that the free ports fall below the target: a refill would start but for those coming back.
        replaced = old[: free - ROLLOUT_MIN + 1]
        for name in replaced:
            await delete_pod(kube, namespace, name, grace=600)  # no kubelet: it stays terminating
        await reconciled_terminating(translator, namespace, replaced)
        for i in range(len(replaced)):
            await bound_pod(kube, namespace, f"new{i}", unserved_node)
            await vif_of(kube, namespace, f"new{i}")
        await asyncio.sleep(LOOKS * PERIOD)  # the pools' next looks, which would start the refill
        assert pools.ports.made == made and pools.making() == 0, "no port made while the old pods terminate"

        for name in replaced:
            await delete_pod(kube, namespace, name, grace=0)
        await eventually(lambda: holds_free(pools, key, free), timeout=30)
        assert pools.ports.made == made, "their ports came back: none made"


async def reconciled_terminating(translator: NetworkTranslator, namespace: str, names: list[str]) -> None:
    """Until the translator's pods store shows ``names`` terminating and its pods reconciler is idle."""
    store = translator.pods.pods
    assert store is not None

    def seen() -> None:
        for name in names:
            pod = store.get(f"{namespace}/{name}")
            assert pod is not None and pod["metadata"].get("deletionTimestamp"), f"{name}: not terminating yet"

    await on_loop(seen)
    await asyncio.wait_for(translator.engine.controller("network-pods").wait_idle(), 30)


async def delete_pod(kube: KubeClient, namespace: str, name: str, grace: int) -> None:
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"gracePeriodSeconds": grace})


async def test_a_deleted_nodes_free_ports_are_deleted_and_its_pods_keep_theirs(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database, neutron: OpenStackBackend
) -> None:
    cluster = cluster_name()
    async with translating(kube, net_database, neutron, cluster, **POOLS) as translator:
        vif, _ = await pod_and_refilled_pool(kube, translator, namespace, "web", unserved_node)
        free = {p for p, pod in holders(net_database, cluster, neutron).items() if pod is None}

        await kube.request("DELETE", f"/api/v1/nodes/{unserved_node}")

        def gone() -> None:
            left = pool_ports(neutron, cluster)
            assert not free & set(left), "the node's free ports are deleted"
            assert vif.port in left, "its pod's port stays"
            assert not free & set(holders(net_database, cluster, neutron))

        await eventually(gone, timeout=60)


IDLE = 12.0  # pool_idle of the test below: above DEMAND_WINDOW, so the refill's target is back at MIN by then


async def test_an_idle_pool_gives_its_free_ports_above_the_minimum_back_to_neutron(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database, neutron: OpenStackBackend
) -> None:
    """A pool nobody has taken from for pool_idle seconds keeps pool_min free ports: the rest are deleted in
    Neutron and leave the database; the port a pod holds stays."""
    cluster = cluster_name()
    async with translating(kube, net_database, neutron, cluster, **{**POOLS, "pool_idle": IDLE}) as translator:
        pools = translator.pools
        assert pools is not None
        names = ["p0", "p1", "p2", "p3"]
        for name in names:
            await bound_pod(kube, namespace, name, unserved_node)
        vifs = [await vif_of(kube, namespace, name) for name in names]
        key = PoolKey.of(unserved_node, namespace, vifs[0].security_groups)
        for name in names[1:]:  # their ports come back: the pool holds more than its minimum
            await delete_pod(kube, namespace, name, grace=0)
        await eventually(lambda: holds_free(pools, key, MIN + len(names) - 1), timeout=60)

        def shrunk() -> None:
            assert pools.free_counts().get(key) == MIN and pools.making() == 0, pools.free_counts()
            rows = holders(net_database, cluster, neutron)
            in_neutron = pool_ports(neutron, cluster, vifs[0].network)
            assert set(in_neutron) == {port for port in rows if port in in_neutron}, "no port without its row"
            assert len(in_neutron) == MIN + 1 and vifs[0].port in in_neutron, sorted(in_neutron)

        await eventually(shrunk, timeout=IDLE + 60)
