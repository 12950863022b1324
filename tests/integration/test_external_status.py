"""The status of rows kuberaven mirrors but does not manage (inventory/), against the local control plane:
a row made before the inventory saw its object (bootstrap's "default" namespace, an unmanaged row a user
applied) says it is in step once the object is seen, never "Provisioning in progress" for ever."""

from __future__ import annotations

import sqlalchemy as sa

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, KubernetesService, TrustDomain
from kuberaven.model.base import BACKEND_STATUS_NEW
from kuberaven.model.bootstrap import NOT_SEEN_YET
from tests.helpers import eventually, inventory_running


def status(database: Database, name: str) -> tuple[str, int]:
    with database.session() as session:
        row = session.scalar(sa.select(TrustDomain).where(TrustDomain.name == name))
        assert row is not None, name
        return row.backend_status, row.backend_code


async def test_unmanaged_rows_made_before_their_namespace_is_seen_become_in_step(
    kube: KubeClient, namespace: str, database: Database
) -> None:
    assert status(database, "default") == (NOT_SEEN_YET, 0)  # bootstrap's row: not provisioning anything
    with database.session() as session:
        cluster = session.scalar(sa.select(KubernetesService))
        session.add(TrustDomain(name=namespace, owner=cluster, xos_managed=False))
    assert status(database, namespace) == (BACKEND_STATUS_NEW, 0)
    async with inventory_running(kube, database):
        await eventually(lambda: in_step(database, "default"))
        await eventually(lambda: in_step(database, namespace))


def in_step(database: Database, name: str) -> None:
    assert status(database, name) == ("OK", 1), status(database, name)


def test_the_upgrade_marks_rows_seen_before_as_in_step(database: Database) -> None:
    """A database whose inventory saw "default" before this fix: the migration gives it its status."""
    with database.session() as session:
        stuck = session.scalar(sa.select(TrustDomain).where(TrustDomain.name == "default"))
        assert stuck is not None
        stuck.uid, stuck.backend_status = "0c6f-uid", BACKEND_STATUS_NEW
        managed = TrustDomain(name="mine", owner=stuck.owner, uid="1d7a-uid")  # kuberaven's own: left alone
        session.add(managed)
    database.downgrade("0005")  # back to the revision before the fix (a plugin's branch kept)
    database.upgrade()
    assert status(database, "default") == ("OK", 1)
    assert status(database, "mine") == (BACKEND_STATUS_NEW, 0)
