"""Network backends (network/backends/): ``make_backend`` picks one by name."""

from __future__ import annotations

from ...model.database import Database
from ..backend import NetworkBackend


def make_backend(name: str, database: Database, cloud: str | None = None, project: str | None = None) -> NetworkBackend:
    """``embedded`` (kuberaven's tables) or ``openstack`` (``cloud``: a clouds.yaml entry, else OS_* env;
    ``project``: the OpenStack project its resources are made in, else the credentials' own)."""
    if name == "embedded":
        from .embedded import EmbeddedBackend

        return EmbeddedBackend(database)
    if name == "openstack":
        from .openstack import OpenStackBackend

        return OpenStackBackend.connect(cloud, project)
    raise ValueError(f"unknown network backend {name!r}: use embedded or openstack")
