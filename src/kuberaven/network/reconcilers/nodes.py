"""Nodes (network/, a reconciler): the port pools follow the cluster's nodes.

    Node events ──► its name ──► reconcile(name): the Node from the nodes lister (watch/store.py)
        gone ──► pools.forget_node(): its free ports deleted (ports its pods hold go as the pods do)
        there ──► pools.node_seen(): every namespace's default pool is kept on it (prewarming)

Only run with port pools (openstack backend, our CNI: network/pools.py).
"""

from __future__ import annotations

from ...watch.reconciler import Reconciler, Watch
from ...watch.store import Lister
from ...watch.watcher import WatchTarget
from ..pools import PortPools
from .context import Blocking

NODES = WatchTarget("v1", "Node")


class NodePools:
    def __init__(self, pools: PortPools, nodes: Lister, blocking: Blocking) -> None:
        self.pools = pools
        self.nodes = nodes
        self._blocking = blocking

    def reconciler(self) -> Reconciler:
        return Reconciler("network-nodes", self.reconcile, [Watch(NODES)])

    async def reconcile(self, name: str) -> None:
        # Only the nodes informer's events queue a name, after the store took them: absent means deleted.
        if self.nodes.get(name) is None:
            await self._blocking(self.pools.forget_node, name)
        else:
            self.pools.node_seen(name)
