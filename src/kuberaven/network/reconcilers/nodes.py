"""Nodes (network/, a reconciler): the port pools follow the cluster's nodes, bare or nested.

    Node events ──► its name ──► reconcile(name): the Node from the nodes lister (watch/store.py)
        gone ──► pools.forget_node(): its free ports deleted (ports its pods hold go as the pods do)
        there ──► trunks.of(): its trunk (trunks.py: a nested node's VM port is a trunk's parent; looked up again
                  when its annotation or InternalIPs change)
              ──► pools.node_seen(): every namespace's default pool is kept on it (prewarming): ports bound to
                  it, or subports of its trunk; free ports of what it was before (another trunk, or bare) go

Only run with port pools (openstack backend, our CNI: network/pools.py).
"""

from __future__ import annotations

from ...watch.reconciler import Reconciler, Watch
from ...watch.store import Lister
from ...watch.watcher import WatchTarget
from ..pools import PortPools
from ..trunks import NodeTrunks
from .context import Blocking

NODES = WatchTarget("v1", "Node")


class NodesReconciler:
    def __init__(self, pools: PortPools, nodes: Lister, blocking: Blocking, trunks: NodeTrunks | None = None) -> None:
        self.pools = pools
        self.nodes = nodes
        self.trunks = trunks
        self._blocking = blocking

    def reconciler(self) -> Reconciler:
        return Reconciler("network-nodes", self.reconcile, [Watch(NODES)])

    async def reconcile(self, name: str) -> None:
        # Only the nodes informer's events queue a name, after the store took them: absent means deleted.
        if self.nodes.get(name) is None:
            if self.trunks is not None:
                self.trunks.forget(name)
            await self._blocking(self.pools.forget_node, name)
            return
        trunk = await self.trunks.of(name) if self.trunks is not None else None
        await self._blocking(self.pools.node_seen, name, trunk.id if trunk is not None else None)
