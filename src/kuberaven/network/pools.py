"""Port pools (network/): pods take ports made ahead of time, so no Neutron call is on a pod's path.

    start ──► load(): the pools rebuilt from Neutron (ports named kuberaven-pool-<cluster>, subports with their
              trunk and VLAN id) and the database (one "Port" translation row per pooled port: its node,
              network, groups, and the pod holding it; pool_recovery.py)
    pods.py's batch ──► take(): each pod's free port of its (node, namespace, groups) pool (a nested node's: a
                        subport of its trunk), or another pool's of its place (choose()); none: PoolEmpty
                    ──► Taken (pool_asks.py), recorded by the pods reconciler in ONE transaction with the pod's
                        row; failed: not_recorded() puts it back
    a pod terminating ──► returning(): its port counts toward its pool's target (pool_demand.py)
    a pod gone ──► the pods reconciler's transaction: its Port row free again, its Pod row deleted
               ──► released(): the port back in its pool (or deleted: its node, trunk or network went)
    run(), in the background ──► refill_plan(): bulk requests (one POST each, tags and binding:host_id in
                                 it; a nested node's: subports, attached to its trunk in one call with VLAN
                                 ids from rules/trunks.py) up to each pool's target, waiting pods' ports first;
                                 startable(): IN_FLIGHT at once, one per trunk;
                                 prewarm every namespace's default pool on every node; shrink_plan(): idle
                                 pools back to their minimum
    a namespace gone ──► forget_namespace() (its network takes the ports with it); a node gone ──► forget_node()

No port serves two pods: a port taken leaves the free lists under the lock,
and changes hands only in a database transaction that names the pod, made
before the pod's VIF annotation is written; a SIGKILL before it leaves the
port free (in the database, or untracked in Neutron, where load() adopts
it). Only the translator's process writes a cluster's pools (one leader per
cluster), so the free lists live in memory under one lock and the database
is their durable copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from .. import metrics
from ..kube.loops import Loops
from .backend import BackendError, NetworkOptions
from .drivers import PoolingBackend
from .pool_asks import PoolAsk, PoolEmpty, PortRefused, Taken, actionable
from .pool_demand import PoolDemand
from .pool_recovery import KIND, recover
from .port_supply import PortSupply
from .rules.pools import PoolKey, choose, key_of, port_state, refill_plan, shrink_plan, startable
from .state import TranslationStore

__all__ = ["KIND", "PoolAsk", "PoolEmpty", "PortPools", "PortRefused", "Taken", "actionable"]

log = logging.getLogger(__name__)

PERIOD = 1.0  # seconds between two looks at the pools when nothing wakes them
# Seconds before a pool whose refill failed is refilled again: what failed (a subnet out of addresses, a quota)
# seldom mends at once, and each look would otherwise send Neutron the same failing request.
RETRY_FAILED = 5.0
NAMESPACE, NODE = "namespace", "node"  # what a forgotten name was


class PortPools:
    """One cluster's pools of free ports (openstack backend, our CNI), run beside its translator."""

    def __init__(
        self,
        store: TranslationStore,
        backend: PoolingBackend,
        options: NetworkOptions,
        cluster: str,
        nodes: Callable[[], Awaitable[dict[str, str | None]]],
    ) -> None:
        """``nodes``: the cluster's nodes now (a lister's, read whole), each with its trunk's id (None: bare):
        every namespace's default pool is kept on each (a nested node's: subports of its trunk)."""
        self.store = store
        self.backend = backend
        self.ports = PortSupply(backend, cluster)
        self.options = options
        self.cluster = cluster
        self.nodes = nodes
        self._lock = threading.Lock()
        self._free: dict[PoolKey, list[dict[str, Any]]] = defaultdict(list)
        self._making: dict[PoolKey, int] = defaultdict(int)
        self._demand = PoolDemand()
        # (NAMESPACE or NODE, its name) → bumped when forgotten (a namespace and a node of one name apart): a refill
        # begun before keeps no port for it.
        self._epoch: dict[tuple[str, str], int] = defaultdict(int)
        self._gone_nodes: set[str] = set()
        self._node_trunks: dict[str, str] = {}  # node → its trunk's id ("": bare), as node_seen() last said
        self._dying: dict[str, str] = {}  # namespace → its network being deleted: no pool port is made on it
        self._waiting: dict[PoolKey, int] = defaultdict(int)  # pods waiting for a port of the pool
        # A pool's last failed refill, when, and whether it is actionable(); until a refill succeeds.
        self._errors: dict[PoolKey, tuple[str, float, bool]] = {}
        self._arrivals: dict[tuple[str, str, str], asyncio.Event] = {}  # a pool's place → set when ports come
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the counts (under the lock) ------------------------------------------------------------------

    def free_counts(self) -> dict[PoolKey, int]:
        with self._lock:
            return {key: len(ports) for key, ports in self._free.items() if ports}

    def making(self) -> int:
        """Ports whose bulk requests are in flight (tests read it: a pool at rest makes none)."""
        with self._lock:
            return sum(self._making.values())

    def wake(self) -> None:
        """Look at the pools now (from any thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    # -- start: rebuilt from Neutron and the database -----------------------------------------------

    def load(self) -> int:
        """The pools as Neutron and the database have them (pool_recovery.py; blocking, before the translator is
        ready); returns how many free ports they hold."""
        recovered = recover(self.store, self.backend, self.cluster, self.ports.delete)
        with self._lock:
            self._free.clear()
            for state in recovered.free:
                self._free[key_of(state)].append(state)
            pools = len(self._free)
        log.info(
            "port pools of %s: %d free ports in %d pools (%d adopted, %d freed)",
            self.cluster,
            len(recovered.free),
            pools,
            recovered.adopted,
            recovered.freed,
        )
        return len(recovered.free)

    # -- pods take and give back ----------------------------------------------------------------------

    def take(self, asks: list[PoolAsk]) -> list[Taken | PoolEmpty]:
        """Each pod's free port (pods.py's batch), out of the free lists at once, or why it has none yet."""
        now = time.monotonic()
        results: list[Taken | PoolEmpty] = []
        regrouped = 0
        with self._lock:
            counts = {key: len(ports) for key, ports in self._free.items() if ports}
            for ask in asks:
                key = ask.key
                pool, regroup = choose(key, counts)
                if pool is None:
                    error, _, cause = self._errors.get(key) or (None, 0.0, False)
                    results.append(PoolEmpty(key, error, cause))
                    continue
                self._demand.took(key, now)
                counts[pool] -= 1
                regrouped += regroup
                results.append(Taken(ask, self._free[pool].pop()))
        metrics.POOL_TAKES.labels(self.cluster, "pool").inc(sum(isinstance(r, Taken) for r in results) - regrouped)
        metrics.POOL_TAKES.labels(self.cluster, "regroup").inc(regrouped)
        self.wake()
        return results

    def not_recorded(self, taken: list[Taken]) -> None:
        """The transaction naming these ports' pods failed: free again (in the database, else load() adopts them)."""
        with contextlib.suppress(Exception):
            self.store.save_many([(KIND, t.port["port"], t.port["namespace"], t.port["node"], t.port) for t in taken])
        self._give_back([t.port for t in taken])

    async def arrival(self, key: PoolKey, timeout: float) -> None:
        """Until ports may be free for a pod of ``key`` (made for, or given back to, a pool of its node and
        namespace), at most ``timeout`` seconds; meanwhile the pod counts in its pool's refill."""
        self._loop = asyncio.get_running_loop()
        where = key.place
        arrived = self._arrivals.setdefault(where, asyncio.Event())
        with self._lock:
            self._waiting[key] += 1
            ready = any(ports for k, ports in self._free.items() if k.place == where)
        metrics.POOL_EMPTY.labels(self.cluster).inc()
        self._wake.set()
        try:
            if not ready:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), timeout)
        finally:
            with self._lock:
                self._waiting[key] -= 1
                if not self._waiting[key]:
                    del self._waiting[key]

    def _arrived(self, key: PoolKey) -> None:
        """Wake the pods waiting on ``key``'s node and namespace (on the loop)."""
        arrived = self._arrivals.pop(key.place, None)
        if arrived is not None:
            arrived.set()

    def _announce(self, keys: set[PoolKey]) -> None:
        """From a worker thread: ports came to these pools."""
        if self._loop is not None:
            for key in keys:
                self._loop.call_soon_threadsafe(self._arrived, key)
        self.wake()

    def returning(self, uid: str, namespace: str, state: dict[str, Any]) -> None:
        """A terminating pod's pooled port (its Pod row's ``state``) will come back: its pool's refill counts it."""
        key = PoolKey.of(state["node"], namespace, state["security_groups"], state.get("trunk"))
        with self._lock:
            self._demand.returning(uid, key, time.monotonic())

    def released(self, uid: str, freed: dict[str, Any] | None) -> bool:
        """A gone pod's port, freed in the database by the pods reconciler's transaction (``freed``: the port's
        row state; None: no pooled port's row named the pod), back to its pool, or deleted when its node, its
        node's trunk or its network went (blocking); whether a port was freed."""
        with self._lock:
            self._demand.returned(uid)
        if freed is None:
            return False
        gone = freed["node"] in self._gone_nodes or self._other_trunk(freed)  # its node, or the node's trunk
        if gone or self._dying.get(freed["namespace"]) == freed.get("network"):
            self.store.delete_rows(KIND, [freed["port"]])
            if gone:  # else its network's deletion takes it
                self.ports.delete([freed])
            return True
        self._give_back([freed])
        metrics.POOL_RECYCLED.labels(self.cluster).inc()
        return True

    def _other_trunk(self, state: dict[str, Any]) -> bool:
        """Whether a port's node is known to be on another trunk now (or bare) than the port was made for."""
        node_trunk = self._node_trunks.get(state["node"])
        return node_trunk is not None and node_trunk != (state.get("trunk") or "")

    def _give_back(self, states: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self._lock:
            for state in states:
                self._free[key_of(state)].append({**state, "pod": None})
                self._demand.gave(key_of(state), now)
        self._announce({key_of(state) for state in states})

    # -- namespaces and nodes that go ---------------------------------------------------------------

    def forget_namespace(self, namespace: str, network: str) -> None:
        """Drop a namespace's pools (blocking): its network's deletion takes the ports with it, and no refill
        makes another on that network (a bulk request on a network being deleted delays its deletion and
        finds its subnet gone)."""
        with self._lock:
            self._epoch[NAMESPACE, namespace] += 1
            self._dying[namespace] = network
            for key in [k for k in self._free if k.namespace == namespace]:
                del self._free[key]
        self.store.delete_rows(KIND, [row.uid for row in self.store.rows_in(KIND, namespace)])

    def forget_node(self, node: str) -> None:
        """Delete a gone node's free ports (blocking); ports its pods still hold are deleted as they go."""
        with self._lock:
            self._epoch[NODE, node] += 1
            self._gone_nodes.add(node)
            ports = [s for key in [k for k in self._free if k.node == node] for s in self._free.pop(key)]
        self.store.delete_rows(KIND, [state["port"] for state in ports])
        self.ports.delete(ports)

    def drop_group(self, group: str) -> None:
        """Delete the free ports that carry a security group about to go (blocking): a pod's port given back
        keeps its groups, and Neutron refuses to delete a group in use."""
        with self._lock:
            ports = [s for key in [k for k in self._free if group in k.security_groups] for s in self._free.pop(key)]
        self.store.delete_rows(KIND, [state["port"] for state in ports])
        self.ports.delete(ports)

    def node_seen(self, node: str, trunk: str | None = None) -> None:
        """The node is there, nested on ``trunk`` (None: bare); the free ports it had as another kind of node
        (a trunk named since, or no longer) are deleted, and ports its pods hold are as they go."""
        with self._lock:
            self._gone_nodes.discard(node)
            self._node_trunks[node] = trunk or ""
            stale = [k for k in self._free if k.node == node and k.trunk != (trunk or "")]
            if stale:
                self._epoch[NODE, node] += 1
            ports = [state for key in stale for state in self._free.pop(key)]
        if ports:
            log.info("node %s: %d free ports of its former trunk or binding deleted", node, len(ports))
            self.store.delete_rows(KIND, [state["port"] for state in ports])
            self.ports.delete(ports)
        self.wake()

    # -- refill and shrink, in the background -------------------------------------------------------

    def _wanted(self, nodes: dict[str, str | None]) -> tuple[list[PoolKey], set[str]]:
        """Every translated namespace's default pool on every node (prewarming), and the namespaces whose
        pools may be refilled: translated and not being deleted (a deletion done is forgotten here)."""
        networks = {row.name: row.state for row in self.store.rows_of("Namespace")}
        with self._lock:
            self._dying = {n: net for n, net in self._dying.items() if (networks.get(n) or {}).get("network") == net}
            live = {name for name, state in networks.items() if self._dying.get(name) != state.get("network")}
        wanted = [
            PoolKey.of(node, name, [networks[name]["security_group"]], trunk)
            for node, trunk in nodes.items()
            if node not in self._gone_nodes
            for name in sorted(live)
        ]
        return wanted, live

    async def run(self, blocking: Callable[..., Awaitable[Any]], loops: Loops) -> None:
        """Refill and shrink until ``loops`` end (kube/loops.py's every(): a failed look is logged, the next
        tries again); each look at most every PERIOD s, or when woken; then the refills in flight awaited."""
        self._loop = asyncio.get_running_loop()
        in_flight: dict[asyncio.Future[Any], PoolKey] = {}
        await loops.every(
            PERIOD, lambda: self._look(blocking, in_flight), f"port pools of {self.cluster}", wake=self._wake
        )
        for pending in list(in_flight):
            with contextlib.suppress(Exception):
                await pending

    async def _look(
        self, blocking: Callable[..., Awaitable[Any]], in_flight: dict[asyncio.Future[Any], PoolKey]
    ) -> None:
        """One look at the pools: the refills they need started (rules/pools.py's startable()), idle ports
        deleted."""
        wanted, live = await blocking(self._wanted, await self.nodes())
        now = time.monotonic()
        with self._lock:
            free = {key: len(ports) for key, ports in self._free.items()}
            metrics.POOL_FREE.labels(self.cluster).set(sum(free.values()))
            demand, waiting, coming = self._demand.demand(now), dict(self._waiting), self._demand.coming(now)
            plan = refill_plan(free, self._making, demand, waiting, wanted, self.options, coming)
            failed = {key for key, (_, when, _) in self._errors.items() if now - when < RETRY_FAILED}
            plan = [(key, count) for key, count in plan if key.namespace in live and key not in failed]
            plan = startable(plan, list(in_flight.values()))
            for key, count in plan:
                self._making[key] += count
            shrink = shrink_plan(free, self._demand.last_take, now, self.options)
        for key, count in plan:
            making = asyncio.ensure_future(blocking(self._refill, key, count))
            in_flight[making] = key
            making.add_done_callback(lambda done: in_flight.pop(done, None))
            making.add_done_callback(self._refilled)
        for key, count in shrink:
            await blocking(self._shrink, key, count)

    def _refilled(self, done: asyncio.Future[Any]) -> None:
        """A refill ended: look again (another may be due), and say why it failed if it did."""
        self._wake.set()
        if not done.cancelled() and done.exception() is not None:
            log.error("refilling a port pool of %s failed", self.cluster, exc_info=done.exception())

    def _refill(self, key: PoolKey, count: int) -> None:
        """One bulk request for a pool (blocking), its ports recorded free; made for a namespace or node
        forgotten meanwhile, they are deleted."""
        epochs, started = (self._epoch[NAMESPACE, key.namespace], self._epoch[NODE, key.node]), time.monotonic()
        failed: tuple[str, float, bool] | None = None
        try:
            network = self.store.namespace_state(key.namespace)
            if network is not None and self._dying.get(key.namespace) == network["network"]:
                network = None
            ports = self.ports.create(key, network, count) if network is not None else []
        except BackendError as error:
            log.warning("refilling the port pool of %s on %s%s: %s", key.namespace, key.node, _on(key), error)
            failed, ports = (str(error), time.monotonic(), actionable(error)), []
        finally:
            with self._lock:  # _look() reads the errors under it
                self._making[key] -= count
                if failed is None:
                    self._errors.pop(key, None)
                else:
                    self._errors[key] = failed
        if not ports:
            return
        assert network is not None
        took = time.monotonic() - started
        log.info(
            "port pool of %s on %s%s: %d ports made in %.1f s", key.namespace, key.node, _on(key), len(ports), took
        )
        states = [port_state(p, key.namespace, key.node, network, list(key.security_groups), sub) for p, sub in ports]
        self.store.save_many([(KIND, s["port"], key.namespace, key.node, s) for s in states])
        with self._lock:
            current = (self._epoch[NAMESPACE, key.namespace], self._epoch[NODE, key.node]) == epochs
            if current:
                self._free[key].extend(states)
        if current:
            self._announce({key})
        else:
            self.store.delete_rows(KIND, [s["port"] for s in states])
            self.ports.delete(states)

    def _shrink(self, key: PoolKey, count: int) -> None:
        with self._lock:
            ports = self._free.get(key, [])
            gone, self._free[key] = ports[:count], ports[count:]
        self.store.delete_rows(KIND, [state["port"] for state in gone])
        self.ports.delete(gone)
        if gone:
            log.info("port pool of %s on %s: %d idle ports deleted", key.namespace, key.node, len(gone))


def _on(key: PoolKey) -> str:
    return f" (subports of trunk {key.trunk})" if key.trunk else ""
