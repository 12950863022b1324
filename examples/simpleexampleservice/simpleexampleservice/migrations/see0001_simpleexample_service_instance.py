"""simpleexampleservice: the instance table (a branch of its own on kuberaven's schema)

Revision ID: see0001
Revises: (none; depends on kuberaven 0002)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "see0001"
down_revision = None
branch_labels = ("simpleexampleservice",)
depends_on = "0002"


def upgrade() -> None:
    op.create_table(
        "simpleexample_service_instance",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("trust_domain_id", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("adopt", sa.Boolean(), nullable=False, server_default=sa.false()),  # Bookkeeping's
        sa.ForeignKeyConstraint(
            ["trust_domain_id"],
            ["trust_domain.id"],
            ondelete="CASCADE",
            name="fk_simpleexample_service_instance_trust_domain_id_trust_domain",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_simpleexample_service_instance"),
        sa.UniqueConstraint("trust_domain_id", "name", name="uq_simpleexample_service_instance_trust_domain_id_name"),
    )


def downgrade() -> None:
    op.drop_table("simpleexample_service_instance")
