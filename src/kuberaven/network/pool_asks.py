"""What a pod asks of the port pools and what it gets (network/): its ask, the port it took, or why none.

pods.py's batch ──► PoolAsk (who, where, its groups, its namespace's network) ──► pools.py's take()
    ──► Taken: the free port it took, not yet recorded: row() (the port's row naming the pod) and network()
        (the pod's record, pod_network.py), which the pods reconciler records in one transaction
    ──► PoolEmpty: no free port yet (it waits for the refill); PortRefused: the refill failed on something a
        user must mend (actionable(): the port quota, the subnet's addresses)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..watch.workqueue import Waiting
from .backend import AddressesExhausted, BackendError
from .drivers.port_pools import Trunk
from .pod_network import PodNetwork
from .pool_recovery import KIND
from .rules.pools import PoolKey
from .state import Row

QUOTA_EXCEEDED = "Quota exceeded"  # Neutron's OverQuota (409): the project may hold no more ports


class PoolEmpty(Waiting):
    """No free port for a pod on its node and in its namespace yet: it waits for the pool's refill. ``cause``: the
    last refill's failure when a user must act on it (the port quota, the subnet out of addresses)."""

    def __init__(self, key: PoolKey, error: str | None, cause: bool = False) -> None:
        last = f" (its last refill failed: {error})" if error else ""
        super().__init__(f"no free port in the pool of namespace {key.namespace} on node {key.node} yet{last}")
        self.key = key
        self.cause = str(self) if cause and error else None


class PortRefused(BackendError):
    """A pod gets no port until a user acts: its pool's refill failed on the quota or the subnet's addresses."""


def actionable(error: BackendError) -> bool:
    """Whether a refill's failure is one no retry mends: the subnet out of addresses, the port quota reached."""
    return isinstance(error, AddressesExhausted) or QUOTA_EXCEEDED in str(error)


@dataclass(frozen=True)
class PoolAsk:
    """One pod's request for a port: who it is, where it runs, and its namespace's translation."""

    uid: str
    namespace: str
    pod: str
    node: str
    pod_ip: str | None
    groups: tuple[str, ...]  # the pod's security groups (its namespace's when no policy selects it)
    network: dict[str, Any]  # the namespace's translation state: network, subnet, cidr, gateway, security_group
    trunk: Trunk | None = None  # its node's trunk (a nested node: the pod takes a subport of it)

    @property
    def key(self) -> PoolKey:
        return PoolKey.of(self.node, self.namespace, self.groups, self.trunk.id if self.trunk else None)


@dataclass(frozen=True)
class Taken:
    """A free port a pod took, not recorded yet: the pods reconciler records row() and the pod's network() in one
    transaction, or hands it back (PortPools.not_recorded())."""

    ask: PoolAsk
    port: dict[str, Any]  # the pooled port's row state, free, as its pool held it (its pool's groups)

    def row(self) -> Row:
        """The port's row, naming its pod."""
        return (KIND, self.port["port"], self.ask.namespace, self.ask.node, {**self.port, "pod": self.ask.uid})

    def network(self) -> PodNetwork:
        """The pod's record: this port, with the groups its pool gave it."""
        return PodNetwork.pooled_port(self.port, self.ask.pod_ip, self.ask.trunk.parent_mac if self.ask.trunk else None)
