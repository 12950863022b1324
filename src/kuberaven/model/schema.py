"""A fresh database's schema in one step (model/), without Alembic.

    Database.upgrade() ──(the stored revisions are the heads)──► nothing to do
                       ──(an empty database)──► create_fresh(): this module
                       ──(anything else: an older schema)──► Alembic's migrations (model/migrations/)

A new database would otherwise run every migration since the first one
(0002's batch mode copies tables on SQLite) and import Alembic (about 10 MiB
kept in the daemon) for the very first start. Instead: the models' tables
(``Model.metadata``: kuberaven's, the history tables and the loaded plugins'),
plus what the migrations add that the metadata cannot say (the history
triggers and horizon of 0007; PostgreSQL's change notifications of 0002),
then the scripts' heads in ``alembic_version``, as ``alembic stamp heads``
writes them, so that Alembic upgrades the database from there when a later
migration comes. tests/integration/test_migrations.py checks that a database
made here equals one made by the migrations, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import history, journal, network, tables  # noqa: F401  (every table module: all tables in the metadata)
from .base import Model, utcnow
from .fields import with_predicate

# Alembic's version table, as Alembic creates it (alembic/runtime/migration.py).
VERSION_TABLE = sa.Table(
    "alembic_version",
    sa.MetaData(),
    sa.Column("version_num", sa.String(32), nullable=False),
    sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)
# One number for every kuberaven process making a schema at once on PostgreSQL (pg_advisory_xact_lock).
SCHEMA_LOCK = 0x6B7261766E  # "kravn"

# PostgreSQL's change notifications, as migration 0002 made them: the tables whose rows become Kubernetes
# objects (the sync loop listens on NOTIFY_CHANNEL, provisioning/notify.py), and the sync tombstones.
NOTIFY_CHANNEL = "kuberaven_sync"
NOTIFY_FUNCTION = "kuberaven_notify_sync"
NOTIFIED_TABLES = (
    "service",
    "service_port",
    "trust_domain",
    "principal",
    "slice",
    "service_instance",
    "kubernetes_config_map",
    "kubernetes_secret",
    "kubernetes_config_volume_mount",
    "kubernetes_secret_volume_mount",
)
TOMBSTONE_TABLE = "sync_tombstone"


def create_fresh(engine: sa.Engine, heads: set[str]) -> bool:
    """Make the whole schema at ``heads`` if the database has no table at all; whether it did.

    One transaction, taken before the database is looked at, so that processes starting together on
    one new database make it once: SQLite's ``BEGIN IMMEDIATE`` (its DDL is transactional, but the
    driver opens no transaction for it), PostgreSQL's advisory lock.
    """
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        elif connection.dialect.name == "postgresql":
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK)))
        if sa.inspect(connection).get_table_names():
            connection.rollback()
            return False
        try:
            create(connection, heads)
        except BaseException:
            connection.rollback()
            raise
        connection.commit()
    return True


def create(connection: Connection, heads: set[str]) -> None:
    """Every table, trigger and the history horizon, then ``heads`` as the stored revisions."""
    create_tables(connection)
    if connection.dialect.name == "postgresql":
        for statement in notify_statements():
            connection.exec_driver_sql(statement)
    for table in history.TRACKED:
        history.install_triggers(connection, table)
    history.set_horizon(connection, utcnow(), only_later=False)
    VERSION_TABLE.create(connection)
    connection.execute(sa.insert(VERSION_TABLE), [{"version_num": head} for head in sorted(heads)])


def create_tables(connection: Connection) -> None:
    """``Model.metadata.create_all``, but leaving the metadata as it was.

    create_all adds a foreign key of a cycle (service ⇄ trust_domain) by ALTER where the database can, and
    then marks it for no CREATE TABLE to include again: in a process that made a PostgreSQL schema, SQLite's
    tables (which cannot ALTER, so need it inline) would lack it.
    """
    later: list[sa.ForeignKeyConstraint] = []
    for table, inline in sa.schema.sort_tables_and_constraints(Model.metadata.sorted_tables):
        if table is None:
            later = list(inline)
            continue
        keys = None if not connection.dialect.supports_alter else inline  # None: every key, inline
        connection.execute(sa.schema.CreateTable(table, include_foreign_key_constraints=keys))
        for index in table.indexes:
            connection.execute(sa.schema.CreateIndex(with_predicate(index, connection.dialect.name)))
    if connection.dialect.supports_alter:
        for key in later:
            connection.execute(sa.schema.AddConstraint(key, isolate_from_table=False))


def notify_statements() -> list[str]:
    """PostgreSQL's NOTIFY triggers: only changes the sync loop acts on (a user's change moves
    ``updated``, a new managed row, the inventory clearing ``enacted`` for a re-creation, a tombstone)."""
    statements = [
        f"CREATE FUNCTION {NOTIFY_FUNCTION}() RETURNS trigger AS $$ BEGIN "
        f"PERFORM pg_notify('{NOTIFY_CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$ LANGUAGE plpgsql"
    ]
    for table in NOTIFIED_TABLES:
        statements += [
            f"CREATE TRIGGER kuberaven_sync_insert AFTER INSERT ON {table} FOR EACH ROW "
            f"WHEN (NEW.xos_managed) EXECUTE FUNCTION {NOTIFY_FUNCTION}()",
            f"CREATE TRIGGER kuberaven_sync_update AFTER UPDATE ON {table} FOR EACH ROW "
            "WHEN (NEW.xos_managed AND (NEW.updated IS DISTINCT FROM OLD.updated "
            f"OR (NEW.enacted IS NULL AND OLD.enacted IS NOT NULL))) EXECUTE FUNCTION {NOTIFY_FUNCTION}()",
        ]
    statements.append(
        f"CREATE TRIGGER kuberaven_sync_insert AFTER INSERT ON {TOMBSTONE_TABLE} FOR EACH ROW "
        f"EXECUTE FUNCTION {NOTIFY_FUNCTION}()"
    )
    return statements
