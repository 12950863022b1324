"""First-run bootstrap (model/): the rows the original deployment pre-created.

KubernetesService "kubernetes" (the configured cluster), its TrustDomain
"default" and a default Site. Idempotent: rows that exist are left alone.

Written with SQLAlchemy Core on the models' own tables, not through the
ORM: every command runs it (Database.prepare), and the ORM's first use
configures every mapper (45-70 ms, a tenth of a `kuberaven get`), which a
command that maps no row (`db upgrade`, a `get` of a kind without rows)
then never pays. The rows are the ones the models would make: the columns'
defaults apply on INSERT as when a model is constructed, and the cluster
carries the polymorphic identity a flush would write
(tests/unit/test_bootstrap.py compares them with rows made through the ORM).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import STATUS_OK, SyncCode, table_of, utcnow
from .cluster import KubernetesService, Site, TrustDomain

DEFAULT_CLUSTER = "kubernetes"
DEFAULT_TRUST_DOMAIN = "default"
DEFAULT_SITE = "mysite"
CLUSTER_KIND = "kubernetes"
# Until the inventory sees the namespace (then "OK", inventory/objects.py): kuberaven never provisions it.
NOT_SEEN_YET = "Not seen in the cluster yet (mirrored, not managed by kuberaven)"


def bootstrap(connection: Connection, *, kubeconfig: str | None = None, context: str | None = None) -> int:
    """Create what is missing; return the default cluster's id."""
    now = utcnow()
    in_step: dict[str, Any] = {"backend_status": STATUS_OK, "backend_code": SyncCode.OK, "enacted": now}
    cluster_id = _default_cluster(connection)
    if cluster_id is None:
        cluster: dict[str, Any] = {"name": DEFAULT_CLUSTER, "kind": CLUSTER_KIND, "kubeconfig": kubeconfig}
        cluster_id = _insert(connection, KubernetesService, {**cluster, "context": context, **in_step})
    sites = table_of(Site)
    if connection.scalar(sa.select(sa.func.count()).select_from(sites)) == 0:
        names = {"name": DEFAULT_SITE, "login_base": DEFAULT_SITE, "abbreviated_name": DEFAULT_SITE}
        _insert(connection, Site, {**names, **in_step})
    namespaces = table_of(TrustDomain)
    default_namespace = sa.select(namespaces.c.id).where(
        namespaces.c.owner_id == cluster_id, namespaces.c.name == DEFAULT_TRUST_DOMAIN
    )
    if connection.scalar(default_namespace) is None:
        # The namespace exists in every cluster: kuberaven mirrors it, never manages it.
        namespace = {"name": DEFAULT_TRUST_DOMAIN, "owner_id": cluster_id, "xos_managed": False}
        _insert(connection, TrustDomain, {**namespace, "backend_status": NOT_SEEN_YET})
    return cluster_id


def _default_cluster(connection: Connection) -> int | None:
    """The id of the KubernetesService named "kubernetes" (a Service of another kind by that name is not it)."""
    services, mapper = table_of(KubernetesService), KubernetesService.__mapper__
    kinds = [m.polymorphic_identity for m in mapper.self_and_descendants]
    kind_column = services.c[_polymorphic_column(KubernetesService)]
    query = sa.select(services.c.id).where(services.c.name == DEFAULT_CLUSTER, kind_column.in_(kinds))
    found: int | None = connection.scalar(query)
    return found


def _insert(connection: Connection, model: type[Any], values: dict[str, Any]) -> int:
    """INSERT one row of ``model`` (its polymorphic identity too, if it has one); its new id."""
    mapper = model.__mapper__
    if mapper.polymorphic_identity is not None:
        values = {**values, _polymorphic_column(model): mapper.polymorphic_identity}
    inserted = connection.execute(sa.insert(table_of(model)).values(values)).inserted_primary_key
    assert inserted is not None  # one row of a table with an integer primary key
    return int(inserted[0])


def _polymorphic_column(model: type[Any]) -> str:
    column = model.__mapper__.polymorphic_on
    if not isinstance(column, sa.Column):
        raise TypeError(f"{model.__name__}: its discriminator is not a column of its table")
    return column.name
