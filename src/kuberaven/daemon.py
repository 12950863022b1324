"""The ``kuberaven run`` process: every loop on one asyncio loop (top of the flow).

    settings ─► Database (upgrade + bootstrap)
             ─► ClusterManager (runtime/clusters.py): KubernetesService rows ─► per owned cluster
                 (every cluster without --leader-elect; a fair share of them, by Lease, with it)
                 cluster_components() under a supervisor of its own:
                     InformerFactory (watch/): one list+watch per resource, shared by the loops below
                     ─► Inventory (inventory/) ─► rows + outbox
                     ─► SyncLoop (provisioning/): that cluster's managed rows ─► objects
                     ─► NetworkTranslator (network/): objects ─► networks, ports, load balancers
                        ─► PortActivation (network/activation.py): ports' status, on the translator's runtime
                     ─► default cluster only: PolicyRunner (plugins' model policies), Engine(watchers)
             ─► OutboxRelay (events/, own thread) ─► Kafka     (only with --kafka)
             ─► web/ (one HTTP server): REST API, UI, /healthz /readyz /metrics
             ─► HistoryKeeper (runtime/history.py): history recording on or off, pruning
    every one of them a component of one Supervisor (runtime/supervisor.py): restarted with
    backoff when it crashes; one that crashes too often ends the process with exit code 1

Each KubernetesService row is one cluster: "kubernetes" uses the configured
kubeconfig/context, others their own (rows with none are skipped); rows
added, changed or deleted while running start, restart or stop their
cluster. SIGINT or SIGTERM stop the watches, commit the batch in hand,
flush the relay, release the Leases and return 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import sqlalchemy as sa
from lightkube.core.exceptions import ConfigError as KubeConfigError
from sqlalchemy.orm import configure_mappers

from .events.log import trim_sent
from .inventory.component import Inventory
from .kube.client import KubeClient
from .kube.errors import ApiError
from .kube.reflector import ReflectorOptions
from .model.bootstrap import DEFAULT_CLUSTER
from .model.cluster import KubernetesService
from .model.database import Database
from .model.errors import ModelError
from .network.activation import PortActivation
from .network.backend import CNI_KUBERAVEN, for_cluster
from .network.backends import make_backend
from .network.drivers import reports_port_status
from .network.endpointslices import members_target
from .network.reach_backends import ReachBackends
from .network.translator import NetworkTranslator
from .plugins import PluginError, import_watchers, load_plugins, plugin_watchers, policies
from .provisioning.loop import SyncLoop
from .provisioning.model_policies import PolicyRunner
from .runtime.clusters import ClusterManager, ClusterRow, UnusableCluster
from .runtime.health import Component, report_initial_sync
from .runtime.history import HistoryKeeper
from .runtime.memory import configure_malloc
from .runtime.supervisor import GaveUp, Supervisor
from .settings import Settings
from .watch.engine import Engine
from .watch.informers import InformerFactory
from .watch.positions import DatabasePositionStore
from .watch.watcher import Watcher
from .web.metric_history import MetricHistory
from .web.probes import ASGIApp, ProbesApp, Readiness
from .web.server import WebServer

if TYPE_CHECKING:
    from .events.component import RelayComponent

log = logging.getLogger(__name__)
WATCHERS_POSITIONS_PREFIX = "watchers:"  # watch_position targets of the watchers operators register
# The columns of a KubernetesService row its components read besides how to reach it (a change restarts them).
CLUSTER_OPTIONS = ("pod_cidr", "service_cidr", "namespace_pool", "external_network", "openstack_project")
EXIT_OK = 0
EXIT_FAILED = 1  # a component crashed too often: the Deployment restarts us


class StartupError(Exception):
    """kuberaven cannot start: the message names what is unreachable or misconfigured."""


async def _prepare(database: Database, settings: Settings) -> KubeClient:
    """The database at the newest schema and the default cluster answering (its client), or StartupError.

    The two at once: the schema is made in a thread while the loop waits for the API server's first answer
    (neither needs the other). A database that fails is named at once, even while the server is retried.
    Other clusters are reached when their components start: one that is down backs off on its own.
    """
    try:
        client = KubeClient.from_kubeconfig(settings.kubeconfig, settings.context)
    except KubeConfigError as error:
        raise StartupError(f"kubeconfig: {error}") from None
    reach = asyncio.create_task(_reach(DEFAULT_CLUSTER, client, settings.reach_timeout), name="reach the API server")
    try:
        await _prepare_database(database, settings)
        await reach
    except BaseException:
        reach.cancel()
        await asyncio.gather(reach, return_exceptions=True)
        await client.close()
        raise
    return client


async def _prepare_database(database: Database, settings: Settings) -> None:
    try:
        await asyncio.to_thread(_prepare_and_map, database, settings)
    except (sa.exc.OperationalError, ModelError) as error:
        reason = getattr(error, "orig", None) or error
        raise StartupError(f"database {database.url.render_as_string()}: {reason}") from None
    log.info("database %s ready", database.url.render_as_string())


def _prepare_and_map(database: Database, settings: Settings) -> None:
    """The schema and bootstrap, then the ORM's mappers configured (45-70 ms of CPU): every component maps rows
    from its first read on, and here it is done while the loop waits for the API server's first answer rather than
    on the way from the supervisor's start to the clusters' components (the bootstrap does not configure them)."""
    database.prepare(settings.kubeconfig, settings.context)
    configure_mappers()


async def _reach(cluster: str, client: KubeClient, timeout: float) -> None:
    """Fail at start (the supervisor restarts us) rather than wait silently for a server that is not there."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await client.request("GET", "/version", timeout=5)
            return
        except (httpx.HTTPError, ApiError) as error:
            if asyncio.get_running_loop().time() > deadline:
                server = client.http.base_url
                raise StartupError(f"cluster {cluster!r}: cannot reach the API server at {server}: {error}") from None
            await asyncio.sleep(1)


@dataclass(frozen=True)
class Shared:
    """What every cluster's components share: built once per process."""

    database: Database
    settings: Settings
    relay: RelayComponent | None
    watchers: list[Watcher]
    model_policies: list[Any]


async def run_daemon(settings: Settings, watchers: Iterable[Watcher] = ()) -> int:
    """Run until a signal; returns the process exit code. StartupError when it cannot start."""
    configure_malloc()  # before any thread allocates (runtime/memory.py says why)
    load_plugins()
    watchers = [*watchers, *plugin_watchers(), *_setting_watchers(settings)]
    try:
        database = Database(settings.db)
    except ModelError as error:
        raise StartupError(str(error)) from None
    try:
        default_client = await _prepare(database, settings)
    except StartupError:
        database.dispose()
        raise
    if settings.clusters.leader_elect and database.url.get_backend_name() == "sqlite":
        log.warning(
            "--leader-elect on SQLite: replicas share clusters, but each relay publishes every event; "
            "use PostgreSQL for more than one replica"
        )
    relay = _relay(database, settings)
    shared = Shared(database, settings, relay, watchers, policies() if settings.sync else [])
    if settings.network:
        log.info("network translation with the %s backend", settings.backend.backend)
    manager = _cluster_manager(shared, default_client)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)

    # can-reach reads the backend that made what it is asked about: OpenStack on the daemon's own cloud.
    reach = ReachBackends(database, settings.backend.cloud)

    def ready() -> tuple[bool, dict[str, Any]]:
        return _readiness(supervisor, database, manager)  # the supervisor is made below

    samples = MetricHistory(settings.metrics_sample_every).start()  # the plots' hour, from the start
    web = WebServer(settings.listen, ProbesApp(ready, lambda: _web_app(database, settings, ready, reach, samples)))
    history = HistoryKeeper(database, settings.history)
    supervisor = Supervisor([web, manager, history, *([relay] if relay else [])], settings.supervisor)
    try:
        if relay is None:
            # No Kafka: the outbox is the event log, trimmed by age.
            await asyncio.to_thread(trim_sent, database, settings.events.outbox_retention, sent_only=False)
        return await _run_components(supervisor, stopping, settings.progress_interval)
    finally:
        samples.stop()
        await default_client.close()
        reach.close()
        database.dispose()


def _web_app(
    database: Database, settings: Settings, ready: Readiness, reach: ReachBackends, samples: MetricHistory
) -> ASGIApp:
    """The REST API and UI (FastAPI), imported and made on the first request that is not a probe."""
    from .web.app import create_app
    from .web.guards import HostRule

    hosts_rule = HostRule.for_listener(settings.listen, settings.token, settings.allowed_hosts)
    return create_app(database, ready, settings.token, hosts_rule, reach, samples)


def _cluster_manager(shared: Shared, default_client: KubeClient) -> ClusterManager:
    settings = shared.settings
    return ClusterManager(
        lambda: cluster_rows(shared.database),
        lambda row: _connect(row, settings),
        lambda row, client: cluster_components(row, client, shared),
        settings.supervisor,
        settings.clusters,
        census_client=default_client,
    )


def cluster_rows(database: Database) -> list[ClusterRow]:
    """Every KubernetesService row: one cluster each (read at start and every cluster_poll seconds)."""
    columns = [getattr(KubernetesService, column) for column in ("name", "kubeconfig", "context", *CLUSTER_OPTIONS)]
    with database.session() as session:
        rows = session.execute(sa.select(*columns).order_by(KubernetesService.id))
        return [
            ClusterRow(name, kubeconfig, context, tuple(zip(CLUSTER_OPTIONS, values, strict=True)))
            for name, kubeconfig, context, *values in rows
        ]


def _connect(row: ClusterRow, settings: Settings) -> KubeClient:
    """ "kubernetes" uses the configured kubeconfig/context, others their own."""
    if row.name == DEFAULT_CLUSTER:
        kubeconfig, context = settings.kubeconfig, settings.context
    elif row.kubeconfig:
        kubeconfig, context = row.kubeconfig, row.context
    else:
        raise UnusableCluster("it has no kubeconfig")
    try:
        return KubeClient.from_kubeconfig(kubeconfig, context)
    except (KubeConfigError, OSError) as error:
        raise UnusableCluster(f"kubeconfig {kubeconfig}: {error}") from None


async def cluster_components(row: ClusterRow, client: KubeClient, shared: Shared) -> list[Component]:
    """The one cluster's components, run while this replica owns it: inventory, provisioning, network, watchers.

    The default cluster's set also runs the model policies and the registered watchers (one replica runs them).
    """
    settings, database, cluster = shared.settings, shared.database, row.name
    informers = InformerFactory(client, cluster, ReflectorOptions(not_ready_after=settings.watch_not_ready_after))
    on_commit = shared.relay.wake if shared.relay else None
    components: list[Component] = [
        Inventory(client, database, cluster, settings.inventory, on_commit=on_commit, informers=informers)
    ]
    publishing = shared.relay.for_cluster(cluster) if shared.relay else None
    if publishing is not None:  # leader election on PostgreSQL: this replica publishes the clusters it owns
        components.append(publishing)
    if settings.sync:
        components.append(SyncLoop(client, database, cluster, settings.provisioning))
    if settings.network:
        translator = await _network_translator(row, client, informers, shared)
        components.append(translator)
        backend = translator.backend
        if settings.translation.cni == CNI_KUBERAVEN and reports_port_status(backend):
            # kuberaven-cni waits for the ports it plugs to be ACTIVE: their status, from the backend, on the
            # translator's runtime (one store, one set of threads, one map of reports per cluster).
            components.append(PortActivation(translator.runtime, backend.port_status))
    if cluster == DEFAULT_CLUSTER:
        if shared.model_policies:
            components.append(PolicyRunner(database, shared.model_policies))
        if shared.watchers:
            # Their positions are stored too: without, a restart would list every watched resource again.
            positions = DatabasePositionStore(database, DEFAULT_CLUSTER, WATCHERS_POSITIONS_PREFIX)
            components.append(
                Engine(client, shared.watchers, options=settings.watching, informers=informers, positions=positions)
            )
    # Every consumer has declared what it watches: the informers start once each has joined.
    components.append(informers)
    return components


def _setting_watchers(settings: Settings) -> list[Watcher]:
    try:
        return import_watchers(settings.watchers)
    except PluginError as error:
        raise StartupError(str(error)) from None


def _readiness(
    supervisor: Supervisor, database: Database, manager: ClusterManager | None = None
) -> tuple[bool, dict[str, Any]]:
    """The supervisor's view, each owned cluster's components, the clusters owned, and the database."""
    ready, body = supervisor.readiness()
    if manager is not None:
        body["components"] += manager.components()
        body["clusters"] = manager.owned()
    problem = database.write_problem()
    body["database"] = {"ok": problem is None, "error": problem}
    ready = ready and problem is None
    return ready, {**body, "ready": ready}


async def _network_translator(
    row: ClusterRow, client: KubeClient, informers: InformerFactory, shared: Shared
) -> NetworkTranslator:
    """The cluster's own network options (its row's, None: not set) over the settings'."""
    settings = shared.settings
    options = for_cluster(
        settings.translation,
        pod_cidr=row.option("pod_cidr"),
        service_cidr=row.option("service_cidr"),
        namespace_pool=row.option("namespace_pool"),
        external_network=row.option("external_network"),
    )
    chosen = settings.backend
    project = row.option("openstack_project") or chosen.openstack_project
    backend = make_backend(
        chosen.backend, shared.database, chosen.cloud, project, chosen.lb_provider, chosen.ovn_nb_connection
    )
    # Which members source the cluster serves decides an informer: asked before any is declared.
    members = await members_target(client, informers.discovery)
    return NetworkTranslator(
        client,
        shared.database,
        row.name,
        backend,
        options,
        concurrency=settings.watching.concurrency,
        shutdown_timeout=settings.watching.shutdown_timeout,
        informers=informers,
        members=members,
    )


def _relay(database: Database, settings: Settings) -> RelayComponent | None:
    """The Kafka relay, only with --kafka (confluent-kafka is loaded only then)."""
    if settings.events.kafka is None:
        return None
    from .events.component import RelayComponent
    from .events.relay import OutboxRelay

    return RelayComponent(OutboxRelay(database, settings.events, per_cluster=settings.clusters.leader_elect))


async def _run_components(supervisor: Supervisor, stopping: asyncio.Event, progress_interval: float) -> int:
    supervisor.start()
    progress = asyncio.create_task(report_initial_sync([supervisor], progress_interval), name="initial sync")
    try:
        await supervisor.run(stopping)
    except GaveUp as error:
        log.error("%s; exiting with code %d", error, EXIT_FAILED)
        return EXIT_FAILED
    finally:
        progress.cancel()
    log.info("stopped cleanly")
    return EXIT_OK
