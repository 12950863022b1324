"""The port status driver (network/drivers/): what the cloud reports of pods' ports.

    activation.py (every period) ──► PortStatusDriver.port_statuses ──► PortStatus by port id

A backend has it or not, chosen when it is built (NetworkBackend.port_status):
the openstack backend's ports are DOWN until the node's OVN binds them; the
embedded backend has no data path, so nothing to report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

BINDING_FAILED = "binding_failed"  # Neutron's binding:vif_type of a port no mechanism driver could bind


@dataclass(frozen=True)
class PortStatus:
    """A port's status as the backend reports it (network/activation.py follows it)."""

    id: str
    device_id: str  # the pod's uid
    status: str  # ACTIVE, DOWN, BUILD, ERROR
    vif_type: str = ""  # how it is bound: ovs; binding_failed, unbound
    host: str = ""  # binding:host_id

    def describe(self) -> str:
        failed = (
            f" (binding failed: no OVN chassis or agent on host {self.host!r})"
            if self.vif_type == BINDING_FAILED
            else ""
        )
        return f"{self.status}{failed}"


class PortStatusDriver(Protocol):
    def port_statuses(
        self, cluster: str, ports: list[str] | None = None, inactive: bool = False
    ) -> dict[str, PortStatus]:
        """The status of the cluster's pods' ports, by id: ``ports`` (one listing by id); else every port made
        for one pod and, unless ``inactive``, every pooled one; ``inactive``: only those not ACTIVE."""
