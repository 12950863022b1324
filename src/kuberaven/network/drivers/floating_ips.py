"""The floating IPs driver (network/drivers/): a LoadBalancer Service's external address on its VIP port.

reconcilers/loadbalancers.py ──► FloatingIPDriver.ensure_floating_ip / release_floating_ip (keep-floatingip)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class FloatingIP:
    id: str
    address: str


class FloatingIPDriver(Protocol):
    def ensure_floating_ip(
        self, external_network: str, port: str, address: str | None, tags: list[str], subnet: str | None = None
    ) -> FloatingIP:
        """A floating IP (``address`` if given, else one of ``subnet`` if given) associated with ``port``."""

    def release_floating_ip(self, floating_ip: str) -> None:
        """Keep a floating IP but let it go: no port, no kuberaven tags (owned() no longer lists it)."""
