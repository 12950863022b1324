"""A slice's controller_replica_count has one writer (inventory/replicas.py): a built-in controller's watch, or
the owner walk for a custom kind. Through the writer on SQLite and PostgreSQL, and on the real control plane."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from kuberaven.inventory.records import Item, SliceRef
from kuberaven.inventory.writer import InventoryWriter
from kuberaven.kube.client import KubeClient
from kuberaven.kube.reflector import WatchEvent
from kuberaven.model import Database, KubernetesServiceInstance, Slice, TrustDomain
from kuberaven.model.base import table_of
from kuberaven.model.history import HISTORY, HISTORY_ID
from tests.helpers import eventually, inventory_running
from tests.integration.test_inventory import create, workload

NS = "a"
WEB_UID = "uid-web"


def namespace() -> Item:
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "uid": "ns-a", "resourceVersion": "1"}}
    return Item.of("namespaces", WatchEvent("ADDED", obj), "1")


def deployment(replicas: int, event_type: str = "MODIFIED") -> Item:
    meta = {"name": "web", "namespace": NS, "uid": WEB_UID, "resourceVersion": str(100 + replicas)}
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {"replicas": replicas}}
    return Item.of("deployments", WatchEvent(event_type, obj), meta["resourceVersion"])


def pod(name: str, ref: SliceRef) -> Item:
    """A pod of the slice ``ref`` (what owners.py resolved: its count maybe from a stale owner cache)."""
    meta = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "3"}
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    item = Item.of("pods", WatchEvent("ADDED", obj), "3")
    item.slice = ref
    return item


def web(replicas: int) -> SliceRef:
    return SliceRef("web", "Deployment", WEB_UID, replicas, watched=True)


def counts(database: Database) -> dict[str, int | None]:
    with database.session() as session:
        return dict(session.execute(sa.select(Slice.name, Slice.controller_replica_count)).all())


@pytest.fixture
def writer(database: Database) -> InventoryWriter:
    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    return writer


def test_a_stale_owner_cache_never_overwrites_a_scaled_controllers_count(
    writer: InventoryWriter, database: Database
) -> None:
    writer.apply([namespace(), deployment(2, "ADDED"), pod("web-1", web(2))])
    assert counts(database) == {"web": 2}
    # Scaled to 3; the new pod's owner walk still has 2 cached, in the same batch and in the next.
    writer.apply([deployment(3), pod("web-2", web(2))])
    assert counts(database) == {"web": 3}
    writer.apply([pod("web-3", web(2))])
    assert counts(database) == {"web": 3}
    # The pod's batch first, its controller's event later in the same batch: still the watch's count.
    writer.apply([pod("web-4", web(3)), deployment(4)])
    assert counts(database) == {"web": 4}
    # Another writer of the cluster (a restart, or the replica that takes it over) knows nothing of the
    # slice but its row: a pod's count still does not overwrite it.
    restarted = InventoryWriter(database, "kubernetes")
    restarted.load()
    restarted.apply([pod("web-5", web(2))])
    assert counts(database) == {"web": 4}


def test_a_new_slice_starts_from_its_controllers_watch_and_follows_it(
    writer: InventoryWriter, database: Database
) -> None:
    # The controller's event and its first pod in one batch, the pod's owner walk read 1 before the scale.
    writer.apply([namespace(), deployment(5, "ADDED"), pod("web-1", web(1))])
    assert counts(database) == {"web": 5}
    # A pod whose controller's watch has not spoken yet: the owner walk's count, until the watch says.
    other = SliceRef("api", "StatefulSet", "uid-api", 2, watched=True)
    writer.apply([pod("api-0", other)])
    assert counts(database) == {"web": 5, "api": 2}
    stateful = {"name": "api", "namespace": NS, "uid": "uid-api", "resourceVersion": "9"}
    scaled = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": stateful, "spec": {"replicas": 6}}
    writer.apply([Item.of("statefulsets", WatchEvent("MODIFIED", scaled), "9")])
    assert counts(database) == {"web": 5, "api": 6}


def test_a_custom_controllers_count_is_the_owner_walks(writer: InventoryWriter, database: Database) -> None:
    writer.apply([namespace(), pod("bird-0", SliceRef("birds", "Flock", "uid-birds", 4))])
    assert counts(database) == {"birds": 4}
    writer.apply([pod("bird-1", SliceRef("birds", "Flock", "uid-birds", 6))])  # its scale, read again
    assert counts(database) == {"birds": 6}


def test_a_failed_batchs_scale_is_not_written_by_the_next_batch(writer: InventoryWriter, database: Database) -> None:
    writer.apply([namespace(), deployment(2, "ADDED"), pod("web-1", web(2))])
    bad = pod("web-2", web(2))
    assert bad.record is not None
    bad.record.labels = {"x": object()}  # type: ignore[dict-item]  # not JSON: the batch fails before its commit
    with pytest.raises(TypeError):
        writer.apply([deployment(7), bad])
    assert counts(database) == {"web": 2}
    writer.apply([pod("web-3", web(2))])  # not the failed batch again: nothing of it is written
    assert counts(database) == {"web": 2}
    writer.apply([deployment(7), pod("web-2", web(2))])  # its retry
    assert counts(database) == {"web": 7}


def test_a_deleted_controllers_slice_keeps_its_count_for_its_last_pods(
    writer: InventoryWriter, database: Database
) -> None:
    writer.apply([namespace(), deployment(2, "ADDED"), pod("web-1", web(2))])
    writer.apply([deployment(2, "DELETED")])
    writer.apply([pod("web-2", web(9))])  # a built-in kind: never the pods' count, even with no watch left
    assert counts(database) == {"web": 2}


def slice_count(database: Database, namespace: str) -> tuple[int, int | None]:
    """The number of Running pods with an IP in ``namespace``, and their slice's count (one slice)."""
    with database.session() as session:
        pods = session.scalars(
            sa.select(KubernetesServiceInstance)
            .join(TrustDomain, TrustDomain.id == KubernetesServiceInstance.trust_domain_id)
            .where(TrustDomain.name == namespace)
        ).all()
        running = sum(1 for p in pods if p.phase == "Running" and p.pod_ip)
        found: dict[str, Any] = dict(
            session.execute(
                sa.select(Slice.name, Slice.controller_replica_count)
                .join(TrustDomain, TrustDomain.id == Slice.trust_domain_id)
                .where(TrustDomain.name == namespace)
            ).all()
        )
    assert list(found) == ["web"], found
    return running, found["web"]


def counts_over_time(database: Database, namespace: str) -> list[int | None]:
    """Every count the slice "web" of ``namespace`` has had, oldest first (its history rows, then its row)."""
    versions = HISTORY[table_of(Slice).name]
    with database.session() as session:
        td = session.scalar(sa.select(TrustDomain.id).where(TrustDomain.name == namespace))
        past = session.scalars(
            sa.select(versions.c.controller_replica_count)
            .where(versions.c.trust_domain_id == td, versions.c.name == "web")
            .order_by(versions.c[HISTORY_ID])
        ).all()
        now = session.scalar(sa.select(Slice.controller_replica_count).where(Slice.trust_domain_id == td))
    return [*past, now]


async def scale(kube: KubeClient, namespace: str, replicas: int) -> None:
    await kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/web/scale",
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
    )


async def test_a_deployment_scaled_while_its_pods_arrive_keeps_its_count(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    """The owner cache (minutes) still says 1 while the new pods arrive; the count follows the Deployment, and
    never went back to the cached value on the way (the pods' path wrote it too, and it flipped)."""
    async with inventory_running(kube, database):
        await create(kube, workload("Deployment", "apps/v1", "web", namespace, replicas=1))

        def settled(pods: int, replicas: int) -> None:
            assert slice_count(database, namespace) == (pods, replicas)

        await eventually(lambda: settled(1, 1), timeout=60)
        await scale(kube, namespace, 4)
        await scale(kube, namespace, 5)  # again while the first new pods are arriving
        await eventually(lambda: settled(5, 5), timeout=60)
        # A pod replaced: its batch comes after the scale, its owner walk still with the cached 1.
        listed = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods", params={"limit": "10"})
        name = listed["items"][0]["metadata"]["name"]
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", params={"gracePeriodSeconds": "0"})

        def replaced() -> None:
            with database.session() as session:
                names = set(
                    session.scalars(
                        sa.select(KubernetesServiceInstance.name)
                        .join(TrustDomain, TrustDomain.id == KubernetesServiceInstance.trust_domain_id)
                        .where(TrustDomain.name == namespace)
                    )
                )
            assert name not in names and len(names) == 5, names
            settled(5, 5)

        await eventually(replaced, timeout=60)
    seen = [count or 0 for count in counts_over_time(database, namespace)]
    assert seen == sorted(seen), seen  # 1, then 4 and 5 as scaled: never back
    assert (seen[0], seen[-1]) == (1, 5), seen
