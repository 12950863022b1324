"""First-run bootstrap (model/): the rows the original deployment pre-created.

KubernetesService "kubernetes" (the configured cluster), its TrustDomain
"default" and a default Site. Idempotent: rows that exist are left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from .base import STATUS_OK, Code, utcnow
from .cluster import KubernetesService, Site, TrustDomain

DEFAULT_CLUSTER = "kubernetes"
DEFAULT_TRUST_DOMAIN = "default"
DEFAULT_SITE = "mysite"
# Until the inventory sees the namespace (then "OK", inventory/objects.py): kuberaven never provisions it.
NOT_SEEN_YET = "Not seen in the cluster yet (mirrored, not managed by kuberaven)"


def bootstrap(session: Session, *, kubeconfig: str | None = None, context: str | None = None) -> KubernetesService:
    """Create what is missing; return the default cluster."""
    now = utcnow()
    cluster = session.scalar(sa.select(KubernetesService).where(KubernetesService.name == DEFAULT_CLUSTER))
    if cluster is None:
        cluster = KubernetesService(
            name=DEFAULT_CLUSTER,
            kind="kubernetes",
            kubeconfig=kubeconfig,
            context=context,
            backend_status=STATUS_OK,
            backend_code=Code.OK,
            enacted=now,
        )
        session.add(cluster)
        session.flush()
    if session.scalar(sa.select(sa.func.count()).select_from(Site)) == 0:
        session.add(
            Site(
                name=DEFAULT_SITE,
                login_base=DEFAULT_SITE,
                abbreviated_name=DEFAULT_SITE,
                backend_status=STATUS_OK,
                backend_code=Code.OK,
                enacted=now,
            )
        )
    default_namespace = sa.select(TrustDomain).where(
        TrustDomain.owner_id == cluster.id, TrustDomain.name == DEFAULT_TRUST_DOMAIN
    )
    if session.scalar(default_namespace) is None:
        # The namespace exists in every cluster: kuberaven mirrors it, never manages it.
        session.add(
            TrustDomain(name=DEFAULT_TRUST_DOMAIN, owner=cluster, xos_managed=False, backend_status=NOT_SEEN_YET)
        )
    return cluster
