"""network translation: translation state, the embedded backend's resources and addresses

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "network_translation",
        sa.Column("cluster", sa.String(length=253), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("uid", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=True),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated", sa.Float(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_network_translation")),
        sa.UniqueConstraint("cluster", "kind", "uid", name=op.f("uq_network_translation_cluster_kind_uid")),
    )
    op.create_table(
        "network_resource",
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("attrs", sa.JSON(), nullable=False),
        sa.Column("cluster", sa.String(length=253), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["network_resource.id"],
            name=op.f("fk_network_resource_parent_id_network_resource"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_network_resource")),
    )
    with op.batch_alter_table("network_resource") as batch_op:
        batch_op.create_index(batch_op.f("ix_network_resource_cluster"), ["cluster"], unique=False)
        batch_op.create_index(batch_op.f("ix_network_resource_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_network_resource_parent_id"), ["parent_id"], unique=False)
    op.create_table(
        "network_address",
        sa.Column("subnet_id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=45), nullable=False),
        sa.Column("holder_id", sa.Integer(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["holder_id"],
            ["network_resource.id"],
            name=op.f("fk_network_address_holder_id_network_resource"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["subnet_id"],
            ["network_resource.id"],
            name=op.f("fk_network_address_subnet_id_network_resource"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_network_address")),
        sa.UniqueConstraint("subnet_id", "address", name=op.f("uq_network_address_subnet_id_address")),
    )
    with op.batch_alter_table("network_address") as batch_op:
        batch_op.create_index(batch_op.f("ix_network_address_holder_id"), ["holder_id"], unique=False)


def downgrade() -> None:
    op.drop_table("network_address")
    op.drop_table("network_resource")
    op.drop_table("network_translation")
