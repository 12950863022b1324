"""provisioning: adopt flag, sync tombstones, change notifications

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BOOKKEEPING_TABLES = (
    "site",
    "service",
    "service_port",
    "trust_domain",
    "principal",
    "slice",
    "image",
    "service_instance",
    "kubernetes_config_map",
    "kubernetes_secret",
    "kubernetes_config_volume_mount",
    "kubernetes_secret_volume_mount",
)
# Rows of these tables become Kubernetes objects: the sync loop is woken when one changes.
SYNCED_TABLES = (
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
CHANNEL = "kuberaven_sync"


def upgrade() -> None:
    for table in BOOKKEEPING_TABLES:
        with op.batch_alter_table(table) as batch_op:
            batch_op.add_column(sa.Column("adopt", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        "sync_tombstone",
        sa.Column("model", sa.String(length=64), nullable=False),
        sa.Column("row_id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=True),
        sa.Column("namespace", sa.String(length=63), nullable=True),
        sa.Column("name", sa.String(length=253), nullable=True),
        sa.Column("applied_objects", sa.JSON(), nullable=True),
        sa.Column("controller_kind", sa.String(length=63), nullable=True),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sync_tombstone")),
    )
    with op.batch_alter_table("sync_tombstone") as batch_op:
        batch_op.create_index(batch_op.f("ix_sync_tombstone_cluster_id"), ["cluster_id"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        _create_notify_triggers()


def _create_notify_triggers() -> None:
    # Only changes the sync loop acts on: a user's change (updated moves), a new
    # managed row, the inventory asking for a re-creation (enacted cleared), a
    # delete; not the inventory's stream of observed fields.
    op.execute(
        f"""
        CREATE FUNCTION kuberaven_notify_sync() RETURNS trigger AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME);
            RETURN NULL;
        END $$ LANGUAGE plpgsql
        """
    )
    for table in SYNCED_TABLES:
        op.execute(
            f"CREATE TRIGGER kuberaven_sync_insert AFTER INSERT ON {table} FOR EACH ROW "
            "WHEN (NEW.xos_managed) EXECUTE FUNCTION kuberaven_notify_sync()"
        )
        op.execute(
            f"CREATE TRIGGER kuberaven_sync_update AFTER UPDATE ON {table} FOR EACH ROW "
            "WHEN (NEW.xos_managed AND (NEW.updated IS DISTINCT FROM OLD.updated "
            "OR (NEW.enacted IS NULL AND OLD.enacted IS NOT NULL))) EXECUTE FUNCTION kuberaven_notify_sync()"
        )
    op.execute(
        "CREATE TRIGGER kuberaven_sync_insert AFTER INSERT ON sync_tombstone FOR EACH ROW "
        "EXECUTE FUNCTION kuberaven_notify_sync()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in (*SYNCED_TABLES, "sync_tombstone"):
            op.execute(f"DROP TRIGGER IF EXISTS kuberaven_sync_insert ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS kuberaven_sync_update ON {table}")
        op.execute("DROP FUNCTION IF EXISTS kuberaven_notify_sync()")
    op.drop_table("sync_tombstone")
    for table in BOOKKEEPING_TABLES:
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_column("adopt")
