"""Each cluster's own address space and OpenStack project (KubernetesService rows ──► network translation)."""

from __future__ import annotations

import ipaddress
import re
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, KubernetesService
from kuberaven.model.applying import apply_documents
from kuberaven.model.parsing import DocumentError, parse_documents
from kuberaven.testing.env import TestEnv
from tests.helpers import daemon_running, eventually
from tests.integration.test_network import _annotated


def apply(database: Database, text: str) -> None:
    with database.session() as session:
        apply_documents(session, parse_documents(text, "clusters.yaml"), "clusters.yaml")


def clusters(database: Database) -> dict[str, tuple[str | None, ...]]:
    with database.session() as session:
        rows = session.scalars(sa.select(KubernetesService))
        return {r.name: (r.pod_cidr, r.service_cidr, r.namespace_pool, r.openstack_project) for r in rows}


def test_clusters_in_one_project_may_not_share_addresses(database: Database) -> None:
    apply(database, "kind: KubernetesService\nname: east\npod_cidr: 10.10.0.0/16\nservice_cidr: 10.11.0.0/24\n")
    before = clusters(database)
    refusals = [
        (
            "kind: KubernetesService\nname: west\npod_cidr: 10.10.128.0/17\n",
            "KubernetesService.pod_cidr: 10.10.128.0/17 overlaps pod_cidr 10.10.0.0/16 of cluster 'east'",
        ),
        (
            "kind: KubernetesService\nname: west\npod_cidr: 10.20.0.0/16\nservice_cidr: 10.20.5.0/24\n",
            "KubernetesService.service_cidr: 10.20.5.0/24 overlaps the cluster's pod_cidr 10.20.0.0/16",
        ),
        (
            "kind: KubernetesService\nname: west\nnamespace_pool: 10.64.0.0/33\n",
            "KubernetesService.namespace_pool: '10.64.0.0/33' is not a network in CIDR notation",
        ),
        (
            "kind: KubernetesService\nname: west\npod_cidr: 10.30.0.1/16\n",
            "KubernetesService.pod_cidr: '10.30.0.1/16' is not a network in CIDR notation",
        ),
        # Two new clusters in one file clash with each other, not with anything stored.
        (
            "- kind: KubernetesService\n  name: north\n  pod_cidr: 10.40.0.0/16\n"
            "- kind: KubernetesService\n  name: south\n  pod_cidr: 10.40.0.0/24\n",
            "overlaps pod_cidr 10.40.0.0/16 of cluster 'north'",
        ),
    ]
    for text, says in refusals:
        with pytest.raises(DocumentError) as refused:
            apply(database, text)
        assert says in str(refused.value)
        assert clusters(database) == before  # nothing stored, nothing changed
    # Another project may reuse the addresses, as another cloud would.
    apply(database, "kind: KubernetesService\nname: west\npod_cidr: 10.10.0.0/16\nopenstack_project: team-west\n")
    assert clusters(database)["west"] == ("10.10.0.0/16", None, None, "team-west")
    # A cluster changed is checked against the others, not against itself.
    apply(database, "kind: KubernetesService\nname: east\npod_cidr: 10.10.0.0/16\nservice_cidr: 10.12.0.0/24\n")
    with pytest.raises(DocumentError, match=re.escape("overlaps pod_cidr 10.10.0.0/16 of cluster 'east'")):
        apply(database, "kind: KubernetesService\nname: west\nopenstack_project: null\n")


async def test_the_cluster_row_gives_the_translation_its_own_namespace_pool(
    testenv: TestEnv, kube: KubeClient, tmp_path: Path
) -> None:
    database = Database(f"sqlite:///{tmp_path}/k.db")
    database.prepare()
    apply(database, "kind: KubernetesService\nname: kubernetes\nnamespace_pool: 10.210.0.0/16\n")
    database.dispose()
    name = f"pooled-{uuid.uuid4().hex[:6]}"
    env = {"KUBERAVEN_NETWORK_SUBNET_MODE": "namespace"}  # the setting's pool is 10.64.0.0/12
    with daemon_running(testenv.control_plane.kubeconfig, tmp_path, env=env):
        await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
        try:
            state = await eventually(lambda: _annotated(kube, f"/api/v1/namespaces/{name}"), timeout=60)
        finally:
            await kube.request("DELETE", f"/api/v1/namespaces/{name}")
    assert ipaddress.IPv4Network(state["cidr"]).subnet_of(ipaddress.IPv4Network("10.210.0.0/16"))
