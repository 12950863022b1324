"""deploy/: the in-cluster manifests are accepted by a real API server (server-side apply, dry run)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import yaml

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import ApiError
from kuberaven.kube.resources import Discovery
from kuberaven.testing.namespaces import create_namespace

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
            resource = await discovery.resolve(document["apiVersion"], document["kind"])
            meta = document["metadata"]
            path = resource.path(meta.get("namespace") if resource.namespaced else None, meta["name"])
            try:
                await kube.request(
                    "PATCH", path, params={"fieldManager": "kuberaven-test", "dryRun": "All", "force": "true"},
                    body=document, content_type="application/apply-patch+yaml",
                )  # fmt: skip
            except ApiError as error:
                raise AssertionError(f"{document['kind']} {meta['name']} rejected: {error}") from None
    finally:
        if created:
            await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")
