"""Port pools rebuilt at start (network/): what Neutron has and what the database says, made to agree.

    pools.py's load() ──► recover(): the pooled ports Neutron lists (by name; subports with their trunk and
                          VLAN id) and the "Port" translation rows
        a row whose port Neutron lacks ──► dropped
        a port no row names (made just before a SIGKILL) ──► adopted free, on its node (a subport: on the
            node another row of its trunk names); deleted when its network is no namespace's, or when it is a
            subport attached to no trunk, or to a trunk no row knows
        a row naming a pod that is gone (no Pod row: deleted while we were stopped) ──► free again
    ──► the free ports' states, which pools.py sorts into its pools

Blocking; run before the translator is ready, so no pod takes a port meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .drivers import PoolingBackend
from .drivers.port_pools import PooledPort
from .drivers.ports import Port
from .rules.pools import port_state
from .state import Row, TranslationStore

log = logging.getLogger(__name__)

KIND = "Port"  # the translation rows of pooled ports: uid = the port's id, name = its node


@dataclass(frozen=True)
class Recovered:
    free: list[dict[str, Any]]  # the free ports' row states
    adopted: int
    freed: int


def recover(
    store: TranslationStore,
    backend: PoolingBackend,
    cluster: str,
    delete: Callable[[list[dict[str, Any]]], None],
) -> Recovered:
    """The pools' rows made to agree with Neutron; ``delete``: pools.py's deletion of ports no row may keep."""
    rows = {row.uid: row for row in store.rows_of(KIND)}
    listed = {port.id: port for port in backend.pools.pool_ports(cluster)}
    namespaces = {row.state["network"]: row for row in store.rows_of("Namespace")}
    pods = store.uids_of("Pod")
    store.delete_rows(KIND, [uid for uid in rows if uid not in listed])
    adopted: list[Row] = []
    trunk_nodes = {row.state["trunk"]: row.name for row in rows.values() if row.state.get("trunk")}
    for port in listed.values():
        if port.id in rows:
            continue
        namespace = namespaces.get(port.network)
        node = trunk_nodes.get(port.trunk or "") if port.subport else port.node
        if namespace is None or node is None:
            log.info("deleting pool port %s: no namespace's network, or a subport of no known trunk", port.id)
            delete([_listed_state(port)])
            continue
        state = port_state(
            Port(port.id, port.address, port.mac, port.mtu),
            namespace.name,
            node,
            namespace.state,
            list(port.security_groups),
            (port.trunk, port.vlan_id) if port.trunk and port.vlan_id else None,
        )
        adopted.append((KIND, port.id, namespace.name, node, state))
    freed = [
        row
        for uid, row in rows.items()
        if uid in listed and row.state.get("pod") is not None and row.state["pod"] not in pods
    ]
    store.save_many(adopted + [(KIND, row.uid, row.namespace, row.name, {**row.state, "pod": None}) for row in freed])
    free = [row.state for row in store.rows_of(KIND) if row.state.get("pod") is None]
    return Recovered(free, len(adopted), len(freed))


def _listed_state(port: PooledPort) -> dict[str, Any]:
    """A listed pool port as pools.py's deletion takes it: a subport attached to a trunk is detached first."""
    return {"port": port.id, "trunk": port.trunk} if port.trunk else {"port": port.id}
