"""The ports driver (network/drivers/): a pod's port, asked for as one typed request.

    reconcilers/pods.py ──► PortRequest ×N ──► PortDriver.ensure_ports() ──► backends/embedded.py (bulk, one
                                                                            transaction) | openstack_ports.py
    a load balancer's VIP port (backends/octavia.py), tests ──► PortDriver.ensure_port(request)

A request names everything a port is made with, so ensure_port() takes one
argument and the bulk call takes a list of the same; a backend with no bulk
call answers ensure_ports() with ensure_ports_one_by_one().
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..backend import BackendError
from ..vif import DEFAULT_MTU


@dataclass(frozen=True)
class Port:
    """A port as the translator keeps it: its address, MAC and network's MTU go into the pod's VIF."""

    id: str
    address: str
    mac: str = ""
    mtu: int = DEFAULT_MTU


@dataclass(frozen=True)
class PortRequest:
    """One pod's port, as ensure_port() takes it (ensure_ports() takes many)."""

    network: str
    subnet: str
    name: str
    device_id: str  # the pod's uid (a VIP port: its load balancer's id)
    address: str | None  # the fixed IP asked for; None: the IPAM's pick
    security_groups: list[str]
    tags: list[str]
    host: str | None = None  # the node the pod runs on: binding:host_id


class PortDriver(Protocol):
    def ensure_port(self, request: PortRequest) -> Port:
        """The request's port with its fixed IP (or the IPAM's pick), bound to its host; AddressInUse if held."""

    def ensure_ports(self, requests: list[PortRequest]) -> list[Port | BackendError]:
        """Many ports at once (a cold start's pods): each request's port, or the error it met alone."""


def ensure_ports_one_by_one(driver: PortDriver, requests: list[PortRequest]) -> list[Port | BackendError]:
    """ensure_ports() for a driver with no bulk call: each request alone, its error kept as its result."""
    results: list[Port | BackendError] = []
    for request in requests:
        try:
            results.append(driver.ensure_port(request))
        except BackendError as error:
            results.append(error)
    return results
