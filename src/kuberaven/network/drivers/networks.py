"""The networks driver (network/drivers/): a cluster's shared infrastructure, its namespaces' networks and subnets.

translator (once at start) ──► NetworkDriver.ensure_infrastructure() ──► Infrastructure
reconcilers/namespaces.py  ──► ensure_network / ensure_subnet / ensure_router_interface
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..backend import NetworkOptions


@dataclass(frozen=True)
class Infrastructure:
    """What every translation of a cluster shares, made once at start-up."""

    service_network: str
    service_subnet: str
    external_network: str
    external_subnet: str
    router: str
    subnet_pool: str | None = None


@dataclass(frozen=True)
class Subnet:
    id: str
    cidr: str
    gateway: str | None = None


class NetworkDriver(Protocol):
    def ensure_infrastructure(self, cluster: str, options: NetworkOptions) -> Infrastructure:
        """The cluster's service network, external network (its own, or the one ``options`` names), router and,
        with a subnet per namespace, the subnet pool those are cut from."""

    def ensure_network(self, name: str, tags: list[str]) -> str: ...

    def ensure_subnet(
        self,
        network: str,
        name: str,
        tags: list[str],
        *,
        cidr: str | None = None,
        pool: str | None = None,
        prefix: int | None = None,
    ) -> Subnet:
        """A subnet with ``cidr``, or the next free ``prefix``-long one of subnet pool ``pool``."""

    def ensure_router_interface(self, router: str, subnet: str) -> None:
        """``subnet`` attached to ``router`` (idempotent); deleting the subnet's network detaches it."""
