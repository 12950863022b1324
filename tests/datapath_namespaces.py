"""Namespaces that the Services' data-path tests hand on to each other (services/conftest.py's ``dp_namespace``).

A namespace costs Neutron about 5 CPU-seconds to make and remove (its network, subnet, router interface and
security group; measured on a 2-core test host), and a pod in a namespace whose pool holds a port given back by
an earlier pod costs it next to nothing. So after a test its namespace is emptied (pods, Services, Endpoints,
EndpointSlices, NetworkPolicies deleted) and, once kuberaven holds no translation of what was in it, kept for
the next test, which finds a namespace as a fresh one looks to a test: no object of anyone else's in it, the
same labels and annotations (none but kuberaven's own). A namespace a test deleted or changed, or one kuberaven
did not empty in time, is deleted instead, and the next test makes its own.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import sqlalchemy as sa

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.pools import KIND as POOLED
from kuberaven.network.reconcilers.namespaces import KIND as NAMESPACE
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import DataPath, holders
from tests.helpers import eventually

EMPTIED_WITHIN = 120.0  # seconds for kuberaven to drop the translations of a namespace's deleted objects
# What a test may have made in its namespace, by collection path; deleted as a collection (Services: one by one,
# Kubernetes 1.20 has no deletecollection for them).
COLLECTIONS = (
    "/api/v1/namespaces/{}/pods",
    "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies",
    "/api/v1/namespaces/{}/endpoints",
    "/apis/discovery.k8s.io/v1beta1/namespaces/{}/endpointslices",
)
SERVICES = "/api/v1/namespaces/{}/services"
PAGE = 500
OWN_ANNOTATIONS = "kuberaven.io/"  # kuberaven's own on a namespace (its network's): a fresh one has them too


async def fresh_namespace(kube: KubeClient) -> str:
    name = f"dp-{uuid.uuid4().hex[:6]}"
    await create_namespace(kube, name)
    return name


async def emptied(kube: KubeClient, datapath: DataPath, name: str) -> bool:
    """Empty ``name`` for the next test: True once nothing of the last test's is left in it, in Kubernetes or in
    kuberaven's translations, its pooled ports free; False if it cannot be handed on (deleted, relabelled, or not
    emptied within EMPTIED_WITHIN)."""
    try:
        metadata = (await kube.request("GET", f"/api/v1/namespaces/{name}"))["metadata"]
    except NotFound:
        return False
    users = [key for key in metadata.get("annotations", {}) if not key.startswith(OWN_ANNOTATIONS)]
    if metadata.get("deletionTimestamp") or metadata.get("labels") or users:
        return False
    gone = {pod["metadata"]["uid"] for pod in await listed(kube, COLLECTIONS[0].format(name))}
    for service in await listed(kube, SERVICES.format(name)):
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", f"{SERVICES.format(name)}/{service['metadata']['name']}")
    for collection in COLLECTIONS:
        await kube.request("DELETE", collection.format(name), params={"gracePeriodSeconds": "0"})

    async def empty() -> None:
        for path in (SERVICES, *COLLECTIONS):
            left = await listed(kube, path.format(name))
            assert not left, f"{name}: {[item['metadata']['name'] for item in left]} left in {path}"
        held_rows = translated(datapath, name)
        assert not held_rows, f"{name}: kuberaven still holds {held_rows}"
        held = set(holders(datapath).values()) & gone
        assert not held, f"{name}: pooled ports still held by pods {held}"

    try:
        await eventually(empty, timeout=EMPTIED_WITHIN)
    except AssertionError:
        return False
    return True


async def listed(kube: KubeClient, path: str) -> list[dict[str, Any]]:
    """The objects of a collection; a test's namespace holds far fewer than one page."""
    return list((await kube.request("GET", path, params={"limit": PAGE}))["items"])


def translated(datapath: DataPath, namespace: str) -> list[Any]:
    """kuberaven's translations of objects in ``namespace`` (its pods, Services, policies), from its database:
    the namespace's own and its free pooled ports aside."""
    database = Database(datapath.daemon.database_url)
    try:
        with database.session() as session:
            rows = session.execute(
                sa.select(NetworkTranslation.kind, NetworkTranslation.name).where(
                    NetworkTranslation.namespace == namespace, NetworkTranslation.kind.not_in((NAMESPACE, POOLED))
                )
            ).all()
            return [tuple(row) for row in rows]
    finally:
        database.dispose()
