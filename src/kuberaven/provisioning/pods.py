"""The pod step (provisioning/): KubernetesServiceInstance rows, with their mounts, → Pods.

    KubernetesServiceInstance + its config and secret volume mounts ──► manifests.pod() ──► Pod
    waits for its namespace, its slice's service account, and the ConfigMaps/Secrets it mounts

What only pods need: a row is dirty when one of its mounts is; a pod made
just after its service account waits for the account's token; a change a
pod cannot take in place (most of its spec) replaces it. Its observed
columns are the inventory's (inventory/), never written here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, selectinload

from ..kube.client import KubeClient
from ..kube.errors import ApiError, NotFound
from ..kube.resources import Resource
from ..kube.serviceaccounts import wait_for_token
from ..model.base import table_of
from ..model.cluster import Slice
from ..model.workloads import KubernetesConfigVolumeMount, KubernetesSecretVolumeMount, KubernetesServiceInstance
from . import manifests
from .steps import Context, Step, SyncError, Work, dirty, waiting_for

log = logging.getLogger(__name__)

POD_REPLACE_TIMEOUT = 60.0
KSI = KubernetesServiceInstance
CONFIG_MOUNT = KubernetesConfigVolumeMount
SECRET_MOUNT = KubernetesSecretVolumeMount


SERVICE_ACCOUNT_NOT_READY = (403, 500)  # the API server's codes while a pod's account or its token is missing


class PodStep(Step):
    model = KSI
    resource = Resource("", "v1", "Pod", "pods", namespaced=True)

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        return [KSI.owner_id == cluster_id]

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
            item.parts = [(table_of(type(m)), m.id, m.updated) for m in mounts]
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
        if error.code in SERVICE_ACCOUNT_NOT_READY and "service account" in error.message:
            # A namespace or service account made moments ago: the account (403) or its token (500
            # ServerTimeout, "No API token found for service account") is not there yet.
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
