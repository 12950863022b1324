"""Rows kuberaven mirrors but does not manage, already seen in the cluster, say so (not "Provisioning in progress")

The default TrustDomain that bootstrap makes, and any unmanaged row a user
applied before the inventory found its object, kept the new-row status
forever: the inventory set only uid and resourceVersion on rows it found.
It now records them as in step when it sees their object; this does the
same for the rows it saw before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# The tables of the objects the inventory mirrors one row each (inventory/objects.py).
MIRRORED = ("trust_domain", "principal", "service", "kubernetes_config_map", "kubernetes_secret")


def upgrade() -> None:
    for name in MIRRORED:
        table = sa.table(
            name, sa.column("xos_managed"), sa.column("uid"), sa.column("backend_code"), sa.column("backend_status")
        )
        op.execute(
            table.update()
            .where(table.c.xos_managed.is_(False), table.c.uid.is_not(None), table.c.backend_code == 0)
            .values(backend_code=1, backend_status="OK")
        )


def downgrade() -> None:
    pass  # a status only: nothing to undo
