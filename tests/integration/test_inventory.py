"""Inventory: every pod (and what it implies) mirrored into the model, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest
import sqlalchemy as sa

from kuberaven.inventory.component import Inventory, InventoryOptions
from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.kube.reflector import ReflectorOptions
from kuberaven.model import (
    Database,
    Image,
    KubernetesConfigMap,
    KubernetesSecret,
    KubernetesServiceInstance,
    OutboxEvent,
    Principal,
    Service,
    ServicePort,
    Slice,
    TrustDomain,
)
from kuberaven.runtime import health
from tests.helpers import component_running, configmap, eventually, inventory_running, outbox_statuses

PAUSE = "registry.local:5000/library/pause:3.2"


def pod_template(app: str, image: str = PAUSE) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": image}, {"name": "side", "image": "busybox"}]},
    }


def workload(kind: str, api: str, name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, **spec.pop("meta", {})},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": pod_template(name), **spec},
    }


async def create(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    api = obj["apiVersion"]
    base = f"/apis/{api}" if "/" in api else f"/api/{api}"
    plural = {
        "Deployment": "deployments",
        "StatefulSet": "statefulsets",
        "DaemonSet": "daemonsets",
        "Job": "jobs",
        "CronJob": "cronjobs",
        "Pod": "pods",
        "Secret": "secrets",
        "Service": "services",
        "ServiceAccount": "serviceaccounts",
        "ConfigMap": "configmaps",
    }[obj["kind"]]
    return await kube.request("POST", f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}", body=obj)


def _assert_replicas(database: Database, namespace: str, slice_name: str, replicas: int) -> None:
    with database.session() as session:
        found = session.scalar(
            sa.select(Slice.controller_replica_count)
            .join(TrustDomain, TrustDomain.id == Slice.trust_domain_id)
            .where(TrustDomain.name == namespace, Slice.name == slice_name)
        )
    assert found == replicas, found


async def test_a_custom_controller_with_a_scale_subresource_gives_its_slice_a_replica_count(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    """Any kind that serves /scale: its desired replicas are read there (the original documents "controllers
    that are able to manage replicas")."""
    group, plural = f"scale{namespace.removeprefix('t-')}.kuberaven.io", "flocks"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": "flock", "kind": "Flock"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "subresources": {"scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                }
            ],
        },
    }
    await kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    try:
        path = f"/apis/{group}/v1/namespaces/{namespace}/{plural}"

        async def create_flock() -> dict[str, Any]:
            body = {"apiVersion": f"{group}/v1", "kind": "Flock", "metadata": {"name": "birds"}, "spec": {"size": 4}}
            try:
                return dict(await kube.request("POST", path, body=body))
            except NotFound as not_yet:  # the CRD is not established yet
                raise AssertionError(not_yet) from not_yet

        flock = await eventually(create_flock, timeout=30)
        owner = {
            "apiVersion": f"{group}/v1",
            "kind": "Flock",
            "name": "birds",
            "uid": flock["metadata"]["uid"],
            "controller": True,
        }
        async with inventory_running(kube, database):
            await create(
                kube,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "bird-0", "namespace": namespace, "ownerReferences": [owner]},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
                },
            )
            await eventually(lambda: _assert_replicas(database, namespace, "birds", 4), timeout=30)
    finally:
        await kube.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}")


def pods_in(database: Database, namespace: str) -> dict[str, KubernetesServiceInstance]:
    with database.session() as session:
        rows = session.scalars(
            sa.select(KubernetesServiceInstance)
            .join(TrustDomain, TrustDomain.id == KubernetesServiceInstance.trust_domain_id)
            .where(TrustDomain.name == namespace)
        ).all()
        for row in rows:
            assert row.slice is not None, f"{row.name} has no slice"
            _ = row.slice.name, row.image.name if row.image else None, row.slice.principal
        return {row.name: row for row in rows}


async def test_controllers_bare_pods_and_images_are_inventoried(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    async with inventory_running(kube, database):
        deployment = workload(
            "Deployment", "apps/v1", "web", namespace, replicas=2, meta={"labels": {"xos_slice_name": "web-slice"}}
        )
        await create(kube, deployment)
        await create(kube, workload("StatefulSet", "apps/v1", "db", namespace, replicas=1, serviceName="db"))
        await create(kube, workload("DaemonSet", "apps/v1", "agent", namespace))
        cron = await create(
            kube,
            {
                "apiVersion": "batch/v1beta1",
                "kind": "CronJob",
                "metadata": {"name": "nightly", "namespace": namespace},
                "spec": {
                    "schedule": "0 3 * * *",
                    "jobTemplate": {
                        "spec": {
                            "template": {
                                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                            }
                        }
                    },
                },
            },
        )
        # What the CronJob controller does at 03:00, done now: a Job it controls.
        owner = {
            "apiVersion": "batch/v1beta1",
            "kind": "CronJob",
            "name": "nightly",
            "uid": cron["metadata"]["uid"],
            "controller": True,
        }
        await create(
            kube,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "nightly-1", "namespace": namespace, "ownerReferences": [owner]},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox@sha256:" + "a" * 64}],
                        }
                    }
                },
            },
        )
        await create(
            kube,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "lonely", "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
            },
        )

        def all_running() -> dict[str, KubernetesServiceInstance]:
            pods = pods_in(database, namespace)
            assert len(pods) == 2 + 1 + 2 + 1 + 1, sorted(pods)
            assert all(p.phase == "Running" and p.pod_ip for p in pods.values()), [
                (p.name, p.phase) for p in pods.values()
            ]
            return pods

        pods = await eventually(all_running, timeout=60)
        # Scaling a controller reaches its slice's desired replica count (through the Deployments' watch).
        await kube.request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{namespace}/deployments/web/scale",
            body={"spec": {"replicas": 3}},
            content_type="application/merge-patch+json",
        )
        await eventually(lambda: _assert_replicas(database, namespace, "web-slice", 3), timeout=30)

    slices = {
        name: (p.slice.name, p.slice.controller_kind, p.slice.controller_replica_count) for name, p in pods.items()
    }
    assert sorted(slices.values(), key=str) == sorted(
        [
            ("web-slice", "Deployment", 2),
            ("web-slice", "Deployment", 2),
            ("db", "StatefulSet", 1),
            ("agent", "DaemonSet", None),
            ("agent", "DaemonSet", None),
            ("nightly", "CronJob", None),
            ("lonely", "Pod", None),
        ],
        key=str,
    )
    for pod in pods.values():
        assert pod.xos_managed is False
        assert pod.slice.principal.name == "default"
        assert pod.pod_ips == [pod.pod_ip]
        assert pod.uid and pod.node and pod.backend_code == 1
    web = next(p for p in pods.values() if p.name.startswith("web-"))
    assert (web.image.name, web.image.tag, web.image.digest) == ("registry.local:5000/library/pause", "3.2", "")
    assert [c["image"] for c in web.containers] == [PAUSE, "busybox"]
    job = next(p for p in pods.values() if p.name.startswith("nightly-"))
    assert (job.image.name, job.image.tag, job.image.digest) == ("busybox", "", "sha256:" + "a" * 64)
    with database.session() as session:
        busybox = session.scalar(sa.select(Image).where(Image.name == "busybox", Image.tag == "latest"))
        assert busybox is not None, "the second container's image is inventoried too"


async def test_same_named_pods_in_two_namespaces_stay_apart(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    from kuberaven.testing.namespaces import create_namespace

    other = f"{namespace}-b"
    await create_namespace(kube, other)
    try:
        async with inventory_running(kube, database):
            for ns in (namespace, other):
                await create(
                    kube,
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": "twin", "namespace": ns},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                    },
                )

            def both_running() -> None:
                for ns in (namespace, other):
                    twin = pods_in(database, ns).get("twin")
                    assert twin is not None and twin.pod_ip, ns

            await eventually(both_running)
            a, b = pods_in(database, namespace)["twin"], pods_in(database, other)["twin"]
            assert a.id != b.id and a.uid != b.uid and a.pod_ip != b.pod_ip
            assert a.slice is not None and b.slice is not None
            assert a.slice.trust_domain_id != b.slice.trust_domain_id
            assert a.slice.principal_id != b.slice.principal_id  # "default" SA of each namespace
            await kube.request("DELETE", f"/api/v1/namespaces/{other}/pods/twin")
            await eventually(lambda: _assert("twin" not in pods_in(database, other)))
            assert pods_in(database, namespace)["twin"].uid == a.uid
    finally:
        await kube.request("DELETE", f"/api/v1/namespaces/{other}")


async def test_namespace_objects_are_inventoried_without_secret_values(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    async with inventory_running(kube, database):
        await create(
            kube,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "namespace": namespace},
                "stringData": {"password": "s3cr3t-value", "user": "admin"},
            },
        )
        await create(
            kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": namespace}}
        )
        await create(
            kube,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "front", "namespace": namespace},
                "spec": {
                    "type": "NodePort",
                    "selector": {"app": "x"},
                    "ports": [
                        {"name": "http", "port": 80, "targetPort": 8080},
                        {"name": "dns", "port": 53, "protocol": "UDP"},
                    ],
                },
            },
        )

        def mirrored() -> None:
            with database.session() as session:
                td = session.scalar(sa.select(TrustDomain).where(TrustDomain.name == namespace))
                assert td is not None and td.uid and td.xos_managed is False
                secret = session.scalar(
                    sa.select(KubernetesSecret).where(
                        KubernetesSecret.trust_domain_id == td.id, KubernetesSecret.name == "creds"
                    )
                )
                assert secret is not None and secret.keys == ["password", "user"]
                assert not secret.data
                robot = session.scalar(
                    sa.select(Principal).where(Principal.trust_domain_id == td.id, Principal.name == "robot")
                )
                assert robot is not None and robot.uid
                front = session.scalar(sa.select(Service).where(Service.trust_domain_id == td.id))
                assert front is not None and front.name == "front"
                ports = {
                    p.name: p for p in session.scalars(sa.select(ServicePort).where(ServicePort.service_id == front.id))
                }
                assert ports["http"].internal_port == 8080 and ports["http"].external_port
                assert ports["dns"].protocol == "UDP"

        await eventually(mirrored)
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/serviceaccounts/robot")

        def robot_gone() -> None:
            with database.session() as session:
                assert session.scalar(sa.select(Principal).where(Principal.name == "robot")) is None

        await eventually(robot_gone)
    with database.engine.connect() as connection:
        for table in ("kubernetes_secret", "event_outbox"):
            dump = repr(connection.execute(sa.text(f"SELECT * FROM {table}")).all())
            assert "s3cr3t-value" not in dump


async def test_backpressure_bounds_the_queue_and_loses_nothing(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    """With a queue of 5 and pages of 10, the reflectors wait for the writer: nothing is lost, nothing hangs."""
    from kuberaven.inventory.component import TARGETS

    await asyncio.gather(*(create(kube, configmap(f"listed-{i}", namespace)) for i in range(150)))
    options = InventoryOptions(max_queued=5, batch_size=3, reflector=ReflectorOptions(page_size=10))
    inventory = Inventory(kube, database, options=options)
    largest = 0

    async def watch_queue() -> None:
        nonlocal largest
        while True:
            largest = max(largest, inventory.queue.qsize())
            await asyncio.sleep(0)

    monitor = asyncio.create_task(watch_queue())
    task = asyncio.create_task(inventory.run())
    try:
        await asyncio.wait_for(inventory.wait_synced(), 60)
        # The queue filled (150 objects, a batch of 3 at a time) and each reflector then delivered at most
        # one page onto it before it waited.
        assert options.max_queued <= largest <= options.max_queued + len(TARGETS) * 10, largest
        await asyncio.gather(*(create(kube, configmap(f"watched-{i}", namespace)) for i in range(40)))

        def all_mirrored() -> None:
            names = configmap_names(database, namespace)
            assert names >= {f"listed-{i}" for i in range(150)} | {f"watched-{i}" for i in range(40)}

        await eventually(all_mirrored)
    finally:
        monitor.cancel()
        inventory.stop()
        await asyncio.wait_for(task, 30)


async def test_a_slow_initial_sync_reports_progress_then_a_summary(
    kube: KubeClient, namespace: str, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """What `kuberaven run` logs on a large cluster: listed/expected counts that grow, then one summary."""
    await asyncio.gather(*(create(kube, configmap(f"many-{i}", namespace)) for i in range(200)))
    # Small pages and batches stretch the sync over many progress intervals.
    options = InventoryOptions(max_queued=5, batch_size=3, reflector=ReflectorOptions(page_size=10))
    inventory = Inventory(kube, database, options=options)
    caplog.set_level(logging.INFO, logger=health.__name__)
    async with component_running(inventory):
        await asyncio.wait_for(health.report_initial_sync([inventory], interval=0.05), 60)
    records = [r for r in caplog.records if r.name == health.__name__]
    *progress_lines, summary = records
    assert summary.getMessage().startswith("initial sync done in")
    # Lines logged before the configmaps list starts (the writer still loading) have no count yet.
    # The watches ride on each record as logging's extra= (vars(): LogRecord does not declare them).
    seen = [
        w
        for r in progress_lines
        for w in vars(r)["watches"]
        if w["target"] == "kubernetes/configmaps" and "listed" in w
    ]
    assert seen, "a sync this slow logs its progress before the summary"
    assert [w["listed"] for w in seen] == sorted(w["listed"] for w in seen)
    # The API server's remainingItemCount gives the total while the list is still running.
    assert any(w["expected"] and 0 < w["listed"] < w["expected"] for w in seen)
    assert any(re.search(r"kubernetes/configmaps \d+/\d+ listed \(\d+%\)", r.getMessage()) for r in progress_lines)
    final = next(w for w in inventory.status() if w.target == "kubernetes/configmaps")
    assert isinstance(final.listed, int) and final.listed == final.expected and final.listed >= 200, final
    # A cold start stores every listed object (and, by now, maybe watched changes of a busy cluster).
    assert isinstance(final.written, int) and final.written >= final.listed, final
    assert configmap_names(database, namespace) >= {f"many-{i}" for i in range(200)}


def configmap_names(database: Database, namespace: str) -> set[str]:
    """The ConfigMaps the inventory has mirrored from ``namespace``."""
    with database.session() as session:
        query = sa.select(KubernetesConfigMap.name).join(TrustDomain).where(TrustDomain.name == namespace)
        return set(session.scalars(query))


async def test_slices_of_vanished_external_pods_are_removed(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    async with inventory_running(kube, database):
        await create(
            kube,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "brief", "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        )
        await eventually(lambda: _assert("brief" in pods_in(database, namespace)))
        assert slices_in(database, namespace) == ["brief"]  # the pod's implied Slice, there while the pod is
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/brief")
        await eventually(lambda: _assert("brief" not in pods_in(database, namespace)))
        assert slices_in(database, namespace) == []


def slices_in(database: Database, namespace: str) -> list[str]:
    """The names of the Slices of ``namespace``'s trust domain."""
    with database.session() as session:
        query = sa.select(Slice.name).join(TrustDomain, TrustDomain.id == Slice.trust_domain_id)
        return list(session.scalars(query.where(TrustDomain.name == namespace)))


def _assert(condition: bool) -> None:
    assert condition


async def test_restart_resumes_from_the_stored_position_without_replay_or_gap(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    from kuberaven.model import WatchPosition

    def events_of(prefix: str) -> list[tuple[str, str]]:
        with database.session() as session:
            rows = session.scalars(sa.select(OutboxEvent).where(OutboxEvent.key.startswith(prefix)))
            return [(row.payload["name"], row.status) for row in rows]

    async with inventory_running(kube, database):
        for name in ("stays", "goes"):
            await create(
                kube,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            )
        await eventually(
            lambda: _assert(
                all(p.pod_ip for p in pods_in(database, namespace).values()) and len(pods_in(database, namespace)) == 2
            )
        )
    before = events_of(namespace)
    with database.session() as session:
        stored = session.scalar(sa.select(WatchPosition.resource_version).where(WatchPosition.target == "pods"))
    assert stored

    # While kuberaven is down: one pod deleted, one created.
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/goes")
    await create(
        kube,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "new", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    )
    async with inventory_running(kube, database):
        await eventually(lambda: _assert(set(pods_in(database, namespace)) == {"stays", "new"}))
    after = events_of(namespace)[len(before) :]
    assert ("goes", "deleted") in after and ("new", "created") in after
    assert not [e for e in after if e[0] == "stays"], f"unchanged pod replayed: {after}"


def _namespace_event(kind: str, name: str, uid: str) -> Any:
    from kuberaven.kube.reflector import WatchEvent

    return WatchEvent(
        kind, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": uid, "resourceVersion": "1"}}
    )


def _pod_event(kind: str, namespace: str, name: str, uid: str, ip: str | None = "10.1.0.3") -> Any:
    from kuberaven.kube.reflector import WatchEvent

    status = {"phase": "Running", "podIP": ip} if ip else {"phase": "Pending"}
    return WatchEvent(
        kind,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "3"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            "status": status,
        },
    )


def test_a_batch_with_a_pod_and_another_namespace_deleted_commits(database: Database) -> None:
    """Regression: a namespace DELETED clears the id caches; a pod earlier in the same batch must not need them."""
    from kuberaven.inventory.records import Item
    from kuberaven.inventory.writer import InventoryWriter

    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    writer.apply(
        [
            Item.of("namespaces", _namespace_event("ADDED", "a", "ns-a"), "1"),
            Item.of("namespaces", _namespace_event("ADDED", "b", "ns-b"), "2"),
        ]
    )
    result = writer.apply(
        [
            Item.of("pods", _pod_event("ADDED", "a", "p", "pod-1"), "3"),
            Item.of("namespaces", _namespace_event("DELETED", "b", "ns-b"), "4"),
        ]
    )
    assert result.statuses == ["created"]
    assert set(pods_in(database, "a")) == {"p"}
    with database.session() as session:
        assert session.scalar(sa.select(TrustDomain).where(TrustDomain.name == "b")) is None


def test_a_pod_gone_before_it_had_an_ip_is_recorded_but_never_announced(database: Database) -> None:
    """The original contract: "created" once a pod has an IP; no "deleted" for a uid that had no "created"."""
    from kuberaven.inventory.records import Item
    from kuberaven.inventory.writer import InventoryWriter

    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    writer.apply([Item.of("namespaces", _namespace_event("ADDED", "a", "ns-a"), "1")])
    pending = writer.apply([Item.of("pods", _pod_event("ADDED", "a", "brief", "pod-1", ip=None), "2")])
    assert pending.statuses == [] and set(pods_in(database, "a")) == {"brief"}
    gone = writer.apply([Item.of("pods", _pod_event("DELETED", "a", "brief", "pod-1", ip=None), "3")])
    assert gone.statuses == [] and pods_in(database, "a") == {}
    assert outbox_statuses(database, "a/brief") == []


def test_a_namespace_deleted_before_its_pods_deleted_events_arrive(database: Database) -> None:
    """The namespace watch can run ahead of the pod watch: its pods are reported deleted once, nothing is stuck."""
    from kuberaven.inventory.records import Item
    from kuberaven.inventory.writer import InventoryWriter

    writer = InventoryWriter(database, "kubernetes")
    writer.load()
    writer.apply(
        [
            Item.of("namespaces", _namespace_event("ADDED", "a", "ns-a"), "1"),
            Item.of("pods", _pod_event("ADDED", "a", "old", "pod-0"), "2"),
        ]
    )
    # A pod first seen in the same batch as its namespace's deletion used to
    # fail the batch forever (its row referenced the deleted trust domain).
    result = writer.apply(
        [
            Item.of("pods", _pod_event("ADDED", "a", "new", "pod-1"), "3"),
            Item.of("namespaces", _namespace_event("DELETED", "a", "ns-a"), "4"),
        ]
    )
    assert sorted(result.statuses) == ["created", "deleted", "deleted"]
    assert pods_in(database, "a") == {}
    # The pods' own DELETED events arrive later: nothing repeats.
    late = writer.apply(
        [
            Item.of("pods", _pod_event("DELETED", "a", "old", "pod-0"), "5"),
            Item.of("pods", _pod_event("DELETED", "a", "new", "pod-1"), "6"),
        ]
    )
    assert late.statuses == []
    assert outbox_statuses(database, "a/old") == ["created", "deleted"]
    assert outbox_statuses(database, "a/new") == ["created", "deleted"]
