"""The migrations and the models describe one schema, on SQLite and PostgreSQL.

Alembic's own comparison of a freshly upgraded database with the models'
metadata: a table, column, index or constraint that one has and the other
lacks (a model changed without its migration, a table module no longer
imported by ``kuberaven.model``) is a difference.
"""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from kuberaven.model import Database, Model


def test_a_fresh_database_has_exactly_the_models_tables(database: Database) -> None:
    with database.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Model.metadata)
    assert differences == []
