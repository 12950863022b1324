"""The migrations, the models and a fresh database's one-step schema describe one schema, on SQLite and PostgreSQL.

* Alembic's own comparison of a database made by the migrations with the
  models' metadata: a table, column, index or constraint that one has and the
  other lacks (a model changed without its migration, a table module no longer
  imported by ``kuberaven.model``) is a difference.
* A fresh database is made in one step (model/schema.py), not by the
  migrations: what the inspector and the database's catalogue say of it
  (tables, columns and their types, nullability and server defaults, keys,
  indexes, unique constraints, foreign keys, triggers and their functions, the
  stored revisions) must be what they say of a database the migrations made.
* A database made in one step is Alembic's from there: downgrade, upgrade and a
  later migration work on it.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from kuberaven.model import Database, DatabaseUnavailable, Model, registry
from kuberaven.model.database import MIGRATIONS, script_heads
from kuberaven.model.history import HORIZON


def migrated(url: str) -> Database:
    """A database made by the migrations, one by one (the path of a database made before the one-step schema)."""
    database = Database(url)
    database.upgrade("0001")  # a named revision: Alembic, even on an empty database
    database.upgrade()  # no longer empty: Alembic again, to the heads
    return database


@pytest.fixture
def urls(database_url: str, request: pytest.FixtureRequest) -> tuple[str, str]:
    """Two new, empty databases of the same kind."""
    if database_url.startswith("sqlite"):
        return database_url, database_url.replace("kuberaven.db", "migrated.db")
    return database_url, request.getfixturevalue("postgres").create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def databases(urls: tuple[str, str]) -> Iterator[tuple[Database, Database]]:
    fresh = Database(urls[0])
    fresh.upgrade()
    by_migrations = migrated(urls[1])
    yield fresh, by_migrations
    fresh.dispose()
    by_migrations.dispose()


def test_the_migrations_make_exactly_the_models_tables(databases: tuple[Database, Database]) -> None:
    for database in databases:
        with database.engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Model.metadata)
        assert differences == []


def test_a_fresh_database_made_in_one_step_equals_one_made_by_the_migrations(
    databases: tuple[Database, Database],
) -> None:
    fresh, by_migrations = (schema_of(database) for database in databases)
    assert fresh["tables"].keys() == by_migrations["tables"].keys()
    for name, table in fresh["tables"].items():
        assert table == by_migrations["tables"][name], name
    assert fresh["triggers"] == by_migrations["triggers"]
    assert fresh["functions"] == by_migrations["functions"]
    assert fresh["versions"] == by_migrations["versions"]
    # Not an empty comparison: the history's triggers (and PostgreSQL's notifications), the example plugin's table,
    # the partial indexes' predicates.
    assert len(fresh["triggers"]) >= 24
    assert {index[0]: index[3] for index in fresh["tables"]["service"]["indexes"] if index[3] is not None} == {
        "uq_service_cluster_scoped_name": "trust_domain_id IS NULL"
    }
    assert {"site_history", "simpleexample_service_instance"} <= fresh["tables"].keys()


def test_a_fresh_database_made_in_one_step_records_the_heads_and_the_history_horizon(database: Database) -> None:
    locations = [MIGRATIONS / "versions", *registry.migration_locations()]
    with database.engine.connect() as connection:
        versions = set(connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
        horizons = connection.execute(sa.select(sa.func.count()).select_from(HORIZON)).scalar()
    assert versions == script_heads(locations)
    assert horizons == 1


def test_a_database_made_in_one_step_upgrades_and_downgrades_by_alembic(
    urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Database(urls[0])
    database.upgrade()
    made = schema_of(database)
    with monkeypatch.context() as patch:
        patch.setattr(Database, "_alembic", lambda *_: pytest.fail("prepare ran Alembic on a current schema"))
        database.prepare()  # at the heads: nothing to do
    assert schema_of(database) == made
    database.downgrade("0006")
    assert "site_history" not in sa.inspect(database.engine).get_table_names()
    database.upgrade()
    reference = migrated(urls[1])
    assert schema_of(database) == schema_of(reference)
    database.dispose()
    reference.dispose()


LATER = '''
"""a later migration (a test's)"""
import sqlalchemy as sa
from alembic import op

revision = "later"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("later_table", sa.Column("id", sa.Integer(), primary_key=True))


def downgrade() -> None:
    op.drop_table("later_table")
'''


def test_a_later_migration_upgrades_a_database_made_in_one_step(database: Database, tmp_path: Path) -> None:
    (tmp_path / "later.py").write_text(LATER)
    registry.register(migrations=tmp_path)
    try:
        database.upgrade()
        with database.engine.connect() as connection:
            versions = set(connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
        assert "later" in versions and "0007" not in versions
        assert "later_table" in sa.inspect(database.engine).get_table_names()
        database.downgrade("0007")
        assert "later_table" not in sa.inspect(database.engine).get_table_names()
    finally:
        registry._migrations.remove(tmp_path)


def test_a_database_with_tables_but_no_revision_is_left_to_alembic(urls: tuple[str, str]) -> None:
    # Not empty: the one-step schema never writes over a database it did not make; Alembic says why not.
    database = Database(urls[0])
    with database.engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE site (id INTEGER PRIMARY KEY)")
    with pytest.raises((sa.exc.DBAPIError, DatabaseUnavailable), match=r"(?i)already exists"):
        database.upgrade()
    assert [c["name"] for c in sa.inspect(database.engine).get_columns("site")] == ["id"]
    database.dispose()


# --- what a database's catalogue says of its schema ------------------------------------------------------


def schema_of(database: Database) -> dict[str, Any]:
    with database.engine.connect() as connection:
        inspector = sa.inspect(connection)
        return {
            "tables": {name: _table(inspector, name) for name in inspector.get_table_names()},
            "triggers": _triggers(connection),
            "functions": _functions(connection),
            "versions": set(connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars()),
        }


def _table(inspector: sa.Inspector, name: str) -> dict[str, Any]:
    dialect = inspector.bind.dialect
    return {
        "columns": {
            c["name"]: (c["type"].compile(dialect), c["nullable"], _text(c.get("default")))
            for c in inspector.get_columns(name)
        },
        "primary key": inspector.get_pk_constraint(name),
        # With a partial index's predicate, as the database reflects it (the models attach it per dialect).
        "indexes": sorted(
            (i["name"], tuple(i["column_names"]), i["unique"], _predicate(i.get("dialect_options", {}), dialect))
            for i in inspector.get_indexes(name)
        ),
        "unique": sorted((u["name"], tuple(u["column_names"])) for u in inspector.get_unique_constraints(name)),
        "foreign keys": sorted(
            (
                f["name"],
                tuple(f["constrained_columns"]),
                f["referred_table"],
                tuple(f["referred_columns"]),
                *sorted(f["options"].items()),
            )
            for f in inspector.get_foreign_keys(name)
        ),
        "checks": sorted((c["name"], _text(c["sqltext"])) for c in inspector.get_check_constraints(name)),
    }


def _predicate(options: dict[str, Any], dialect: sa.Dialect) -> str | None:
    # Spaces and brackets as each database prints them back: PostgreSQL wraps and casts the text it keeps.
    where = _text(options.get(f"{dialect.name}_where"))
    return None if where is None else re.sub(r"[()]|::text", "", where)


def _triggers(connection: sa.Connection) -> dict[tuple[str, str], Counter[str]]:
    if connection.dialect.name == "sqlite":
        query = "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'"
    else:
        query = (
            "SELECT t.tgname, c.relname, pg_get_triggerdef(t.oid) FROM pg_trigger t "
            "JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal"
        )
    return {(name, table): _words(sql) for name, table, sql in connection.exec_driver_sql(query)}


def _functions(connection: sa.Connection) -> dict[str, Counter[str]]:
    if connection.dialect.name == "sqlite":
        return {}
    query = (
        "SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = current_schema()"
    )
    return {name: _words(source) for name, source in connection.exec_driver_sql(query)}


def _words(sql: str) -> Counter[str]:
    """A statement's words and symbols, counted: the same columns and clauses whatever the columns' order
    (the migrations list a table's columns in the order the database has them, the models in theirs)."""
    return Counter(re.findall(r"[A-Za-z_][A-Za-z0-9_]*|[^\s\w\"]", sql))


def _text(value: object) -> str | None:
    return None if value is None else re.sub(r"\s+", " ", str(value)).strip()
