"""The ``kuberaven run`` process: every loop on one asyncio loop (top of the flow).

    settings ─► Database (upgrade + bootstrap)
             ─► KubeClient per cluster ─► [leader election] ─► InformerFactory (raven/): one list+watch per
                                                               resource, shared by the loops below
                                                             ─► Inventory (pull/) ─► rows + outbox
                                                             ─► SyncLoop (sync/): managed rows ─► objects
             ─► PolicyRunner (sync/policies.py): plugins' model policies ─► more rows
             ─► NetworkTranslator per cluster (network/): objects ─► networks, ports, load balancers
                                                             ─► Engine(watchers) for other loops
             ─► OutboxRelay (events/, own thread) ─► Kafka     (only with --kafka)
             ─► web/ (one HTTP server): REST API, UI, /healthz /readyz /metrics
    every one of them a component of one Supervisor (raven/supervisor.py): restarted with
    backoff when it crashes; one that crashes too often ends the process with exit code 1

Each KubernetesService row is one cluster: "kubernetes" uses the configured
kubeconfig/context, others their own (rows with none are skipped). SIGINT
or SIGTERM stop the watches, commit the batch in hand, flush the relay,
release the lease and return 0. Losing the lease returns 1.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import sqlalchemy as sa
from lightkube.core.exceptions import ConfigError as KubeConfigError

from .events.log import trim_sent
from .kube.client import KubeClient
from .kube.errors import ApiError
from .model.bootstrap import DEFAULT_CLUSTER
from .model.cluster import KubernetesService
from .model.database import Database
from .model.errors import ModelError
from .network.backend import NetworkOptions
from .network.backends import make_backend
from .network.translator import NetworkTranslator
from .plugins import PluginError, import_watchers, load_plugins, plugin_watchers, policies
from .pull.inventory import Inventory, InventoryOptions
from .raven.engine import Engine, EngineOptions
from .raven.health import Component, report_initial_sync
from .raven.informers import InformerFactory
from .raven.leader import LeaderElector, LeadershipLost
from .raven.positions import DatabasePositionStore
from .raven.supervisor import GaveUp, Supervisor, SupervisorOptions
from .raven.watcher import Watcher
from .settings import Settings
from .sync.loop import SyncLoop, SyncOptions
from .sync.policies import PolicyRunner
from .web.app import WebServer, create_app
from .web.guards import Policy

if TYPE_CHECKING:
    from .events.component import RelayComponent

log = logging.getLogger(__name__)
WATCHERS_POSITIONS_PREFIX = "watchers:"  # watch_position targets of the watchers operators register
REACH_TIMEOUT = 15.0
EXIT_OK = 0
EXIT_FAILED = 1  # a component crashed too often, or the leader lease was lost: the Deployment restarts us


class StartupError(Exception):
    """kuberaven cannot start: the message names what is unreachable or misconfigured."""


async def _prepare(database: Database, settings: Settings) -> dict[str, KubeClient]:
    """The database at the newest schema and a client per cluster that answers, or StartupError."""
    try:
        await asyncio.to_thread(database.prepare, settings.kubeconfig, settings.context)
    except (sa.exc.OperationalError, ModelError) as error:
        reason = getattr(error, "orig", None) or error
        raise StartupError(f"database {database.url.render_as_string()}: {reason}") from None
    log.info("database %s ready", database.url.render_as_string())
    try:
        clients = await asyncio.to_thread(_cluster_clients, database, settings)
    except KubeConfigError as error:
        raise StartupError(f"kubeconfig: {error}") from None
    for cluster, client in clients.items():
        await _reach(cluster, client)
    return clients


async def _reach(cluster: str, client: KubeClient) -> None:
    """Fail at start (the supervisor restarts us) rather than wait silently for a server that is not there."""
    deadline = asyncio.get_running_loop().time() + REACH_TIMEOUT
    while True:
        try:
            await client.request("GET", "/version", timeout=5)
            return
        except (httpx.HTTPError, ApiError) as error:
            if asyncio.get_running_loop().time() > deadline:
                server = client.http.base_url
                raise StartupError(f"cluster {cluster!r}: cannot reach the API server at {server}: {error}") from None
            await asyncio.sleep(1)


async def run_daemon(settings: Settings, watchers: Iterable[Watcher] = ()) -> int:
    """Run until a signal; returns the process exit code. StartupError when it cannot start."""
    load_plugins()
    watchers = [*watchers, *plugin_watchers(), *_setting_watchers(settings)]
    try:
        database = Database(settings.db)
    except ModelError as error:
        raise StartupError(str(error)) from None
    try:
        clients = await _prepare(database, settings)
    except StartupError:
        database.dispose()
        raise
    relay = _relay(database, settings)
    informers = {cluster: InformerFactory(client, cluster) for cluster, client in clients.items()}
    components: list[Component] = [
        Inventory(client, database, cluster, _inventory_options(settings), on_commit=relay.wake if relay else None,
                  informers=informers[cluster])
        for cluster, client in clients.items()
    ]  # fmt: skip
    if settings.sync:
        options = _sync_options(settings)
        components += [SyncLoop(client, database, cluster, options) for cluster, client in clients.items()]
        model_policies = policies()
        if model_policies:
            components.append(PolicyRunner(database, model_policies))
    if settings.network:
        components += _network_translators(database, clients, informers, settings)
    if watchers:
        engine_options = EngineOptions(concurrency=settings.concurrency, shutdown_timeout=settings.shutdown_timeout)
        # Their positions are stored too: without, a restart would list every watched resource again.
        positions = DatabasePositionStore(database, DEFAULT_CLUSTER, WATCHERS_POSITIONS_PREFIX)
        components.append(
            Engine(clients[DEFAULT_CLUSTER], watchers, options=engine_options, informers=informers[DEFAULT_CLUSTER],
                   positions=positions)
        )  # fmt: skip
    # Every consumer has declared what it watches: the informers start once each has joined.
    components += informers.values()
    if relay is not None:
        components.append(relay)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)

    policy = Policy.for_listener(settings.listen, settings.token, settings.allowed_hosts)
    app = create_app(database, lambda: _readiness(supervisor, database), settings.token, policy)
    web = WebServer(settings.listen, app)
    supervisor = Supervisor([web, *components], _supervisor_options(settings))
    elector = None
    if settings.leader_elect:
        identity = f"{socket.gethostname()}-{os.getpid()}"
        elector = LeaderElector(clients[DEFAULT_CLUSTER], settings.lease_namespace, settings.lease_name, identity)
    try:
        if relay is None:
            # No Kafka: the outbox is the event log, trimmed by age.
            await asyncio.to_thread(trim_sent, database, settings.outbox_retention, sent_only=False)
        return await _run_components(supervisor, web, elector, stopping, settings.progress_interval)
    finally:
        if elector is not None:
            await elector.release()
        for client in clients.values():
            await client.close()
        database.dispose()


def _setting_watchers(settings: Settings) -> list[Watcher]:
    try:
        return import_watchers(settings.watchers)
    except PluginError as error:
        raise StartupError(str(error)) from None


def _readiness(supervisor: Supervisor, database: Database) -> tuple[bool, dict[str, Any]]:
    """The supervisor's view, and the database: a full disk makes every write fail."""
    ready, body = supervisor.readiness()
    problem = database.write_problem()
    body["database"] = {"ok": problem is None, "error": problem}
    ready = ready and problem is None
    return ready, {**body, "ready": ready}


def _cluster_clients(database: Database, settings: Settings) -> dict[str, KubeClient]:
    with database.session() as session:
        clusters = session.scalars(sa.select(KubernetesService).order_by(KubernetesService.id)).all()
    clients = {}
    for cluster in clusters:
        if cluster.name == DEFAULT_CLUSTER:
            clients[cluster.name] = KubeClient.from_kubeconfig(settings.kubeconfig, settings.context)
        elif cluster.kubeconfig:
            clients[cluster.name] = KubeClient.from_kubeconfig(cluster.kubeconfig, cluster.context)
        else:
            log.warning("KubernetesService %r has no kubeconfig; not watching it", cluster.name)
    return clients


def _network_translators(
    database: Database, clients: dict[str, KubeClient], informers: dict[str, InformerFactory], settings: Settings
) -> list[NetworkTranslator]:
    options = NetworkOptions(
        subnet_mode=settings.network_subnet_mode,
        pod_cidr=settings.network_pod_cidr,
        namespace_pool=settings.network_namespace_pool,
        namespace_prefix=settings.network_namespace_prefix,
        service_cidr=settings.network_service_cidr,
        external_cidr=settings.network_external_cidr,
        external_network=settings.network_external_network,
        include_system_namespaces=settings.network_include_system_namespaces,
        cni=settings.network_cni,
        policies=settings.network_policies,
    )
    log.info("network translation with the %s backend", settings.network_backend)
    return [
        NetworkTranslator(
            client,
            database,
            cluster,
            make_backend(settings.network_backend, database, settings.network_cloud),
            options,
            concurrency=settings.concurrency,
            informers=informers[cluster],
        )
        for cluster, client in clients.items()
    ]


def _inventory_options(settings: Settings) -> InventoryOptions:
    return InventoryOptions(
        batch_size=settings.batch_size, batch_window=settings.batch_window, secrets=settings.inventory_secrets
    )


def _sync_options(settings: Settings) -> SyncOptions:
    return SyncOptions(
        poll_interval=settings.sync_poll, resync_period=settings.resync_period, concurrency=settings.concurrency
    )


def _relay(database: Database, settings: Settings) -> RelayComponent | None:
    """The Kafka relay, only with --kafka (confluent-kafka is loaded only then)."""
    if settings.kafka is None:
        return None
    from .events.component import RelayComponent
    from .events.relay import OutboxRelay, RelayOptions

    options = RelayOptions(
        bootstrap=settings.kafka,
        topic=settings.topic,
        partitions=settings.kafka_partitions,
        replication_factor=settings.kafka_replication_factor,
        key=settings.event_key,
        retention=settings.outbox_retention,
    )
    return RelayComponent(OutboxRelay(database, options), settings.kafka_unreachable_after)


def _supervisor_options(settings: Settings) -> SupervisorOptions:
    return SupervisorOptions(
        backoff_initial=settings.supervisor_backoff_initial,
        backoff_max=settings.supervisor_backoff_max,
        healthy_after=settings.supervisor_healthy_after,
        max_crashes=settings.supervisor_max_crashes,
        crash_window=settings.supervisor_crash_window,
    )


async def _run_components(
    supervisor: Supervisor,
    web: WebServer,
    elector: LeaderElector | None,
    stopping: asyncio.Event,
    progress_interval: float,
) -> int:
    supervisor.start(lambda component: component is web)  # probes answer while a standby waits
    holding = None
    try:
        if elector is not None:
            log.info("waiting for leadership of lease %s/%s", elector.namespace, elector.name)
            acquiring = asyncio.create_task(elector.acquire())
            stop_wait = asyncio.create_task(stopping.wait())
            await asyncio.wait({acquiring, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            if stopping.is_set():
                acquiring.cancel()
                await supervisor.run(stopping)
                return EXIT_OK
            holding = asyncio.create_task(elector.hold())
            holding.add_done_callback(lambda _: stopping.set())
        supervisor.start()
        progress = asyncio.create_task(report_initial_sync([supervisor], progress_interval), name="initial sync")
        try:
            await supervisor.run(stopping)
        except GaveUp as error:
            log.error("%s; exiting with code %d", error, EXIT_FAILED)
            return EXIT_FAILED
        finally:
            progress.cancel()
        if holding is not None and holding.done() and isinstance(holding.exception(), LeadershipLost):
            log.error("lost leadership; exiting so that a standby takes over")
            return EXIT_FAILED
        log.info("stopped cleanly")
        return EXIT_OK
    finally:
        if holding is not None:
            holding.cancel()
