"""Alembic environment (model/migrations): runs on the connection Database.upgrade() passes in."""

from __future__ import annotations

from alembic import context

# schema.py imports every table module (history's among them), so every table is in the metadata: the package
# itself loads its modules on first use.
from kuberaven.model.schema import Model

target_metadata = Model.metadata
connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=target_metadata,
    # SQLite cannot ALTER most things: batch mode rebuilds the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
