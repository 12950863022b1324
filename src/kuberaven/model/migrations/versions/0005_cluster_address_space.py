"""Per-cluster network address space and OpenStack project on KubernetesService rows

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

COLUMNS = (
    ("pod_cidr", 49),
    ("service_cidr", 49),
    ("namespace_pool", 49),
    ("external_network", 255),
    ("openstack_project", 255),
)


def upgrade() -> None:
    with op.batch_alter_table("service") as batch:
        for name, length in COLUMNS:
            batch.add_column(sa.Column(name, sa.String(length), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("service") as batch:
        for name, _length in reversed(COLUMNS):
            batch.drop_column(name)
