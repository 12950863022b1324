"""Provisioning: managed rows become Kubernetes objects, follow their rows and go with them (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.model import (
    Database,
    Image,
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesResourceInstance,
    KubernetesSecret,
    KubernetesSecretVolumeMount,
    KubernetesService,
    KubernetesServiceInstance,
    Model,
    OutboxEvent,
    Principal,
    Service,
    ServicePort,
    Site,
    Slice,
    SyncTombstone,
    TrustDomain,
)
from kuberaven.model.database import remove, store
from kuberaven.model.documents import to_document
from kuberaven.provisioning import SyncLoop, SyncOptions
from tests.helpers import component_running, eventually, inventory_running, kuberaven_events, metric, outbox_statuses
from tests.integration.test_model import SEED

PAUSE = "registry.local:5000/library/pause:3.2"


@contextlib.asynccontextmanager
async def sync_running(kube: KubeClient, database: Database, **options: Any) -> AsyncIterator[SyncLoop]:
    options.setdefault("sync_poll", 0.2)
    loop = SyncLoop(kube, database, "kubernetes", SyncOptions(**options))
    async with component_running(loop):
        yield loop


RETRIES_SEEN = 6  # the tries a test of retry backoff waits for


@pytest.fixture
def session(database: Database) -> Iterator[Session]:
    with database.sessions() as session:
        yield session


def save(session: Session, *rows: Model) -> None:
    for row in rows:
        store(session, row)


def reload(database: Database, model: type[Model], row_id: int) -> Any:
    with database.session() as session:
        row = session.get(model, row_id)
        assert row is not None, f"{model.__name__} {row_id} is gone"
        return row


async def get(kube: KubeClient, path: str) -> dict[str, Any] | None:
    try:
        return await kube.request("GET", path)
    except NotFound:
        return None


def trust_domain(session: Session, name: str) -> TrustDomain:
    cluster = session.scalar(sa.select(KubernetesService).where(KubernetesService.name == "kubernetes"))
    td = TrustDomain(name=name, owner=cluster)
    save(session, td)
    return td


def pod_row(session: Session, td: TrustDomain, name: str, **slice_fields: Any) -> KubernetesServiceInstance:
    site = session.scalar(sa.select(Site))
    image = session.scalar(sa.select(Image).where(Image.name == PAUSE.rsplit(":", 1)[0]))
    if image is None:
        image = Image(name=PAUSE.rsplit(":", 1)[0], tag="3.2")
        save(session, image)
    slice_ = Slice(name=f"{name}-slice", site=site, trust_domain=td, **slice_fields)
    save(session, slice_)
    row = KubernetesServiceInstance(name=name, slice=slice_, image=image)
    save(session, row)
    return row


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns() % 10**8}"


async def test_the_seed_example_run_by_another_process_yields_a_running_pod(
    kube: KubeClient, database: Database, database_url: str
) -> None:
    namespace = unique("seed")
    script = "from kuberaven.model import *\nconnect({url!r})\n{seed}".format(
        url=database_url, seed=SEED.replace("demo-trust", namespace)
    )
    async with sync_running(kube, database):
        started = time.monotonic()
        done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

        async def running() -> dict[str, Any]:
            pod = await get(kube, f"/api/v1/namespaces/{namespace}/pods/demo-pod")
            assert pod is not None and pod["status"].get("phase") == "Running", pod and pod["status"]
            return pod

        pod = await eventually(running, timeout=30)
        created = time.monotonic() - started
    with database.session() as s:
        row = s.scalar(sa.select(KubernetesServiceInstance).where(KubernetesServiceInstance.name == "demo-pod"))
        assert row is not None
        assert (row.backend_code, row.backend_status) == (1, "OK")
        assert row.backend_handle == f"{namespace}/demo-pod/{pod['metadata']['uid']}"
        assert row.enacted == row.updated
        td = s.scalar(sa.select(TrustDomain).where(TrustDomain.name == namespace))
        assert td is not None and td.backend_code == 1 and td.backend_handle is not None
        assert td.backend_handle.startswith(f"{namespace}/")
    labels = pod["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "kuberaven"
    assert labels["kuberaven.io/slice"] == "mysite_demo1"
    assert pod["metadata"]["annotations"]["kuberaven.io/row"] == f"KubernetesServiceInstance/{row.id}"
    assert pod["spec"]["containers"][0]["image"] == "k8s.gcr.io/pause-amd64:3.0"
    namespace_obj = await get(kube, f"/api/v1/namespaces/{namespace}")
    assert (
        namespace_obj is not None and namespace_obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kuberaven"
    )
    assert created < 30


async def test_a_managed_pod_is_announced_created_like_any_other(
    kube: KubeClient, database: Database, session: Session
) -> None:
    """The pod events consumers wait for ("created", "deleted") come once each for pods kuberaven makes.

    Provisioning records what it made in the row's handle, never in the
    observed columns (the inventory's alone): the inventory, started after
    that here, sees a pod it never saw.
    """
    namespace = unique("announce")
    row = pod_row(session, trust_domain(session, namespace), "web-0")
    async with sync_running(kube, database):
        await eventually(lambda: _assert_ok(database, KubernetesServiceInstance, row.id))
    provisioned = reload(database, KubernetesServiceInstance, row.id)
    live = await get(kube, f"/api/v1/namespaces/{namespace}/pods/web-0")
    assert live is not None and provisioned.backend_handle == f"{namespace}/web-0/{live['metadata']['uid']}"
    assert provisioned.uid is None and provisioned.phase is None
    async with inventory_running(kube, database):

        def announced() -> None:
            statuses = outbox_statuses(database, f"{namespace}/web-0")
            assert statuses[:1] == ["created"], statuses

        await eventually(announced)
        # Deleting the row deletes the pod: announced "deleted", not "created" again on its way out.
        with database.sessions() as s:
            remove(s, s.get_one(KubernetesServiceInstance, row.id))
        async with sync_running(kube, database):

            def gone() -> None:
                statuses = outbox_statuses(database, f"{namespace}/web-0")
                assert statuses[-1:] == ["deleted"] and statuses.count("created") == 1, statuses

            await eventually(gone)


async def test_the_observed_columns_of_managed_objects_have_one_writer_the_inventory(
    kube: KubeClient, database: Database, session: Session
) -> None:
    """Provisioning writes what it did (enacted, backend_*); uid and resource_version only the inventory, as for pods.

    Applied alone, each row keeps them empty though its object exists (its uid is in the handle); the
    inventory then fills them from what it watches, also after provisioning applies a change.
    """
    namespace = unique("observed")
    td = trust_domain(session, namespace)
    config = KubernetesConfigMap(name="settings", trust_domain=td, data={"k": "v"})
    secret = KubernetesSecret(name="creds", trust_domain=td, data={"password": "s3cret"})
    principal = Principal(name="runner", trust_domain=td)
    service = Service(name="web", trust_domain=td)
    save(session, config, secret, principal, service)
    save(
        session,
        ServicePort(name="http", service=service, internal_port=8080, external_port=random.randint(30000, 32767)),
    )
    base = f"/api/v1/namespaces/{namespace}"
    rows: list[tuple[type[Model], int, str]] = [
        (TrustDomain, td.id, base),
        (KubernetesConfigMap, config.id, f"{base}/configmaps/settings"),
        (KubernetesSecret, secret.id, f"{base}/secrets/creds"),
        (Principal, principal.id, f"{base}/serviceaccounts/runner"),
        (Service, service.id, f"{base}/services/web"),
    ]
    async with sync_running(kube, database):
        for model, row_id, _ in rows:
            await eventually(functools.partial(_assert_ok, database, model, row_id))
    for model, row_id, path in rows:
        row, live = reload(database, model, row_id), await get(kube, path)
        assert live is not None and row.backend_handle.endswith(live["metadata"]["uid"]), (model, row.backend_handle)
        assert (row.uid, row.resource_version) == (None, None), f"{model.__name__}: provisioning wrote them"

    async def observed(model: type[Model], row_id: int, path: str) -> None:
        row, live = reload(database, model, row_id), await get(kube, path)
        assert live is not None
        assert (row.uid, row.resource_version) == (live["metadata"]["uid"], live["metadata"]["resourceVersion"])

    async with sync_running(kube, database), inventory_running(kube, database):
        for model, row_id, path in rows:
            await eventually(functools.partial(observed, model, row_id, path))
        config.data = {"k": "changed"}
        save(session, config)
        await eventually(lambda: _assert_ok(database, KubernetesConfigMap, config.id))
        live = await get(kube, f"{base}/configmaps/settings")
        assert live is not None and live["data"] == {"k": "changed"}
        await eventually(functools.partial(observed, KubernetesConfigMap, config.id, f"{base}/configmaps/settings"))


async def test_config_and_secret_mounts_follow_their_rows(
    kube: KubeClient, database: Database, session: Session
) -> None:
    namespace = unique("mounts")
    td = trust_domain(session, namespace)
    config = KubernetesConfigMap(name="settings", trust_domain=td, data={"a.conf": "one", "b.conf": "two"})
    secret = KubernetesSecret(name="creds", trust_domain=td, data={"password": "s3cret"})
    principal = Principal(name="runner", trust_domain=td)
    save(session, config, secret, principal)
    row = pod_row(session, td, "mounted", principal=principal)
    # The same ConfigMap twice: the volume names must not collide (the original's did).
    save(
        session,
        KubernetesConfigVolumeMount(config=config, service_instance=row, mount_path="/etc/app"),
        KubernetesConfigVolumeMount(config=config, service_instance=row, mount_path="/etc/a.conf", sub_path="a.conf"),
        KubernetesSecretVolumeMount(secret=secret, service_instance=row, mount_path="/run/secrets/app"),
    )
    base = f"/api/v1/namespaces/{namespace}"
    async with sync_running(kube, database):

        async def pod_synced() -> dict[str, Any]:
            pod = await get(kube, f"{base}/pods/mounted")
            assert pod is not None and pod["status"].get("phase") == "Running"
            return pod

        pod = await eventually(pod_synced)
        spec = pod["spec"]
        assert spec["serviceAccountName"] == "runner"
        assert sorted(v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v) == ["settings", "settings"]
        assert "creds" in [v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v]
        mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert {"/etc/app", "/etc/a.conf", "/run/secrets/app"} <= set(mounts)
        assert mounts["/etc/a.conf"]["subPath"] == "a.conf"
        assert mounts["/etc/app"]["name"] != mounts["/etc/a.conf"]["name"]
        stored_secret = await get(kube, f"{base}/secrets/creds")
        assert stored_secret is not None
        assert base64.b64decode(stored_secret["data"]["password"]).decode() == "s3cret"
        with database.session() as s:
            assert to_document(s.get_one(KubernetesSecret, secret.id))["data"] == {"password": "<hidden>"}

        # Editing the row updates the ConfigMap; a key removed in the model is removed in Kubernetes.
        config.data = {"a.conf": "uno", "c.conf": "three"}
        save(session, config)

        async def config_updated() -> None:
            stored = await get(kube, f"{base}/configmaps/settings")
            assert stored is not None and stored["data"] == {"a.conf": "uno", "c.conf": "three"}

        await eventually(config_updated, timeout=5)
        await eventually(lambda: _assert_ok(database, KubernetesConfigMap, config.id))
    assert reload(database, KubernetesServiceInstance, row.id).backend_code == 1


def _assert_ok(database: Database, model: type[Model], row_id: int) -> Any:
    row = reload(database, model, row_id)
    assert (row.backend_code, row.backend_status) == (1, "OK"), row.backend_status
    assert row.enacted == row.updated
    return row


async def test_a_service_port_gives_a_service_with_endpoints_of_its_slice_pods(
    kube: KubeClient, database: Database, session: Session
) -> None:
    namespace = unique("svc")
    td = trust_domain(session, namespace)
    service = Service(name="web", trust_domain=td)
    save(session, service)
    node_port = random.randint(30000, 32767)  # node ports are cluster-wide: one per test run
    save(session, ServicePort(name="http", service=service, internal_port=8080, external_port=node_port))
    first = pod_row(session, td, "web-0", service=service)
    second = pod_row(session, td, "web-1", service=service)
    pod_row(session, td, "other")  # in no slice of the service: not selected
    async with sync_running(kube, database):

        async def endpoints_ready() -> dict[str, Any]:
            endpoints = await get(kube, f"/api/v1/namespaces/{namespace}/endpoints/web")
            assert endpoints is not None
            addresses = [a for s in endpoints.get("subsets", []) for a in s.get("addresses", [])]
            assert sorted(a["targetRef"]["name"] for a in addresses) == ["web-0", "web-1"], endpoints
            return endpoints

        endpoints = await eventually(endpoints_ready)
    assert endpoints["subsets"][0]["ports"][0]["port"] == 8080
    stored = await get(kube, f"/api/v1/namespaces/{namespace}/services/web")
    assert stored is not None and stored["spec"]["type"] == "NodePort"
    assert stored["spec"]["ports"][0]["nodePort"] == node_port
    for row in (first, second):
        _assert_ok(database, KubernetesServiceInstance, row.id)
    _assert_ok(database, Service, service.id)


MULTI = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: app}}}}
  template:
    metadata: {{labels: {{app: app}}}}
    spec: {{containers: [{{name: main, image: "{image}"}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: app}}
spec:
  selector: {{app: app}}
  ports: [{{port: 80}}]
"""
CONFIG_DOC = """
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {mode: test}
"""


async def test_resource_instance_applies_updates_with_pruning_and_deletes(
    kube: KubeClient, database: Database, session: Session
) -> None:
    namespace = unique("raw")
    td = trust_domain(session, namespace)
    row = KubernetesResourceInstance(
        name=f"{namespace}-app", trust_domain=td, resource_definition=MULTI.format(replicas=2, image=PAUSE) + CONFIG_DOC
    )
    save(session, row)
    base = f"/api/v1/namespaces/{namespace}"
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/app"
    async with sync_running(kube, database) as loop:
        first = await eventually(lambda: _assert_ok(database, KubernetesResourceInstance, row.id))
        assert first.kubectl_state == "CREATED"
        assert sorted((o["kind"], o["name"]) for o in first.applied_objects) == [
            ("ConfigMap", "app-config"),
            ("Deployment", "app"),
            ("Service", "app"),
        ]
        assert await get(kube, f"{base}/configmaps/app-config") is not None

        async def two_ready() -> None:
            stored = await get(kube, deployment)
            assert stored is not None and stored["status"].get("readyReplicas") == 2

        await eventually(two_ready)

        # Drop the ConfigMap and scale to one: the ConfigMap is pruned, the state says updated.
        row.resource_definition = MULTI.format(replicas=1, image=PAUSE)
        save(session, row)

        async def pruned() -> None:
            assert await get(kube, f"{base}/configmaps/app-config") is None
            stored = await get(kube, deployment)
            assert stored is not None and stored["spec"]["replicas"] == 1

        await eventually(pruned, timeout=10)
        second = await eventually(lambda: _assert_ok(database, KubernetesResourceInstance, row.id))
        assert second.kubectl_state == "UPDATED"
        assert len(second.applied_objects) == 2

        # Deleting the row deletes everything it applied.
        remove(session, row)
        loop.wake()

        async def all_gone() -> None:
            assert await get(kube, deployment) is None
            assert await get(kube, f"{base}/services/app") is None

        await eventually(all_gone, timeout=10)


async def test_bad_yaml_and_a_forbidden_object_are_reported_and_retried_with_backoff(
    kube: KubeClient, database: Database, session: Session
) -> None:
    namespace = unique("bad")
    td = trust_domain(session, namespace)
    broken = KubernetesResourceInstance(
        name=f"{namespace}-broken", trust_domain=td, resource_definition="kind: ConfigMap\nmetadata: {name: x\n"
    )
    unknown = KubernetesResourceInstance(
        name=f"{namespace}-unknown",
        trust_domain=td,
        resource_definition="apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n",
    )
    # A quota of no Services: the API server forbids the document's Service (403), after the ConfigMap went in.
    forbidden = KubernetesResourceInstance(
        name=f"{namespace}-forbidden",
        trust_domain=td,
        resource_definition=CONFIG_DOC + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
        "spec: {ports: [{port: 80}]}\n",
    )
    async with sync_running(kube, database):
        await eventually(lambda: _assert_ok(database, TrustDomain, td.id))
        quota = {"metadata": {"name": "no-services"}, "spec": {"hard": {"services": "0"}}}
        quotas = f"/api/v1/namespaces/{namespace}/resourcequotas"
        await kube.request("POST", quotas, body=quota)

        async def in_force() -> None:  # the quota controller has counted: admission enforces it from then on
            found = await kube.request("GET", f"{quotas}/no-services")
            assert (found.get("status") or {}).get("hard") == {"services": "0"}, found.get("status")

        await eventually(in_force)
        save(session, broken, unknown, forbidden)

        def reported() -> dict[str, str]:
            rows = {
                r.name.rpartition("-")[2]: reload(database, KubernetesResourceInstance, r.id)
                for r in (broken, unknown, forbidden)
            }
            assert all(r.backend_code == 2 for r in rows.values()), [r.backend_status for r in rows.values()]
            return {k: r.backend_status for k, r in rows.items()}

        statuses = await eventually(reported, timeout=15)
        attempts, looked = (
            metric("kuberaven_sync_apply_seconds_count", model="KubernetesResourceInstance"),
            time.monotonic(),
        )

        def retried() -> float:
            return metric("kuberaven_sync_apply_seconds_count", model="KubernetesResourceInstance") - attempts

        # Retried, and with backoff (1 s, 2 s, 4 s ±20 %): six more tries of three rows make one row try twice,
        # a backoff of 1.6 s (at least 1.28 s) apart, not one per 0.2 s poll (all six in 0.4 s).
        await eventually(lambda: retried() >= RETRIES_SEEN, timeout=30)
        took = time.monotonic() - looked
    assert "not valid YAML at line 3" in statuses["broken"]
    assert "document 1 (Gadget g)" in statuses["unknown"] and "serves no kind 'Gadget'" in statuses["unknown"]
    assert "document 2 (Service" in statuses["forbidden"] and "403" in statuses["forbidden"]
    assert "exceeded quota" in statuses["forbidden"]
    # The ConfigMap that did go in is recorded, so deleting the row would remove it.
    recorded = reload(database, KubernetesResourceInstance, forbidden.id).applied_objects
    assert [(o["kind"], o["name"]) for o in recorded] == [("ConfigMap", "app-config")]
    assert took >= 1.0, f"{RETRIES_SEEN} tries in {took:.2f}s"


async def test_deleting_rows_removes_only_what_kuberaven_manages(
    kube: KubeClient, database: Database, session: Session, namespace: str
) -> None:
    managed_ns = unique("owned")
    td = trust_domain(session, managed_ns)
    row = pod_row(session, td, "doomed")
    async with inventory_running(kube, database), sync_running(kube, database) as loop:
        await eventually(lambda: _assert_ok(database, KubernetesServiceInstance, row.id))
        # The namespace made by hand (the fixture) is inventoried: its row is external.
        external = await eventually(lambda: _external_trust_domain(database, namespace))
        remove(session, session.merge(external), cascade=True)  # with what was found in it
        remove(session, row)
        loop.wake()

        async def pod_gone() -> None:
            assert await get(kube, f"/api/v1/namespaces/{managed_ns}/pods/doomed") is None

        await eventually(pod_gone, timeout=15)
        stays = await get(kube, f"/api/v1/namespaces/{namespace}")
        assert stays is not None and "deletionTimestamp" not in stays["metadata"]
        # A managed trust domain's namespace goes with its row.
        remove(session, session.merge(reload(database, TrustDomain, td.id)), cascade=True)  # and its slice
        loop.wake()

        async def namespace_terminating() -> None:
            gone = await get(kube, f"/api/v1/namespaces/{managed_ns}")
            assert gone is None or "deletionTimestamp" in gone["metadata"]

        await eventually(namespace_terminating, timeout=10)
    # Deleting the cluster row (which cascades to every row of the cluster) leaves nothing to delete.
    kept = pod_row(session, trust_domain(session, unique("kept")), "kept")
    assert kept.owner_id is not None
    remove(session, session.merge(reload(database, KubernetesService, kept.owner_id)), cascade=True)
    with database.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(SyncTombstone)) == 0


def _external_trust_domain(database: Database, name: str) -> TrustDomain:
    with database.session() as s:
        td = s.scalar(sa.select(TrustDomain).where(TrustDomain.name == name))
        assert td is not None and not td.xos_managed
        return td


async def test_a_managed_pod_deleted_by_hand_is_recreated_and_a_spec_change_replaces_it(
    kube: KubeClient, database: Database, session: Session
) -> None:
    namespace = unique("heal")
    td = trust_domain(session, namespace)
    row = pod_row(session, td, "phoenix")
    path = f"/api/v1/namespaces/{namespace}/pods/phoenix"
    async with inventory_running(kube, database), sync_running(kube, database):
        await eventually(lambda: _assert_ok(database, KubernetesServiceInstance, row.id))
        first = await eventually(lambda: _announced(database, f"{namespace}/phoenix", 1))
        await kube.request("DELETE", path, body={"gracePeriodSeconds": 0})

        async def recreated() -> dict[str, Any]:
            pod = await get(kube, path)
            assert pod is not None and pod["metadata"]["uid"] != first[0][1]
            assert "deletionTimestamp" not in pod["metadata"]
            return pod

        second = await eventually(recreated, timeout=15)
        # Announced (it has its IP) before it is replaced: a pod replaced before it ever had an IP is never
        # announced, neither created nor deleted (lifecycle.py), and a loaded kubelet may take longer to give
        # one than the sync takes to replace it.
        announced = await eventually(lambda: _announced(database, f"{namespace}/phoenix", 2))
        assert ("created", second["metadata"]["uid"]) in announced
        # A new mount cannot be added to a running pod: the pod is replaced.
        config = KubernetesConfigMap(name="late", trust_domain=td, data={"k": "v"})
        save(session, config)
        save(session, KubernetesConfigVolumeMount(config=config, service_instance=row, mount_path="/late"))

        async def replaced() -> None:
            pod = await get(kube, path)
            assert pod is not None and pod["metadata"]["uid"] != second["metadata"]["uid"]
            assert any(m["mountPath"] == "/late" for m in pod["spec"]["containers"][0].get("volumeMounts", []))

        await eventually(replaced, timeout=20)
        await eventually(lambda: _assert_ok(database, KubernetesServiceInstance, row.id))
        # Each pod that replaced another under the same name: deleted(old uid), then created(new uid).
        events = await eventually(lambda: _announced(database, f"{namespace}/phoenix", 3))
        uids = [uid for _, uid in events[::2]]
        assert len(set(uids)) == 3
        assert events == [
            ("created", uids[0]),
            ("deleted", uids[0]),
            ("created", uids[1]),
            ("deleted", uids[1]),
            ("created", uids[2]),
        ]


def _announced(database: Database, key: str, created: int) -> list[tuple[str, str]]:
    """The (status, uid) of the pod events of ``key``, once ``created`` pods have been announced."""
    with database.session() as s:
        query = sa.select(OutboxEvent.status, OutboxEvent.payload).where(OutboxEvent.key == key)
        events = [(status, payload["uid"]) for status, payload in s.execute(query.order_by(OutboxEvent.id))]
    assert [status for status, _ in events].count("created") >= created, events
    return events


async def test_an_object_made_by_hand_is_a_conflict_until_the_row_asks_to_adopt_it(
    kube: KubeClient, database: Database, session: Session, namespace: str
) -> None:
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body={"metadata": {"name": "handmade"}, "data": {"owner": "a human"}},
    )
    td = session.merge(_trust_domain_row(database, namespace))
    row = KubernetesConfigMap(name="handmade", trust_domain=td, data={"owner": "kuberaven"})
    save(session, row)
    async with sync_running(kube, database):

        def conflict() -> str:
            stored = reload(database, KubernetesConfigMap, row.id)
            assert stored.backend_code == 2
            return stored.backend_status

        status = await eventually(conflict)
        assert f"ConfigMap {namespace}/handmade already exists and was not created by kuberaven" in status
        assert "adopt: true" in status
        untouched = await get(kube, f"/api/v1/namespaces/{namespace}/configmaps/handmade")
        assert untouched is not None and untouched["data"] == {"owner": "a human"}

        row.adopt = True
        save(session, row)
        await eventually(lambda: _assert_ok(database, KubernetesConfigMap, row.id), timeout=5)
    adopted = await get(kube, f"/api/v1/namespaces/{namespace}/configmaps/handmade")
    assert adopted is not None and adopted["data"] == {"owner": "kuberaven"}


def _trust_domain_row(database: Database, name: str) -> TrustDomain:
    """A trust domain for a namespace made by hand (here without the inventory running)."""
    with database.session() as s:
        td = s.scalar(sa.select(TrustDomain).where(TrustDomain.name == name))
        if td is None:
            cluster = s.scalar(sa.select(KubernetesService).where(KubernetesService.name == "kubernetes"))
            td = TrustDomain(name=name, owner=cluster, xos_managed=False)
            s.add(td)
            s.flush()
        return td


async def test_a_change_made_by_another_process_is_applied_within_a_second_or_so(
    kube: KubeClient, database: Database, database_url: str, session: Session, tmp_path: Any
) -> None:
    namespace = unique("notice")
    td = trust_domain(session, namespace)
    row = KubernetesConfigMap(name="flag", trust_domain=td, data={"v": "0"})
    save(session, row)
    document = tmp_path / "flag.yaml"
    # PostgreSQL's fallback poll is set far away: only NOTIFY can be this quick there.
    async with sync_running(kube, database, sync_poll=0.5, notify_fallback=60):
        await eventually(lambda: _assert_ok(database, KubernetesConfigMap, row.id))
        delays = []
        for value in ("1", "2", "3"):
            document.write_text(
                f"kind: KubernetesConfigMap\nname: flag\ntrust_domain: kubernetes/{namespace}\ndata: {{v: '{value}'}}\n"
            )
            command = [sys.executable, "-m", "kuberaven", "apply", "-f", str(document), "--db", database_url]
            done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            changed = time.monotonic()

            async def applied(value: str = value) -> None:
                stored = await get(kube, f"/api/v1/namespaces/{namespace}/configmaps/flag")
                assert stored is not None and stored["data"] == {"v": value}

            await eventually(applied, timeout=10, interval=0.02)
            delays.append(time.monotonic() - changed)
    # 1 s to notice plus the apply; generous for a loaded machine, far below the 60 s fallback.
    assert max(delays) < 3.0, delays


async def test_the_full_pass_puts_back_what_was_changed_in_kubernetes_by_hand(
    kube: KubeClient, database: Database, session: Session
) -> None:
    namespace = unique("drift")
    td = trust_domain(session, namespace)
    row = KubernetesConfigMap(name="pinned", trust_domain=td, data={"mode": "model"})
    save(session, row)
    path = f"/api/v1/namespaces/{namespace}/configmaps/pinned"
    async with sync_running(kube, database, resync_period=1.0):
        await eventually(lambda: _assert_ok(database, KubernetesConfigMap, row.id))
        patch = {"data": {"mode": "by hand"}}
        await kube.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

        async def restored() -> None:
            stored = await get(kube, path)
            assert stored is not None and stored["data"] == {"mode": "model"}

        await eventually(restored, timeout=10)


async def test_what_provisioning_does_and_why_it_fails_shows_as_kubernetes_events(
    kube: KubeClient, database: Database, session: Session
) -> None:
    namespace = unique("events")
    td = trust_domain(session, namespace)
    pod_row(session, td, "web-0")
    async with sync_running(kube, database, backoff_initial=0.2, backoff_max=0.5) as loop:

        async def provisioned() -> None:
            found = await kuberaven_events(kube, namespace, "web-0")
            assert [(e["type"], e["reason"]) for e in found] == [("Normal", "Provisioned")], found
            assert found[0]["involvedObject"]["kind"] == "Pod" and found[0]["involvedObject"]["uid"]
            assert found[0]["message"] == "KubernetesServiceInstance web-0 applied by kuberaven"

        await eventually(provisioned, timeout=60)
        # A quota of no ConfigMaps: the API server refuses the row's ConfigMap (403), again at each retry.
        quota = {"metadata": {"name": "no-configmaps"}, "spec": {"hard": {"configmaps": "0"}}}
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/resourcequotas", body=quota)
        save(session, KubernetesConfigMap(name="settings", trust_domain=td, data={"k": "v"}))

        async def failed_again_and_again() -> None:
            found = await kuberaven_events(kube, namespace, "settings")
            assert len(found) == 1 and (found[0]["type"], found[0]["reason"]) == ("Warning", "Failed"), found
            assert "exceeded quota" in found[0]["message"]
            assert found[0]["count"] >= 2  # one event, counted, not one per retry

        await eventually(failed_again_and_again, timeout=60)
        await loop.events.flush()
    # Full passes re-apply unchanged rows: they make no event.
    assert len(await kuberaven_events(kube, namespace, "web-0")) == 1
