"""Network backends (network/backends/): ``make_backend`` picks one by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ...model.database import Database
from ..drivers import NetworkBackend

EMBEDDED: Final = "embedded"
OPENSTACK: Final = "openstack"


@dataclass(frozen=True)
class BackendOptions:
    """Which backend the translation drives (settings: network_backend, network_cloud, network_openstack_project)."""

    backend: Literal["embedded", "openstack"] = EMBEDDED
    cloud: str | None = None  # openstack: a clouds.yaml entry; None: the OS_* variables
    # openstack: the project its resources are made in (a KubernetesService row's openstack_project wins);
    # None: the credentials' own.
    openstack_project: str | None = None
    # openstack: the Octavia provider load balancers are made with (amphora, ovn, …); None: the cloud's default.
    lb_provider: str | None = None
    # openstack: OVN's northbound database (Neutron's [ovn] ovn_nb_connection: tcp:IP:6641, unix:PATH); with it
    # the ovn provider's load balancers get a ClientIP Service's affinity on OVN's own rows. None: none.
    ovn_nb_connection: str | None = None


def make_backend(
    name: str,
    database: Database,
    cloud: str | None = None,
    project: str | None = None,
    lb_provider: str | None = None,
    ovn_nb_connection: str | None = None,
) -> NetworkBackend:
    """``embedded`` (kuberaven's tables) or ``openstack`` (``cloud``: a clouds.yaml entry, else OS_* env;
    ``project``: the OpenStack project its resources are made in, else the credentials' own;
    ``lb_provider``: Octavia's provider for new load balancers, else the cloud's default;
    ``ovn_nb_connection``: OVN's northbound database, for the ovn provider's ClientIP affinity)."""
    if name == EMBEDDED:
        from .embedded import EmbeddedBackend

        return EmbeddedBackend(database)
    if name == OPENSTACK:
        from .openstack import OpenStackBackend

        return OpenStackBackend.connect(cloud, project, lb_provider, ovn_nb_connection)
    raise ValueError(f"unknown network backend {name!r}: use embedded or openstack")
