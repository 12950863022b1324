"""deploy/: the in-cluster manifests are accepted by a real API server (server-side apply, dry run),
and the daemon does all its work under the ServiceAccount and role they define, and no more."""

from __future__ import annotations

import base64
import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import ApiError
from kuberaven.kube.resources import Discovery
from kuberaven.model import (
    Database,
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesSecret,
    KubernetesSecretVolumeMount,
    KubernetesServiceInstance,
    Principal,
    Service,
    ServicePort,
)
from kuberaven.model.database import remove
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace
from tests.helpers import daemon_running, eventually
from tests.integration.test_sync import PAUSE, get, pod_row, save, trust_domain, unique

MANIFESTS = Path(__file__).parents[2] / "deploy" / "kuberaven.yaml"


async def test_manifests_pass_server_side_dry_run(kube: KubeClient) -> None:
    documents = [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]
    kinds = [d["kind"] for d in documents]
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"} <= set(kinds)
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 2
    assert {"KUBERAVEN_LEADER_ELECT", "KUBERAVEN_TOKEN_FILE"} <= {e["name"] for e in container["env"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"

    # Namespaced objects need their namespace to exist even in a dry run.
    namespace = next(d["metadata"]["name"] for d in documents if d["kind"] == "Namespace")
    created = False
    with contextlib.suppress(ApiError):
        await create_namespace(kube, namespace)
        created = True
    discovery = Discovery(kube)
    try:
        for document in documents:
            try:
                await _apply(kube, discovery, document, dryRun="All")
            except ApiError as error:
                raise AssertionError(f"{document['kind']} {document['metadata']['name']} rejected: {error}") from None
    finally:
        if created:
            await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")


RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# What kuberaven never needs: no role may grant them ("resource/subresource").
NOT_GRANTED = [
    ("patch", "", "nodes"),  # nodes are listed and watched (port pools follow them), never changed
    ("create", "apps", "deployments"),
    ("delete", "apps", "replicasets"),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
    ("delete", "coordination.k8s.io", "leases"),
    ("create", "", "pods/exec"),
    ("update", "", "pods"),  # server-side apply and annotations are patches
    ("deletecollection", "", "pods"),
    ("get", "", "nodes/proxy"),
]
# The bindings an operator leaves out so that kuberaven reads no Secret (with KUBERAVEN_INVENTORY_SECRETS=false).
SECRET_BINDINGS = {"kuberaven-inventory-secrets", "kuberaven-provisioning-secrets"}
PROVISIONING = "kuberaven-provisioning"


async def test_the_daemon_does_its_work_under_its_service_account_and_no_more(
    kube: KubeClient, testenv: TestEnv, namespace: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """deploy/'s RBAC, applied for real, run as its ServiceAccount: inventory, provisioning, network, leadership;
    then without the Secret bindings and with the Secret inventory off."""
    rbac = [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d and d["kind"] in RBAC_KINDS]
    account = next(d["metadata"] for d in rbac if d["kind"] == "ServiceAccount")
    await _until_not_terminating(kube, account["namespace"])  # the dry-run test above may have just deleted it
    discovery = Discovery(kube)
    try:
        for document in rbac:
            await _apply(kube, discovery, document)
        kubeconfig = _kubeconfig_with_token(testenv, tmp_path, await _token_of(kube, **account))
        for verb, group, resource in NOT_GRANTED:
            assert not await _allowed(kube, account, verb, group, resource), f"a role grants {verb} {resource}"
        await _do_the_work_as(kube, kubeconfig, account["namespace"], namespace, tmp_path)

        for document in rbac:
            if document["kind"] == "ClusterRoleBinding" and document["metadata"]["name"] in SECRET_BINDINGS:
                await kube.request("DELETE", await _path(discovery, document))
        await _refused(
            kube, account, [("get", "secrets", None), ("list", "secrets", None), ("watch", "secrets", "kube-system")]
        )
        await _work_without_secrets(kube, kubeconfig, account["namespace"], tmp_path_factory.mktemp("no-secrets"))

        await _provisioning_confined_to(kube, discovery, rbac, account, namespace)
    finally:
        for document in reversed(rbac):
            with contextlib.suppress(ApiError):
                await kube.request("DELETE", await _path(discovery, document))


async def _work_without_secrets(kube: KubeClient, kubeconfig: Path, lease_namespace: str, tmp: Path) -> None:
    """KUBERAVEN_INVENTORY_SECRETS=false: the inventory syncs (ready) without Secrets; provisioning still works."""
    managed = unique("rbac-nosecrets")
    env = {"KUBERAVEN_LEASE_NAMESPACE": lease_namespace, "KUBERAVEN_INVENTORY_SECRETS": "false"}
    with daemon_running(kubeconfig, tmp, "--leader-elect", env=env) as daemon:
        database = Database(daemon.database_url)
        try:
            with database.sessions() as session:
                save(
                    session,
                    KubernetesConfigMap(
                        name="settings", trust_domain=trust_domain(session, managed), data={"a.conf": "one"}
                    ),
                )

            async def provisioned() -> None:
                assert await get(kube, f"/api/v1/namespaces/{managed}/configmaps/settings") is not None

            await eventually(provisioned, timeout=60)
            with database.session() as session:
                assert session.scalar(sa.select(sa.func.count()).select_from(KubernetesSecret)) == 0
        finally:
            database.dispose()
            with contextlib.suppress(ApiError):
                await kube.request("DELETE", f"/api/v1/namespaces/{managed}")
    output = daemon.output()
    assert not refusals(output), output


# The start of a kuberaven log line (text format): its milliseconds are no status code.
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")


def refusals(output: str) -> list[str]:
    """The log lines that say the API server refused something: a 403 status or "forbidden". The 403 must
    stand alone: a timestamp's milliseconds (``12:00:01,403``), a port or a path may hold those digits."""
    return [
        line
        for line in output.splitlines()
        if re.search(r"(?<![\w.,:/-])403(?!\w)", TIMESTAMP.sub("", line)) or "forbidden" in line.lower()
    ]


async def _provisioning_confined_to(
    kube: KubeClient, discovery: Discovery, rbac: list[dict[str, Any]], account: dict[str, Any], namespace: str
) -> None:
    """The shipped binding is cluster-wide (the model names the namespaces); docs/operations.md's alternative,
    a RoleBinding per namespace, confines provisioning to them."""
    assert await _allowed(kube, account, "create", "", "pods", "kube-system"), "the shipped role is cluster-wide"
    binding = next(d for d in rbac if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == PROVISIONING)
    await kube.request("DELETE", await _path(discovery, binding))
    await kube.request(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        body={
            "metadata": {"name": PROVISIONING},
            "roleRef": binding["roleRef"],
            "subjects": binding["subjects"],
        },
    )

    async def granted_in_namespace() -> None:
        # The RBAC authorizer learns of the new RoleBinding through its informer, a moment later.
        assert await _allowed(kube, account, "create", "", "pods", namespace)

    await eventually(granted_in_namespace, timeout=10)
    await _refused(kube, account, [("create", "pods", "kube-system"), ("create", "namespaces", None)])


async def _do_the_work_as(kube: KubeClient, kubeconfig: Path, lease_namespace: str, namespace: str, tmp: Path) -> None:
    # Made by someone else: an external pod to inventory, a LoadBalancer Service whose status to set.
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        body={
            "metadata": {"name": "outside", "labels": {"app": "outside"}},
            "spec": {"containers": [{"name": "main", "image": PAUSE}]},
        },
    )
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/services",
        body={
            "metadata": {"name": "front"},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": "outside"},
                "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
            },
        },
    )
    managed = unique("rbac")
    env = {"KUBERAVEN_LEASE_NAMESPACE": lease_namespace}
    with daemon_running(kubeconfig, tmp, "--leader-elect", env=env) as daemon:
        database = Database(daemon.database_url)
        try:
            with database.sessions() as session:
                td = trust_domain(session, managed)
                config = KubernetesConfigMap(name="settings", trust_domain=td, data={"a.conf": "one"})
                secret = KubernetesSecret(name="creds", trust_domain=td, data={"password": "s3cret"})
                principal = Principal(name="runner", trust_domain=td)
                service = Service(name="web", trust_domain=td)
                save(session, config, secret, principal, service)
                save(session, ServicePort(name="http", service=service, internal_port=8080))
                row = pod_row(session, td, "web-0", principal=principal, service=service)
                save(
                    session,
                    KubernetesConfigVolumeMount(config=config, service_instance=row, mount_path="/etc/app"),
                    KubernetesSecretVolumeMount(secret=secret, service_instance=row, mount_path="/run/secrets/app"),
                )

            async def all_done() -> None:
                pod = await get(kube, f"/api/v1/namespaces/{managed}/pods/web-0")
                assert pod is not None and pod["status"].get("phase") == "Running", "the managed pod runs"
                assert pod["spec"]["serviceAccountName"] == "runner"
                assert await get(kube, f"/api/v1/namespaces/{managed}/services/web") is not None
                front = await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/front")
                assert front["status"].get("loadBalancer", {}).get("ingress"), "the floating IP is in the status"
                with database.session() as s:
                    found = s.scalar(
                        sa.select(KubernetesServiceInstance).where(
                            KubernetesServiceInstance.name == "outside",
                            KubernetesServiceInstance.xos_managed.is_(False),
                        )
                    )
                    assert found is not None and found.pod_ip, "the external pod is inventoried with its IP"

            await eventually(all_done, timeout=90)
            with database.sessions() as session:
                remove(session, session.get_one(KubernetesServiceInstance, row.id))

            async def pod_deleted() -> None:
                assert await get(kube, f"/api/v1/namespaces/{managed}/pods/web-0") is None

            await eventually(pod_deleted, timeout=60)
        finally:
            database.dispose()
            with contextlib.suppress(ApiError):
                await kube.request("DELETE", f"/api/v1/namespaces/{managed}")
    output = daemon.output()
    assert f"took leadership of {lease_namespace}/kuberaven" in output
    assert not refusals(output), output


async def _apply(kube: KubeClient, discovery: Discovery, document: dict[str, Any], **params: str) -> None:
    await kube.request(
        "PATCH",
        await _path(discovery, document),
        params={"fieldManager": "kuberaven-test", "force": "true", **params},
        body=document,
        content_type="application/apply-patch+yaml",
    )


async def _path(discovery: Discovery, document: dict[str, Any]) -> str:
    resource = await discovery.resolve(document["apiVersion"], document["kind"])
    meta = document["metadata"]
    return resource.path(meta.get("namespace") if resource.namespaced else None, meta["name"])


async def _until_not_terminating(kube: KubeClient, name: str) -> None:
    async def settled() -> None:
        found = await get(kube, f"/api/v1/namespaces/{name}")
        assert found is None or found["status"].get("phase") != "Terminating"

    await eventually(settled, timeout=90)


async def _token_of(kube: KubeClient, name: str, namespace: str, **_: Any) -> str:
    """The ServiceAccount's token, from the Secret the token controller makes (Kubernetes 1.20)."""

    async def token() -> str:
        account = await kube.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}")
        assert account.get("secrets"), "the token controller has not made the token yet"
        secret = await kube.request("GET", f"/api/v1/namespaces/{namespace}/secrets/{account['secrets'][0]['name']}")
        assert secret.get("data", {}).get("token")
        return base64.b64decode(secret["data"]["token"]).decode()

    return await eventually(token, timeout=30)


def _kubeconfig_with_token(testenv: TestEnv, tmp: Path, token: str) -> Path:
    config = yaml.safe_load(testenv.control_plane.kubeconfig.read_text())
    config["users"] = [{"name": "kuberaven", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "kuberaven"
    path = tmp / "service-account.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def _allowed(
    kube: KubeClient, account: dict[str, Any], verb: str, group: str, resource: str, namespace: str | None = None
) -> bool:
    """A SubjectAccessReview for the ServiceAccount; ``resource`` may name a subresource ("pods/exec")."""
    name, _, subresource = resource.partition("/")
    attributes = {
        "verb": verb,
        "group": group,
        "resource": name,
        "subresource": subresource,
        "namespace": namespace or "",
    }
    review = await kube.request(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{account['namespace']}:{account['name']}",
                "resourceAttributes": attributes,
            },
        },
    )
    return bool(review["status"].get("allowed"))


async def _refused(kube: KubeClient, account: dict[str, Any], requests: list[tuple[str, str, str | None]]) -> None:
    """Each (verb, core resource, namespace) is refused once the RBAC change has reached the authorizer."""

    async def all_refused() -> None:
        for verb, resource, namespace in requests:
            assert not await _allowed(kube, account, verb, "", resource, namespace), f"{verb} {resource} allowed"

    await eventually(all_refused, timeout=10)
