"""One cluster's translation runtime (network/): what its translator, reconcilers and ports' status share, made
once per cluster, as controller-runtime's Manager is.

    NetworkTranslator (translator.py) ──► TranslationRuntime
        the cluster's client and informers (the daemon's, shared with the inventory; or its own)
        one TranslationStore (state.py): the translation rows
        one OffLoop (kube/loops.py): the threads every blocking backend and database call runs in
        one EventRecorder (kube/event_recorder.py): the Events of pods and Services
        one PortReports (port_reports.py) and the pods reconciler's queue (an Enqueue handle, watch/reconciler.py)
    ──► TranslationContext (reconcilers/context.py): the reconcilers' view of it
    ──► PortActivation (activation.py): the same store, threads and reports

Each runnable of the cluster's translation runs inside ``running()``. When
the last one ends (the cluster stops, or the only one crashed), the Events
recorded are flushed, the backend closed and the threads ended; a run after
that (the supervisor's) gets new threads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from ..kube.client import KubeClient
from ..kube.event_recorder import EventRecorder
from ..kube.loops import OffLoop
from ..model.database import Database
from ..watch.informers import InformerFactory
from ..watch.reconciler import Enqueue
from .backend import NetworkOptions
from .drivers import NetworkBackend
from .drivers.networks import Infrastructure
from .port_reports import PortReports
from .reconcilers.context import TranslationContext
from .state import TranslationStore

THREADS = "network"  # the prefix of the threads' names
EVENTS_FLUSH = 5.0  # seconds the Events recorded before the stop have to reach the API server


class TranslationRuntime:
    """One cluster's translation runtime: its client, informers, store, threads, Event recorder and reports."""

    def __init__(
        self,
        client: KubeClient,
        database: Database,
        cluster: str,
        backend: NetworkBackend,
        *,
        workers: int,
        informers: InformerFactory | None = None,
    ) -> None:
        """``workers``: the threads for blocking calls (the translation's concurrency). ``informers``: the
        cluster's shared informers (the daemon's); without, the runtime has its own, run by the translator."""
        self.client = client
        self.cluster = cluster
        self.backend = backend
        self.owns_informers = informers is None
        self.informers = informers or InformerFactory(client, cluster)
        self.store = TranslationStore(database, cluster, backend)
        self.blocking = OffLoop(workers, THREADS)
        self.events = EventRecorder(client)
        self.pod_queue = Enqueue()  # a pod's namespace/name into the pods reconciler's queue
        self.reports = PortReports(self.pod_queue)
        self._running = 0  # runnables inside running()

    def context(self, options: NetworkOptions, infrastructure: Callable[[], Infrastructure]) -> TranslationContext:
        """The reconcilers' view of the runtime, with the translation's options and its shared infrastructure."""
        return TranslationContext(
            self.client,
            self.store,
            self.backend,
            options,
            self.cluster,
            self.blocking,
            infrastructure,
            self.pod_queue,
            self.events,
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """A runnable's run: when the last one ends, the Events are flushed and the backend and threads closed."""
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            if not self._running:
                await self._close()

    async def _close(self) -> None:
        """The Events recorded before the stop, sent while the API server answers (at most EVENTS_FLUSH s); then
        the backend's connections and the threads."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.events.flush(), EVENTS_FLUSH)
        try:
            await self.blocking(self.backend.close)
        finally:
            self.blocking.close()
