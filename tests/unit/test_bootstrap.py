"""The first-run bootstrap (model/bootstrap.py), written in SQLAlchemy Core, makes the rows the ORM would make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from kuberaven.model import Database
from kuberaven.model.base import STATUS_OK, SyncCode, table_of, utcnow
from kuberaven.model.bootstrap import (
    CLUSTER_KIND,
    DEFAULT_CLUSTER,
    DEFAULT_SITE,
    DEFAULT_TRUST_DOMAIN,
    NOT_SEEN_YET,
    bootstrap,
)
from kuberaven.model.cluster import KubernetesService, Site, TrustDomain

TIMES = ("created", "updated", "enacted")  # when each row was made: compared for presence, not value
TABLES = (KubernetesService, Site, TrustDomain)


def rows(database: Database) -> dict[str, list[dict[str, Any]]]:
    """Every row of the bootstrap's tables, each column as stored (the times: whether set)."""
    found: dict[str, list[dict[str, Any]]] = {}
    with database.engine.connect() as connection:
        for model in TABLES:
            table = table_of(model)
            found[table.name] = [
                {key: (value is not None if key in TIMES else value) for key, value in row._mapping.items()}
                for row in connection.execute(sa.select(table).order_by(table.c.id))
            ]
    return found


def made_through_the_orm(database: Database, kubeconfig: str, context: str) -> None:
    """The rows as the bootstrap made them before it was written in Core: models constructed and flushed."""
    now = utcnow()
    with database.session() as session:
        cluster = KubernetesService(
            name=DEFAULT_CLUSTER,
            kind=CLUSTER_KIND,
            kubeconfig=kubeconfig,
            context=context,
            backend_status=STATUS_OK,
            backend_code=SyncCode.OK,
            enacted=now,
        )
        session.add(cluster)
        session.flush()
        session.add(
            Site(
                name=DEFAULT_SITE,
                login_base=DEFAULT_SITE,
                abbreviated_name=DEFAULT_SITE,
                backend_status=STATUS_OK,
                backend_code=SyncCode.OK,
                enacted=now,
            )
        )
        session.add(
            TrustDomain(name=DEFAULT_TRUST_DOMAIN, owner=cluster, xos_managed=False, backend_status=NOT_SEEN_YET)
        )


def test_the_bootstrap_makes_the_rows_the_orm_made(tmp_path: Path) -> None:
    core, orm = Database(f"sqlite:///{tmp_path / 'core.db'}"), Database(f"sqlite:///{tmp_path / 'orm.db'}")
    try:
        core.prepare("/etc/kubeconfig", "prod")
        orm.upgrade()
        made_through_the_orm(orm, "/etc/kubeconfig", "prod")
        made = rows(core)
        assert made == rows(orm)
        assert [row["leaf_model_name"] for row in made["service"]] == ["KubernetesService"]
    finally:
        core.dispose()
        orm.dispose()


def test_the_bootstrap_leaves_what_exists_and_makes_what_is_missing(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'k.db'}")
    try:
        database.prepare()
        first = rows(database)
        with database.engine.begin() as connection:
            connection.execute(sa.delete(table_of(Site)))
            assert bootstrap(connection) == first["service"][0]["id"]
        again = rows(database)
        assert again["service"] == first["service"] and again["trust_domain"] == first["trust_domain"]
        assert [row["name"] for row in again["site"]] == [DEFAULT_SITE]
    finally:
        database.dispose()
