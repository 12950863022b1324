"""Model policies (provisioning/): plugins' handlers, run after a row's transaction commits.

    row saved (policed < updated) ──► PolicyRunner ──► policy.handle_create / handle_update(session, row)
    row deleted (tombstone)       ──┘                 └► policy.handle_delete(session, tombstone)
        in one transaction with: policed, policy_code 1, policy_status "OK"
        on error: policy_code 2, policy_status = the error; the row retried with backoff

A policy may create or change other rows, for example a
KubernetesServiceInstance and its ConfigMap on behalf of a service; the sync
loop then makes them real. This is the original XOS model-policy contract
(``handle_create``/``handle_update``/``handle_delete``, ``policed``,
``policy_status``/``policy_code``) run by kuberaven itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from .. import metrics
from ..component_status import ComponentStatus
from ..kube.backoff import RetrySchedule
from ..model.base import STATUS_OK, Model, SyncCode, table_of, utcnow
from ..model.checks import check_row
from ..model.database import Database
from ..model.journal import SyncTombstone

log = logging.getLogger(__name__)


class ModelPolicy:
    """Subclass, set ``model``, override the handlers a service needs."""

    model: ClassVar[type[Model]]

    def handle_create(self, session: Session, row: Any) -> None:
        self.handle_update(session, row)

    def handle_update(self, session: Session, row: Any) -> None:
        """Called when a row is created (unless handle_create is overridden) or changed."""

    def handle_delete(self, session: Session, tombstone: SyncTombstone) -> None:
        """Called after a row was deleted; the tombstone has its id, name and namespace."""


def put(session: Session, row: Model) -> Model:
    """Validate and store a row from a policy, marked changed so the sync loop applies it."""
    session.add(row)
    with session.no_autoflush:
        check_row(session, row)
    row.updated = utcnow()  # type: ignore[attr-defined]
    session.flush()
    return row


@dataclass
class PolicyOptions:
    poll_interval: float = 0.5
    backoff_initial: float = 1.0
    backoff_max: float = 600.0


class PolicyRunner:
    """Runs the registered policies for rows that changed since they were last policed."""

    def __init__(self, database: Database, policies: Sequence[ModelPolicy], options: PolicyOptions | None = None):
        self.database = database
        self.policies = {p.model.__name__: p for p in policies}
        self.options = options or PolicyOptions()
        self._retries = RetrySchedule(self.options.backoff_initial, self.options.backoff_max)
        self._stopping = asyncio.Event()
        self._passes = 0

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                await asyncio.to_thread(self.run_once)
            except Exception as error:  # the database is down: try again at the next poll
                log.error("policy pass failed: %s", error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=self.options.poll_interval)

    def stop(self) -> None:
        self._stopping.set()

    def ready(self) -> bool:
        return self._passes > 0

    def status(self) -> list[ComponentStatus]:
        return [
            ComponentStatus(policies=tuple(sorted(self.policies)), passes=self._passes, backing_off=len(self._retries))
        ]

    def run_once(self) -> int:
        """One pass over every policed model; the number of handler calls that succeeded."""
        done = 0
        for name, policy in self.policies.items():
            for row_id, updated in self._pending(policy.model):
                done += self._police(name, policy, row_id, updated)
            done += self._deletes(name, policy)
        self._passes += 1
        return done

    def _pending(self, model: type[Any]) -> list[tuple[int, Any]]:
        needs = sa.or_(model.policed.is_(None), model.updated > model.policed)
        query = sa.select(model.id, model.updated).where(needs, model.no_policy.is_(False)).order_by(model.id)
        with self.database.session() as session:
            rows = session.execute(query).all()
        now = time.monotonic()
        return [r for r in rows if not self._retries.backing_off((model.__name__, r[0]), r[1], now)]

    def _police(self, name: str, policy: ModelPolicy, row_id: int, updated: Any) -> int:
        model = policy.model
        key = (name, row_id)
        try:
            with self.database.session() as session:
                row = session.get(model, row_id)
                if row is None:
                    return 0
                if row.policed is None:  # type: ignore[attr-defined]  # every model mixes in Bookkeeping
                    policy.handle_create(session, row)
                else:
                    policy.handle_update(session, row)
                table = table_of(model)
                session.execute(
                    table.update()
                    .where(table.c.id == row_id)
                    .values(policed=updated, policy_code=SyncCode.OK, policy_status=STATUS_OK)
                )
        except Exception as error:
            self._failed(key, updated, error)
            with self.database.session() as session:
                table = table_of(model)
                message = f"{type(error).__name__}: {error}"
                failed = table.update().where(table.c.id == row_id)
                session.execute(failed.values(policy_code=SyncCode.ERROR, policy_status=message))
            return 0
        self._retries.succeeded(key)
        metrics.POLICY_RUNS.labels(name, "ok").inc()
        return 1

    def _deletes(self, name: str, policy: ModelPolicy) -> int:
        with self.database.session() as session:
            ids = session.scalars(sa.select(SyncTombstone.id).where(SyncTombstone.model == name)).all()
        done = 0
        now = time.monotonic()
        for tombstone_id in ids:
            key = ("SyncTombstone", tombstone_id)
            if self._retries.backing_off(key, None, now):
                continue
            try:
                with self.database.session() as session:
                    tombstone = session.get(SyncTombstone, tombstone_id)
                    if tombstone is None:
                        continue
                    policy.handle_delete(session, tombstone)
                    session.delete(tombstone)
            except Exception as error:
                self._failed(key, None, error)
                continue
            self._retries.succeeded(key)
            done += 1
        return done

    def _failed(self, key: tuple[str, int], updated: Any, error: Exception) -> None:
        log.warning("policy for %s %s failed: %s", key[0], key[1], error)
        metrics.POLICY_RUNS.labels(key[0], "error").inc()
        self._retries.failed(key, updated)
