"""The clusters this replica serves (runtime/, a component of ``kuberaven run``; daemon.py builds it).

    KubernetesService rows (read every ``cluster_poll`` s) ──► one _Cluster per row: its KubeClient and Lease elector
        owned ──► a ComponentSet: that cluster's informers, inventory, sync loop, network translator …
                  under a Supervisor of its own, started when the Lease is won, stopped (positions
                  stored) when it is lost, released, or the row changes or goes
    with election: every ``retry_period`` s renew the owned Leases, count the replicas alive
        (runtime/replicas.py), and take or release clusters as plan_ownership() (ownership.py) says
    without election (one process): every cluster is owned

A row added starts its cluster, a row deleted stops it, a row whose
kubeconfig or context changed restarts it: no process restart. A set that
gives up (a component crashed too often) makes run() raise GaveUp, so the
daemon's supervisor sees this component crash as it saw the loops before.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from annotated_types import Gt

from .. import metrics
from ..component_status import ComponentStatus
from ..kube.client import KubeClient
from .health import Component
from .leader import LEASE_ERRORS, LeaderElector, LeaseTimings
from .ownership import REPLICA_LABEL, LeaseView, cluster_lease, plan_ownership, replica_group, replica_lease
from .replicas import ReplicaCensus
from .supervisor import Supervisor, SupervisorOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterRow:
    """What of a KubernetesService row its cluster's set is built from: a change restarts the set."""

    name: str
    kubeconfig: str | None
    context: str | None
    # The row's other columns its components read (its network options): a change restarts the set too.
    options: tuple[tuple[str, str | None], ...] = ()

    def option(self, key: str) -> str | None:
        return dict(self.options).get(key)


class UnusableCluster(Exception):
    """A row names no usable kubeconfig: logged, and the row is skipped until it changes."""


# A client for a row (UnusableCluster when it has none), and the one place a cluster's components
# are made (daemon.py's).
Connect = Callable[[ClusterRow], KubeClient]
# A cluster's components; built by a coroutine when they depend on what the cluster serves (API discovery).
BuildComponents = Callable[[ClusterRow, KubeClient], list[Component] | Awaitable[list[Component]]]


def replica_identity() -> str:
    """This process among the replicas: host and process id (a restarted replica is a new one)."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class ClusterOptions(LeaseTimings):
    """How the clusters are shared (settings: leader_elect, lease_*, cluster_poll; the Lease timings inherited).

    Off (leader_elect false): this process owns every cluster. On: each cluster is owned through the Lease
    <lease_name>-cluster-<row> in lease_namespace of that cluster; each replica holds
    <lease_name>-replica-<identity> in the default cluster.
    """

    leader_elect: bool = False
    lease_namespace: str = "default"
    lease_name: str = "kuberaven"
    # Seconds between reads of the KubernetesService rows (clusters added, changed or deleted).
    cluster_poll: Annotated[float, Gt(0)] = 5.0
    identity: str = field(default_factory=replica_identity)

    def elector(self, client: KubeClient, lease: str, labels: dict[str, str] | None = None) -> LeaderElector:
        return LeaderElector(client, self.lease_namespace, lease, self.identity, timings=self, labels=labels)


class ComponentSet:
    """One cluster's components under a supervisor of their own, running from creation until stop()."""

    def __init__(self, components: Sequence[Component], options: SupervisorOptions) -> None:
        self.supervisor = Supervisor(components, options)
        self._stopping = asyncio.Event()
        self.supervisor.start()
        self.task = asyncio.create_task(self.supervisor.run(self._stopping), name="cluster components")

    async def stop(self) -> None:
        """Stop every component (batches committed, positions stored) and wait for them."""
        self._stopping.set()
        await asyncio.gather(self.task, return_exceptions=True)


class _Cluster:
    def __init__(self, row: ClusterRow, client: KubeClient, elector: LeaderElector | None) -> None:
        self.row = row
        self.client = client
        self.elector = elector
        self.set: ComponentSet | None = None
        self.stopping: asyncio.Task[None] | None = None  # its set stopping (then its Lease released)

    @property
    def busy(self) -> bool:
        """Its set is still stopping: not to be taken again, nor stopped twice."""
        return self.stopping is not None and not self.stopping.done()


class ClusterManager:
    """Keeps one ComponentSet running per owned cluster; run/stop/ready/status as any daemon component."""

    name = "clusters"

    def __init__(
        self,
        read_rows: Callable[[], list[ClusterRow]],
        connect: Connect,
        build: BuildComponents,
        supervisor_options: SupervisorOptions,
        options: ClusterOptions | None = None,
        *,
        census_client: KubeClient | None = None,
    ) -> None:
        self.read_rows = read_rows
        self.connect = connect
        self.build = build
        self.supervisor_options = supervisor_options
        options = options or ClusterOptions()
        self.poll = options.cluster_poll
        election = self.election = options if options.leader_elect else None
        self.census = (
            ReplicaCensus(
                census_client,
                election.elector(
                    census_client,
                    replica_lease(election.lease_name, election.identity),
                    labels={REPLICA_LABEL: replica_group(election.lease_name)},
                ),
            )
            if election is not None and census_client is not None
            else None
        )
        self.clusters: dict[str, _Cluster] = {}
        self._retiring: dict[str, asyncio.Task[None]] = {}
        self._stops: set[asyncio.Task[None]] = set()  # sets stopping in the background
        self._unusable: dict[str, ClusterRow] = {}  # rows whose kubeconfig failed to load, logged once
        self._stopping = asyncio.Event()
        self._ticked = False

    async def run(self) -> None:
        self._stopping.clear()
        self._ticked = False
        loop = asyncio.get_running_loop()
        next_poll = 0.0
        try:
            while not self._stopping.is_set():
                if loop.time() >= next_poll:
                    self._reconcile_rows(await asyncio.to_thread(self.read_rows))
                    next_poll = loop.time() + self.poll
                await self._rebalance()
                self._raise_if_gave_up()
                self._ticked = True
                interval = self.election.retry_period if self.election is not None else self.poll
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), min(interval, max(0.0, next_poll - loop.time())))
        finally:
            await self._stop_all()

    def stop(self) -> None:
        self._stopping.set()

    # -- rows ------------------------------------------------------------------------------

    def _reconcile_rows(self, rows: list[ClusterRow]) -> None:
        wanted = {row.name: row for row in rows}
        for name, cluster in list(self.clusters.items()):
            if wanted.get(name) != cluster.row:
                log.info("cluster %s %s; stopping its watches", name, "changed" if name in wanted else "was deleted")
                del self.clusters[name]
                self._retiring[name] = asyncio.create_task(self._retire(cluster), name=f"retire {name}")
        for name, row in wanted.items():
            if name not in self.clusters and name not in self._retiring:
                self._add(row)
        for name in set(self._unusable) - set(wanted):
            del self._unusable[name]

    def _add(self, row: ClusterRow) -> None:
        try:
            client = self.connect(row)
        except UnusableCluster as error:
            if self._unusable.get(row.name) != row:
                log.warning("KubernetesService %r: %s; not watching it", row.name, error)
            self._unusable[row.name] = row
            return
        self._unusable.pop(row.name, None)
        elector = None
        if self.election is not None:
            elector = self.election.elector(client, cluster_lease(self.election.lease_name, row.name))
        self.clusters[row.name] = _Cluster(row, client, elector)
        metrics.CLUSTER_OWNED.labels(row.name).set(0)

    async def _retire(self, cluster: _Cluster) -> None:
        try:
            await self._stop(cluster, release=True)
            await cluster.client.close()
            with contextlib.suppress(KeyError):
                metrics.CLUSTER_OWNED.remove(cluster.row.name)
        finally:
            self._retiring.pop(cluster.row.name, None)

    # -- ownership ---------------------------------------------------------------------------

    async def _rebalance(self) -> None:
        if self.election is None:
            for cluster in list(self.clusters.values()):
                if cluster.set is None:
                    await self._start_set(cluster)
            return
        assert self.census is not None
        joining = not self.census.counted  # our first round: another replica may be starting with us
        alive = await self.census.count()
        clusters = list(self.clusters.values())
        views = dict(zip([c.row.name for c in clusters], await asyncio.gather(*map(self._view, clusters)), strict=True))
        plan = plan_ownership(self.election.identity, list(views), views, alive, joining=joining)
        for name in plan.release:
            if not self.clusters[name].busy:
                log.info("releasing cluster %s: over this replica's share (%d replicas alive)", name, alive)
                self._stop(self.clusters[name], release=True)
        taken = await asyncio.gather(*(self._take(self.clusters[name]) for name in plan.take))
        if any(taken):
            log.info("owning clusters %s (%d replicas alive)", ", ".join(self.owned()), alive)
        metrics.LEADER.set(1 if self.owned() else 0)

    async def _view(self, cluster: _Cluster) -> LeaseView:
        """Renew an owned cluster's Lease (stopping its set when that fails too long), or look at another's."""
        elector = cluster.elector
        assert elector is not None and self.election is not None
        mine = LeaseView(self.election.identity, expired=False)
        if elector.is_leader and cluster.busy:
            return mine  # renewed by its hand-over until released
        if elector.is_leader:
            if await elector.renew():
                return mine
            log.error("lost the Lease of cluster %s; stopping its watches", cluster.row.name)
            self._stop(cluster, release=False)
        try:
            view = await elector.observe()
        except LEASE_ERRORS as error:  # an unreachable cluster is not free: leave it alone this round
            log.warning("cluster %s: cannot read its Lease: %s", cluster.row.name, error)
            return LeaseView("?", expired=False)
        # Held in our name with no loops running (a release that failed before a restart): ours to take again.
        return LeaseView("", expired=False) if view.holder == self.election.identity else view

    async def _take(self, cluster: _Cluster) -> bool:
        if cluster.elector is None or cluster.busy or not await cluster.elector.try_acquire():
            return False
        if cluster.row.name in self.clusters:
            await self._start_set(cluster)
        return True

    async def _start_set(self, cluster: _Cluster) -> None:
        built = self.build(cluster.row, cluster.client)
        components = await built if inspect.isawaitable(built) else built
        cluster.set = ComponentSet(components, self.supervisor_options)
        metrics.CLUSTER_OWNED.labels(cluster.row.name).set(1)

    def _stop(self, cluster: _Cluster, *, release: bool) -> asyncio.Task[None]:
        """Stop the cluster's set in the background (a stop may take the stop timeout: renewals go on)."""
        if cluster.stopping is not None and cluster.busy:
            return cluster.stopping
        running, cluster.set = cluster.set, None
        metrics.CLUSTER_OWNED.labels(cluster.row.name).set(0)
        task = asyncio.create_task(self._finish_stop(cluster, running, release), name=f"stop {cluster.row.name}")
        cluster.stopping = task
        self._stops.add(task)
        task.add_done_callback(self._stops.discard)
        return task

    async def _finish_stop(self, cluster: _Cluster, running: ComponentSet | None, release: bool) -> None:
        """Stop the set (batches committed, positions stored), then hand the Lease over."""
        renewing = asyncio.create_task(self._keep_renewing(cluster)) if release and cluster.elector else None
        try:
            if running is not None:
                await running.stop()
        finally:
            if renewing is not None:
                renewing.cancel()
        if release and cluster.elector is not None:
            await cluster.elector.release()

    async def _keep_renewing(self, cluster: _Cluster) -> None:
        """While a set stops before a hand-over (up to the stop timeout), the Lease stays ours."""
        assert cluster.elector is not None
        while cluster.elector.is_leader:
            await asyncio.sleep(cluster.elector.retry_period)
            await cluster.elector.renew()

    def _raise_if_gave_up(self) -> None:
        for cluster in self.clusters.values():
            if cluster.set is not None and cluster.set.task.done() and cluster.set.task.exception() is not None:
                raise cluster.set.task.exception()  # type: ignore[misc]

    async def _stop_all(self) -> None:
        clusters = list(self.clusters.values())
        for cluster in clusters:
            self._stop(cluster, release=True)
        await asyncio.gather(*self._stops, *self._retiring.values())
        for cluster in clusters:
            await cluster.client.close()
            metrics.CLUSTER_OWNED.labels(cluster.row.name).set(0)
        self.clusters.clear()
        if self.census is not None:
            await self.census.leave()
        metrics.LEADER.set(0)

    # -- what /readyz and /metrics see --------------------------------------------------------

    def _owned_sets(self) -> list[tuple[str, ComponentSet]]:
        """The clusters owned now and their component sets, copied in one step: /readyz and /metrics read them
        from a worker thread while the loop adds and drops clusters (iterating the dict itself there failed a
        probe with "dictionary changed size during iteration")."""
        return [(name, found) for name, cluster in list(self.clusters.items()) if (found := cluster.set) is not None]

    def owned(self) -> list[str]:
        return sorted(name for name, _ in self._owned_sets())

    def ready(self) -> bool:
        return self._ticked and all(found.supervisor.ready() for _, found in self._owned_sets())

    def status(self) -> list[ComponentStatus]:
        return [w for _, found in self._owned_sets() for w in found.supervisor.status()]

    def components(self) -> list[dict[str, Any]]:
        """Each owned cluster's components as /readyz lists them."""
        return [d for _, found in self._owned_sets() for d in found.supervisor.describe()]
