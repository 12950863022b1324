"""The ``kuberaven run`` process: every loop on one asyncio loop (top of the flow).

    settings ─► KubeClient ─► [leader election] ─► Engine(watchers) ─► translate()
                                   └─► /healthz /readyz /metrics

SIGINT/SIGTERM stop the watches, give in-flight handlers
``shutdown_timeout`` seconds, release the lease and return 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Iterable

from .kube.client import KubeClient
from .raven.engine import Engine, EngineOptions
from .raven.health import health_server
from .raven.leader import LeaderElector, LeadershipLost
from .raven.watcher import Watcher
from .settings import Settings

log = logging.getLogger(__name__)


async def run_daemon(settings: Settings, watchers: Iterable[Watcher]) -> int:
    """Run until a signal; returns the process exit code."""
    client = KubeClient.from_kubeconfig(settings.kubeconfig, settings.context)
    engine = Engine(
        client,
        list(watchers),
        options=EngineOptions(concurrency=settings.concurrency, shutdown_timeout=settings.shutdown_timeout),
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)

    server = health_server(settings.listen, lambda: engine)
    server_task = asyncio.create_task(server.serve(), name="health")
    elector = None
    if settings.leader_elect:
        identity = f"{socket.gethostname()}-{os.getpid()}"
        elector = LeaderElector(client, settings.lease_namespace, settings.lease_name, identity)
    code = 0
    try:
        code = await _run_engine(engine, elector, stopping)
    finally:
        if elector is not None:
            await elector.release()
        server.should_exit = True
        await server_task
        await client.close()
    return code


async def _run_engine(engine: Engine, elector: LeaderElector | None, stopping: asyncio.Event) -> int:
    if elector is not None:
        log.info("waiting for leadership of lease %s/%s", elector.namespace, elector.name)
        acquiring = asyncio.create_task(elector.acquire())
        stop_wait = asyncio.create_task(stopping.wait())
        await asyncio.wait({acquiring, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        if stopping.is_set():
            acquiring.cancel()
            return 0
        stop_wait.cancel()
    engine_task = asyncio.create_task(engine.run(), name="engine")
    waiters = {engine_task, asyncio.create_task(stopping.wait())}
    holding = asyncio.create_task(elector.hold()) if elector else None
    if holding is not None:
        waiters.add(holding)
    done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    engine.stop()
    await engine_task
    if holding is not None:
        holding.cancel()
        if holding in done and isinstance(holding.exception(), LeadershipLost):
            log.error("lost leadership; exiting so that a standby takes over")
            return 1
    for task in waiters:
        task.cancel()
    log.info("stopped cleanly")
    return 0
