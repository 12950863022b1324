"""kubectl_state in the original's documented values: CREATED | UPDATED | DELETED

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_STATE = sa.column("kubectl_state", sa.String(16))
_INSTANCES = sa.table("service_instance", _STATE)


def upgrade() -> None:
    op.execute(_INSTANCES.update().where(_STATE.is_not(None)).values(kubectl_state=sa.func.upper(_STATE)))


def downgrade() -> None:
    op.execute(_INSTANCES.update().where(_STATE.is_not(None)).values(kubectl_state=sa.func.lower(_STATE)))
