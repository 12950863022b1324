"""history: a history table per model table, filled by triggers on UPDATE and DELETE

Each table users address gets ``<table>_history`` with all its columns (as
the database has them now) and the time each version held, and triggers
that copy the OLD row there when a row changes or goes. Existing rows keep
their ids and values; their history starts now (``history_horizon``).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from kuberaven.model.base import UTCDateTime, utcnow
from kuberaven.model.history import (
    ENDED_BY,
    HISTORY_ID,
    HORIZON_ID,
    SUFFIX,
    VALID_FROM,
    VALID_UNTIL,
    drop_statements,
    trigger_statements,
)

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The model tables of this revision (model/tables.py's USER_MODELS), in dependency order.
TRACKED = (
    "site",
    "service",
    "service_port",
    "trust_domain",
    "principal",
    "slice",
    "image",
    "kubernetes_config_map",
    "kubernetes_secret",
    "service_instance",
    "kubernetes_config_volume_mount",
    "kubernetes_secret_volume_mount",
)


def upgrade() -> None:
    connection = op.get_bind()
    inspector = sa.inspect(connection)
    for table in TRACKED:
        columns = inspector.get_columns(table)
        history = table + SUFFIX
        op.create_table(
            history,
            sa.Column(HISTORY_ID, sa.Integer(), nullable=False),
            *(sa.Column(c["name"], c["type"], nullable=True) for c in columns),
            sa.Column(VALID_FROM, sa.DateTime(), nullable=False),
            sa.Column(VALID_UNTIL, sa.DateTime(), nullable=False),
            sa.Column(ENDED_BY, sa.String(length=8), nullable=False),
            sa.PrimaryKeyConstraint(HISTORY_ID, name=op.f(f"pk_{history}")),
        )
        op.create_index(f"ix_{history}_id_valid_until", history, ["id", VALID_UNTIL])
        op.create_index(f"ix_{history}_valid_until", history, [VALID_UNTIL])
        names = [c["name"] for c in columns]
        json_columns = [c["name"] for c in columns if isinstance(c["type"], sa.JSON)]
        for statement in trigger_statements(connection.dialect.name, table, names, json_columns):
            op.execute(statement)
    horizon = op.create_table(
        "history_horizon",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("since", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history_horizon")),
    )
    op.bulk_insert(horizon, [{"id": HORIZON_ID, "since": utcnow()}])


def downgrade() -> None:
    connection = op.get_bind()
    for table in TRACKED:
        for statement in drop_statements(connection.dialect.name, table):
            op.execute(statement)
        op.drop_table(table + SUFFIX)
    op.drop_table("history_horizon")
