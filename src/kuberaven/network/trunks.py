"""Nested nodes' trunks (network/): which trunk each node's VM port is the parent of, looked up once per change.

    pods.py (a pod on a node), nodes.py (a Node changed), pools.py (prewarming) ──► NodeTrunks.of(node)
        the Node from the nodes lister (one its watch has not brought yet: read by name)
            ──► rules/trunks.py's trunk_ask(): its annotation, its InternalIPs
        the same ask as last time ──► the cached answer (no Neutron call on a pod's path)
        another ask ──► the backend's trunks driver: node_trunks() (Neutron: the named trunk, or the trunks whose
                        parent holds one of the node's addresses) ──► nested_trunk(): the node's Trunk, or None

A node's answer is kept until its Node changes what the ask reads (the
annotation or its InternalIPs): a Node's other changes (a kubelet's status
updates, every few seconds on every node) cost no Neutron call.
A lookup that failed (a named trunk Neutron lacks, several trunks on the
node's addresses, Neutron down) is not cached: the pod's reconcile fails
with it, a Warning Event says why, and the queue retries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import NotFound
from ..watch.store import Lister
from .drivers import TrunkingBackend
from .drivers.port_pools import Trunk
from .rules.trunks import TrunkAsk, nested_trunk, trunk_ask

log = logging.getLogger(__name__)


class NodeTrunks:
    """Each node's trunk (None: a bare node), cached per node by what tells it."""

    def __init__(
        self, backend: TrunkingBackend, nodes: Lister, client: KubeClient, blocking: Callable[..., Awaitable[Any]]
    ) -> None:
        """``client``: a Node the lister does not know yet is read by name (a pod's event may come first)."""
        self.backend = backend
        self.nodes = nodes
        self.client = client
        self._blocking = blocking
        self._lock = threading.Lock()
        self._known: dict[str, tuple[TrunkAsk, Trunk | None]] = {}

    async def of(self, name: str) -> Trunk | None:
        """The node's trunk, from the cache unless its Node changed what tells it; a node the cluster does not
        have is bare."""
        node = await self.nodes.fetch(name)
        if node is None:  # not in the store yet (its watch event not come), or not there at all
            try:
                node = await self.client.request("GET", f"/api/v1/nodes/{name}")
            except NotFound:
                self.forget(name)
                return None
        ask = trunk_ask(node)
        with self._lock:
            cached = self._known.get(name)
        if cached is not None and cached[0] == ask:
            return cached[1]
        found = await self._blocking(self.backend.trunks.node_trunks, ask.trunk, ask.addresses)
        trunk = nested_trunk(ask, found)
        with self._lock:
            self._known[name] = (ask, trunk)
        if cached is None or cached[1] != trunk:
            log.info("node %s is %s", name, _described(trunk))
        return trunk

    def forget(self, name: str) -> None:
        with self._lock:
            self._known.pop(name, None)


def _described(trunk: Trunk | None) -> str:
    if trunk is None:
        return "bare"
    return f"nested on trunk {trunk.id} (parent port {trunk.parent_port}, {trunk.parent_status or 'no status'})"
