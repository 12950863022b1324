"""Sync steps (sync/): which rows are dirty, what they wait for, and how each is applied.

    loop.py ──► Step.load() (worker thread: rows → Work, manifests built)
            ──► Step.apply() (asyncio: server-side apply, field manager "kuberaven")
            ──► loop.py records enacted / backend_status

Steps run in dependency order (STEPS): Namespace before ServiceAccount
before ConfigMap/Secret before Pod before Service, then the raw YAML of
KubernetesResourceInstances. A row is dirty when ``enacted`` is unset or
older than ``updated``; a pod is also dirty when one of its mounts is, a
Service when one of its ports is.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Session, selectinload

from ..kube.client import KubeClient
from ..kube.errors import ApiError, NotFound
from ..kube.resources import Discovery, Resource
from ..kube.serviceaccounts import wait_for_token
from ..model.base import Model
from ..model.documents import qualified_name
from ..model.tables import (
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesSecret,
    KubernetesSecretVolumeMount,
    KubernetesServiceInstance,
    Principal,
    Service,
    ServicePort,
    Slice,
    SyncTombstone,
    TrustDomain,
)
from . import manifests

log = logging.getLogger(__name__)

# Never deleted by kuberaven, whoever asks.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "default"})
POD_REPLACE_TIMEOUT = 60.0


class SyncError(Exception):
    """A row could not be applied; the message goes to backend_status as it is.

    ``values`` are stored on the row with the failure (what was applied before it).
    """

    def __init__(self, message: str, values: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.values = values or {}


@dataclass
class Work:
    """One row to apply, read in a worker thread; all the asyncio side needs."""

    model: str
    row_id: int
    name: str
    updated: dt.datetime  # enacted is set to this: a change made meanwhile stays dirty
    manifest: dict[str, Any] | None = None
    uid: str | None = None
    adopt: bool = False
    waiting: str | None = None  # a dependency is not in Kubernetes yet: why
    # Rows applied as part of this one (mounts, ports): (table, id, updated).
    parts: list[tuple[sa.Table, int, dt.datetime]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # step-specific (KubernetesResourceInstance)

    @classmethod
    def of(cls, row: Any) -> Work:
        return cls(type(row).__name__, row.id, row.name, row.updated, uid=row.uid, adopt=row.adopt)

    @property
    def key(self) -> tuple[str, int]:
        return (self.model, self.row_id)

    @property
    def reference(self) -> str:
        """The row as the annotation ``kuberaven.io/row`` names it."""
        return f"{self.model}/{self.row_id}"

    @property
    def token(self) -> tuple[Any, ...]:
        """The version of the row and its parts: a new one cancels a pending backoff."""
        return (self.updated, *sorted((t.name, i, u) for t, i, u in self.parts))


@dataclass
class Applied:
    """What a successful apply leaves on the row."""

    uid: str | None
    handle: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What steps share: the cluster's client, and the objects known to be kuberaven's."""

    client: KubeClient
    cluster_id: int
    verified: set[str] = field(default_factory=set)  # uids checked (or made) to be ours
    discovery: Discovery = field(init=False)  # apiVersion/kind → path, for KubernetesResourceInstance

    def __post_init__(self) -> None:
        self.discovery = Discovery(self.client)


def dirty(model: type[Model]) -> sa.ColumnElement[bool]:
    return sa.or_(model.enacted.is_(None), model.updated > model.enacted)  # type: ignore[attr-defined]


def managed(model: type[Model]) -> list[sa.ColumnElement[bool]]:
    return [model.xos_managed.is_(True), model.no_sync.is_(False)]  # type: ignore[attr-defined]


def waiting_for(row: Model | None) -> str | None:
    """Why a row depending on ``row`` must wait, or None when ``row`` is in Kubernetes (or not ours)."""
    if row is None or not row.xos_managed or row.enacted is not None:  # type: ignore[attr-defined]
        return None
    text = f"waiting for {type(row).__name__} {qualified_name(row)}"
    if row.backend_code == 2:  # type: ignore[attr-defined]
        text += f" ({row.backend_status})"  # type: ignore[attr-defined]
    return text


class Step:
    """Rows of one model ↔ one kind of Kubernetes object."""

    model: ClassVar[type[Model]]
    resource: ClassVar[Resource]

    def rows(self, session: Session, cluster_id: int, full: bool) -> Sequence[Any]:
        """The managed rows of the cluster to apply (all of them when ``full``)."""
        model = self.model
        query = sa.select(model).where(*managed(model)).where(*self.in_cluster(cluster_id))
        if not full:
            query = query.where(self.is_dirty())
        return session.scalars(query.options(*self.load_options()).order_by(model.id)).all()

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        td = TrustDomain
        return [self.model.trust_domain_id.in_(sa.select(td.id).where(td.owner_id == cluster_id))]  # type: ignore[attr-defined]

    def is_dirty(self) -> sa.ColumnElement[bool]:
        return dirty(self.model)

    def load_options(self) -> list[Any]:
        return [selectinload(self.model.trust_domain)]  # type: ignore[attr-defined]

    def load(self, session: Session, cluster_id: int, full: bool) -> list[Work]:
        return [self.work(session, row) for row in self.rows(session, cluster_id, full)]

    def work(self, session: Session, row: Any) -> Work:
        item = Work.of(row)
        item.waiting = self.waiting(row)
        if item.waiting is None:
            item.manifest = self.manifest(row)
        return item

    def waiting(self, row: Any) -> str | None:
        return waiting_for(row.trust_domain)

    def manifest(self, row: Any) -> dict[str, Any]:
        raise NotImplementedError

    # --- the Kubernetes side ----------------------------------------------

    async def apply(self, ctx: Context, work: Work) -> Applied:
        assert work.manifest is not None
        meta = work.manifest["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        path = self.resource.path(namespace, name)
        if work.uid is None or work.uid not in ctx.verified:
            await check_ownership(ctx.client, path, work.reference, work.adopt)
        try:
            obj = await ctx.client.apply(path, work.manifest)
        except ApiError as error:
            obj = await self.on_apply_error(ctx, work, path, error)
        uid = obj["metadata"]["uid"]
        ctx.verified.add(uid)
        handle = "/".join(p for p in (namespace, name, uid) if p)
        return Applied(uid, handle, self.recorded(obj))

    def recorded(self, obj: dict[str, Any]) -> dict[str, Any]:
        """What an applied object leaves in its row's observed columns."""
        return {"uid": obj["metadata"]["uid"], "resource_version": obj["metadata"]["resourceVersion"]}

    async def on_apply_error(self, ctx: Context, work: Work, path: str, error: ApiError) -> dict[str, Any]:
        raise error

    async def delete(self, ctx: Context, tombstone: SyncTombstone) -> None:
        """Delete the object a deleted row stood for, if it is still kuberaven's."""
        assert tombstone.name is not None
        await delete_object(ctx.client, self.resource, tombstone.namespace, tombstone.name)


def _object_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)


async def check_ownership(client: KubeClient, path: str, reference: str, adopt: bool) -> None:
    """An object of the same name that kuberaven did not make for the row ``reference`` is taken only on adopt."""
    try:
        existing = await client.request("GET", path)
    except NotFound:
        return
    if adopt or manifests.is_ours(existing, reference):
        return
    model = reference.partition("/")[0]
    raise SyncError(
        f"{existing.get('kind', 'object')} {_object_name(existing)} already exists and was not created by kuberaven "
        f"for this row; set adopt: true on the {model} to manage it"
    )


async def delete_object(client: KubeClient, resource: Resource, namespace: str | None, name: str) -> None:
    """Delete one object unless it is gone, a system namespace, or not made by kuberaven."""
    if resource.kind == "Namespace" and name in SYSTEM_NAMESPACES:
        log.warning("not deleting system namespace %s", name)
        return
    path = resource.path(namespace, name)
    try:
        existing = await client.request("GET", path)
        if not manifests.is_ours(existing):
            log.warning("not deleting %s %s: kuberaven did not create it", resource.kind, _object_name(existing))
            return
        uid = existing["metadata"]["uid"]
        await client.request("DELETE", path, body={"preconditions": {"uid": uid}, "propagationPolicy": "Background"})
    except NotFound:
        return


class NamespaceStep(Step):
    model = TrustDomain
    resource = Resource("", "v1", "Namespace", "namespaces", namespaced=False)

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        return [TrustDomain.owner_id == cluster_id]

    def load_options(self) -> list[Any]:
        return []

    def waiting(self, row: Any) -> str | None:
        return None

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.namespace(row)


class ServiceAccountStep(Step):
    model = Principal
    resource = Resource("", "v1", "ServiceAccount", "serviceaccounts", namespaced=True)

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.service_account(row)


class ConfigMapStep(Step):
    model = KubernetesConfigMap
    resource = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.config_map(row)


class SecretStep(Step):
    model = KubernetesSecret
    resource = Resource("", "v1", "Secret", "secrets", namespaced=True)

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.secret(row)


KSI = KubernetesServiceInstance
CONFIG_MOUNT = KubernetesConfigVolumeMount
SECRET_MOUNT = KubernetesSecretVolumeMount


class PodStep(Step):
    model = KSI
    resource = Resource("", "v1", "Pod", "pods", namespaced=True)

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        return [KSI.owner_id == cluster_id]

    def recorded(self, obj: dict[str, Any]) -> dict[str, Any]:
        # A pod's observed columns (uid, IPs, phase, ...) have one writer, the inventory: its
        # lifecycle decides from them what a pod's change announces (pull/lifecycle.py).
        return {}

    def is_dirty(self) -> sa.ColumnElement[bool]:
        mounts = [
            sa.select(m.id).where(m.service_instance_id == KSI.id, dirty(m)).exists()
            for m in (CONFIG_MOUNT, SECRET_MOUNT)
        ]
        return sa.or_(dirty(KSI), *mounts)

    def load_options(self) -> list[Any]:
        slice_ = selectinload(KSI.slice)
        return [
            selectinload(KSI.trust_domain),
            selectinload(KSI.image),
            slice_.selectinload(Slice.principal),
            slice_.selectinload(Slice.service),
        ]

    def load(self, session: Session, cluster_id: int, full: bool) -> list[Work]:
        rows = self.rows(session, cluster_id, full)
        ids = [row.id for row in rows]
        config = _by_instance(session, CONFIG_MOUNT, ids, CONFIG_MOUNT.config)
        secrets = _by_instance(session, SECRET_MOUNT, ids, SECRET_MOUNT.secret)
        items = []
        for row in rows:
            item = Work.of(row)
            mounts = [*config.get(row.id, ()), *secrets.get(row.id, ())]
            item.parts = [(type(m).__table__, m.id, m.updated) for m in mounts]
            principal = row.slice.principal if row.slice is not None else None
            dependencies = [row.trust_domain, principal]
            dependencies += [m.config for m in config.get(row.id, ())] + [m.secret for m in secrets.get(row.id, ())]
            item.waiting = next((w for w in map(waiting_for, dependencies) if w), None)
            if item.waiting is None:
                item.manifest = manifests.pod(row, config.get(row.id, ()), secrets.get(row.id, ()))
            items.append(item)
        return items

    async def on_apply_error(self, ctx: Context, work: Work, path: str, error: ApiError) -> dict[str, Any]:
        assert work.manifest is not None
        if error.code == 403 and "service account" in error.message:
            # A namespace or service account made moments ago: its token is not there yet.
            meta, spec = work.manifest["metadata"], work.manifest["spec"]
            await wait_for_token(ctx.client, meta["namespace"], spec.get("serviceAccountName", "default"))
        elif error.code == 422 and "may not change fields" in error.message:
            # A pod takes few changes in place (image, labels, ...); for the rest it is replaced.
            log.info("replacing pod %s: its spec changed in a way a pod cannot take in place", path)
            await replace_pod(ctx.client, path)
        else:
            raise error
        return await ctx.client.apply(path, work.manifest)


async def replace_pod(client: KubeClient, path: str) -> None:
    """Delete the pod and wait until its name is free."""
    try:
        old = await client.request("DELETE", path, body={"gracePeriodSeconds": 0})
    except NotFound:
        return
    uid = old["metadata"]["uid"]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + POD_REPLACE_TIMEOUT
    while loop.time() < deadline:
        try:
            current = await client.request("GET", path)
        except NotFound:
            return
        if current["metadata"]["uid"] != uid:
            return
        await asyncio.sleep(0.2)
    raise SyncError(f"pod {path.rpartition('/')[2]} was not deleted within {POD_REPLACE_TIMEOUT:.0f} s")


def _by_instance(session: Session, mount: type[Any], ids: list[int], target: Any) -> dict[int, list[Any]]:
    found: dict[int, list[Any]] = {}
    if not ids:
        return found
    query = sa.select(mount).where(mount.service_instance_id.in_(ids)).options(selectinload(target))
    for row in session.scalars(query.order_by(mount.id)):
        found.setdefault(row.service_instance_id, []).append(row)
    return found


class ServiceStep(Step):
    model = Service
    resource = Resource("", "v1", "Service", "services", namespaced=True)

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        return [Service.leaf_model_name == "Service", *super().in_cluster(cluster_id)]

    def is_dirty(self) -> sa.ColumnElement[bool]:
        ports = sa.select(ServicePort.id).where(ServicePort.service_id == Service.id, dirty(ServicePort)).exists()
        return sa.or_(dirty(Service), ports)

    def load_options(self) -> list[Any]:
        return [selectinload(Service.trust_domain), selectinload(Service.ports)]

    def work(self, session: Session, row: Any) -> Work:
        item = Work.of(row)
        ports = sorted(row.ports, key=lambda p: p.id)
        item.parts = [(ServicePort.__table__, p.id, p.updated) for p in ports]
        item.waiting = waiting_for(row.trust_domain) or (None if ports else "waiting for a ServicePort")
        if item.waiting is None:
            item.manifest = manifests.service(row, ports)
        return item


def step_by_model(steps: Sequence[Step]) -> dict[str, Step]:
    return {step.model.__name__: step for step in steps}
