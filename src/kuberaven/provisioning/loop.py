"""The sync loop (provisioning/): dirty rows → Kubernetes objects, one cluster per loop.

    change noticed (PostgreSQL NOTIFY, or a cheap poll; a periodic full pass)
        ──► tombstones: objects of deleted managed rows are deleted
        ──► for each Step in dependency order:
                rows (worker thread) ──► waiting | due | backing off
                due rows applied concurrently (asyncio) ──► results stored in one transaction

Success stores enacted (= the ``updated`` that was applied, so a change made
meanwhile stays dirty), backend_status "OK", backend_code 1, backend_handle
namespace/name/uid. Failure stores backend_code 2 and the Kubernetes message,
and the row is retried after a per-row exponential backoff (1 s doubling to
10 min) unless it changes again. The full pass re-applies every managed row,
which puts back what was changed in Kubernetes by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .. import metrics
from ..component_status import ComponentStatus
from ..kube.backoff import Backoff, RetrySchedule
from ..kube.client import KubeClient
from ..kube.errors import ApiError
from ..kube.event_recorder import (
    NORMAL,
    REASON_DELETED,
    REASON_FAILED,
    REASON_PROVISIONED,
    REASON_UPDATED,
    WARNING,
    EventRecorder,
    InvolvedObject,
)
from ..model.base import STATUS_OK, SyncCode, table_of
from ..model.cluster import Image, KubernetesService, Service, ServicePort, Site, Slice
from ..model.database import Database
from ..model.journal import SyncTombstone
from ..model.tables import MODELS_BY_NAME
from ..model.tombstones import PARENTS, SYNCED
from ..watch.engine import EngineOptions
from .notify import ChangeListener
from .objects import ConfigMapStep, NamespaceStep, SecretStep, ServiceAccountStep, ServiceStep
from .pods import PodStep
from .resources import ResourceInstanceStep
from .steps import Applied, Context, Step, SyncError, Work, dirty, step_by_model

log = logging.getLogger(__name__)


def default_steps() -> list[Step]:
    """In dependency order."""
    return [
        NamespaceStep(),
        ServiceAccountStep(),
        ConfigMapStep(),
        SecretStep(),
        PodStep(),
        ServiceStep(),
        ResourceInstanceStep(),
    ]


@dataclass
class SyncOptions:
    sync_poll: float = 0.5  # how often the database is asked for dirty rows without NOTIFY
    notify_fallback: float = 5.0  # with NOTIFY: a poll all the same, in case one was missed
    resync_period: float = 120.0  # a full pass: every managed row applied again
    concurrency: int = EngineOptions.concurrency  # the one setting for every queue's handlers in flight
    backoff_initial: float = 1.0
    backoff_max: float = 600.0


@dataclass
class PassResult:
    applied: int = 0
    failed: int = 0
    waiting: int = 0
    deleted: int = 0


class SyncLoop:
    """Keeps one cluster in step with the managed rows of the model."""

    def __init__(
        self,
        client: KubeClient,
        database: Database,
        cluster: str,
        options: SyncOptions | None = None,
        steps: Sequence[Step] | None = None,
    ) -> None:
        self.client = client
        self.database = database
        self.cluster = cluster
        self.options = options or SyncOptions()
        self.steps = list(steps) if steps is not None else default_steps()
        self._by_model = step_by_model(self.steps)
        self._retries = RetrySchedule(self.options.backoff_initial, self.options.backoff_max)
        self._statuses: dict[tuple[str, int], str] = {}  # waiting texts written, not to write them again
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._ctx: Context | None = None
        self._listener = ChangeListener(database, self._wake.set) if not database.is_sqlite else None
        self._passes = 0
        self.events = EventRecorder(client)  # what `kubectl describe` shows of what this loop did

    # --- Component --------------------------------------------------------

    async def run(self) -> None:
        cluster_id = await asyncio.to_thread(self._cluster_id)
        self._ctx = Context(self.client, cluster_id)
        if self._listener is not None:  # a new one per run: stop() ends a listener for good
            self._listener = ChangeListener(self.database, self._wake.set)
        listening = asyncio.create_task(self._listener.run()) if self._listener else None
        # Commits made in this process wake the loop at once; the poll remains for other processes.
        loop = asyncio.get_running_loop()

        def wake() -> None:  # called in the committing thread
            loop.call_soon_threadsafe(self._wake.set)

        forget = self.database.on_change(wake)
        last_full = -float("inf")
        failures = Backoff(self.options.backoff_initial, 30.0)
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                full = time.monotonic() - last_full >= self.options.resync_period
                try:
                    await self.sync_once(full=full)
                    failures.reset()
                except Exception as error:  # the database or the API server is down: try again later
                    delay = failures.next()
                    log.error(
                        "sync pass failed (%s: %s); retrying in %.1fs",
                        type(error).__name__,
                        error,
                        delay,
                        exc_info=error,
                    )
                    await self._sleep(delay)
                    continue
                if full:
                    last_full = time.monotonic()
                await self._sleep(self._idle_time(last_full))
        finally:
            forget()
            if listening is not None:
                self._listener.stop()  # type: ignore[union-attr]
                await asyncio.gather(listening, return_exceptions=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.events.flush(), 5)  # the last pass's events, if the API answers

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def ready(self) -> bool:
        return self._passes > 0

    def status(self) -> list[ComponentStatus]:
        return [
            ComponentStatus(
                sync=self.cluster,
                passes=self._passes,
                backing_off=len(self._retries),
                listening=bool(self._listener and self._listener.listening),
            )
        ]

    def wake(self) -> None:
        """Look for dirty rows now (the Python API and tests call this; NOTIFY does on PostgreSQL)."""
        self._wake.set()

    def _idle_time(self, last_full: float) -> float:
        poll = self.options.sync_poll if self._listener is None else self.options.notify_fallback
        until_full = last_full + self.options.resync_period - time.monotonic()
        next_retry = self._retries.next_due()
        until_retry = poll if next_retry is None else next_retry - time.monotonic()
        return max(0.0, min(poll, until_full, until_retry))

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    def _cluster_id(self) -> int:
        with self.database.session() as session:
            found = session.scalar(sa.select(KubernetesService.id).where(KubernetesService.name == self.cluster))
        if found is None:
            raise LookupError(f"KubernetesService {self.cluster!r} does not exist")
        return found

    # --- one pass ----------------------------------------------------------

    async def sync_once(self, full: bool = False) -> PassResult:
        """Delete what deleted rows left, then apply every dirty (or, when ``full``, every) managed row."""
        if self._ctx is None:
            self._ctx = Context(self.client, await asyncio.to_thread(self._cluster_id))
        result = PassResult()
        await self._delete_tombstones(result)
        await asyncio.to_thread(self._enact_rows_without_objects)
        for step in self.steps:
            works = await asyncio.to_thread(self._load, step, full)
            await self._apply_step(step, works, result)
        self._passes += 1
        return result

    def _load(self, step: Step, full: bool) -> list[Work]:
        assert self._ctx is not None
        with self.database.session() as session:
            return step.load(session, self._ctx.cluster_id, full)

    async def _apply_step(self, step: Step, works: list[Work], result: PassResult) -> None:
        now = time.monotonic()
        due, waiting = [], []
        for work in works:
            if work.waiting is not None:
                waiting.append(work)
                continue
            if not self._retries.backing_off(work.key, work.token, now):
                due.append(work)
        result.waiting += len(waiting)
        limit = asyncio.Semaphore(self.options.concurrency)

        async def apply(work: Work) -> Applied | BaseException:
            async with limit:
                started = time.perf_counter()
                try:
                    return await step.apply(self._ctx, work)  # type: ignore[arg-type]
                except (ApiError, SyncError) as error:
                    return error
                finally:
                    metrics.SYNC_APPLY_SECONDS.labels(step.model.__name__).observe(time.perf_counter() - started)

        outcomes = await asyncio.gather(*(apply(w) for w in due))
        for work, outcome in zip(due, outcomes, strict=True):
            if isinstance(outcome, Applied):
                self._retries.succeeded(work.key)
                result.applied += 1
            else:
                self._retries.failed(work.key, work.token)
                result.failed += 1
                log.warning("%s %s: %s", work.model, work.name, outcome)
            self._record_event(work, outcome)
        waiting = [w for w in waiting if self._statuses.get(w.key) != w.waiting]
        if due or waiting:
            await asyncio.to_thread(self._record, step, list(zip(due, outcomes, strict=True)), waiting)
        for work in waiting:
            self._statuses[work.key] = work.waiting  # type: ignore[assignment]

    def _record_event(self, work: Work, outcome: Applied | BaseException) -> None:
        """A Kubernetes Event on the object: provisioned or updated (only when the row changed), or why not."""
        if work.manifest is None or "kind" not in work.manifest:  # raw YAML rows: objects of their own
            return
        meta = work.manifest["metadata"]
        uid = outcome.uid if isinstance(outcome, Applied) else work.uid
        involved = InvolvedObject(
            work.manifest["apiVersion"], work.manifest["kind"], meta.get("namespace"), meta["name"], uid
        )
        if not isinstance(outcome, Applied):
            self.events.record(involved, WARNING, REASON_FAILED, f"{work.model} {work.name}: {outcome}")
        elif work.dirty:
            reason = REASON_PROVISIONED if work.new else REASON_UPDATED
            self.events.record(involved, NORMAL, reason, f"{work.model} {work.name} applied by kuberaven")

    def _record(self, step: Step, outcomes: list[tuple[Work, Any]], waiting: list[Work]) -> None:
        table = table_of(step.model)
        with self.database.engine.begin() as db:
            for work, outcome in outcomes:
                self._statuses.pop(work.key, None)
                row = table.update().where(table.c.id == work.row_id)
                if isinstance(outcome, Applied):
                    db.execute(
                        row.values(
                            enacted=work.updated,
                            backend_code=SyncCode.OK,
                            backend_status=STATUS_OK,
                            backend_handle=outcome.handle,
                            **outcome.values,
                        )
                    )
                    for part_table, part_id, part_updated in work.parts:
                        db.execute(
                            part_table.update()
                            .where(part_table.c.id == part_id)
                            .values(enacted=part_updated, backend_code=SyncCode.OK, backend_status=STATUS_OK)
                        )
                else:
                    values = outcome.values if isinstance(outcome, SyncError) else {}
                    db.execute(row.values(backend_code=SyncCode.ERROR, backend_status=str(outcome), **values))
            for work in waiting:
                waiting_row = table.update().where(table.c.id == work.row_id)
                db.execute(waiting_row.values(backend_code=SyncCode.NEW, backend_status=work.waiting))

    def _enact_rows_without_objects(self) -> None:
        """Sites, slices, images and services with no namespace have no Kubernetes object: in step once saved."""
        no_namespace = sa.select(Service.id).where(Service.trust_domain_id.is_(None))
        targets = [
            (Site, []),
            (Slice, []),
            (Image, []),
            (Service, [Service.trust_domain_id.is_(None)]),
            (ServicePort, [ServicePort.service_id.in_(no_namespace)]),
        ]
        with self.database.engine.begin() as db:
            for model, criteria in targets:
                table = table_of(model)
                where = [table.c.xos_managed.is_(True), dirty(model), *criteria]
                # Look first: an UPDATE would take SQLite's write lock every poll even when it changes nothing.
                if db.execute(sa.select(table.c.id).where(*where).limit(1)).first() is not None:
                    db.execute(
                        table.update()
                        .where(*where)
                        .values(enacted=table.c.updated, backend_code=SyncCode.OK, backend_status=STATUS_OK)
                    )

    # --- deletes -------------------------------------------------------------

    async def _delete_tombstones(self, result: PassResult) -> None:
        tombstones = await asyncio.to_thread(self._load_tombstones)
        now = time.monotonic()
        done: list[int] = []
        for tombstone in tombstones:
            key = ("SyncTombstone", tombstone.id)
            if self._retries.backing_off(key, None, now):
                continue
            if tombstone.parent_id is not None:
                done.append(tombstone.id)  # handled in _remove_tombstones: the parent is applied again
                continue
            step = self._by_model.get(tombstone.model)
            try:
                if step is not None:
                    await step.delete(self._ctx, tombstone)  # type: ignore[arg-type]
            except ApiError as error:
                log.warning("deleting the object of %s %s: %s", tombstone.model, tombstone.name, error)
                self._retries.failed(key, None)
                continue
            self._retries.succeeded(key)
            done.append(tombstone.id)
            result.deleted += 1
            if step is not None and tombstone.name is not None:
                resource = step.resource
                involved = InvolvedObject(resource.api_version, resource.kind, tombstone.namespace, tombstone.name)
                self.events.record(involved, NORMAL, REASON_DELETED, f"{tombstone.model} {tombstone.name} deleted")
        if done:
            await asyncio.to_thread(self._remove_tombstones, [t for t in tombstones if t.id in set(done)])

    def _load_tombstones(self) -> list[SyncTombstone]:
        assert self._ctx is not None
        table = SyncTombstone
        with self.database.session() as session:
            return list(
                session.scalars(
                    sa.select(table)
                    .where(
                        sa.or_(
                            sa.and_(table.cluster_id == self._ctx.cluster_id, table.model.in_(SYNCED)),
                            table.parent_id.is_not(None),
                        )
                    )
                    .order_by(table.id)
                )
            )

    def _remove_tombstones(self, tombstones: list[SyncTombstone]) -> None:
        with self.database.engine.begin() as db:
            for tombstone in tombstones:
                if tombstone.parent_id is not None:
                    parent = _parent_table(tombstone.model)
                    db.execute(parent.update().where(parent.c.id == tombstone.parent_id).values(enacted=None))
            table = table_of(SyncTombstone)
            db.execute(table.delete().where(table.c.id.in_([t.id for t in tombstones])))


def _parent_table(model: str) -> sa.Table:
    """The table of the row a mount or a port is part of."""
    part = table_of(MODELS_BY_NAME[model])
    return next(iter(part.c[PARENTS[part.name]].foreign_keys)).column.table
