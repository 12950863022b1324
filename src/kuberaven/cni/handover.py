"""A recycled port's veth pair handed from one pod to the next (cni/, the I/O edge), so that its Neutron port
stays bound: no release by ovn-controller, no DOWN and ACTIVE again in Neutron, no flows to install again.

    DEL (an OVS port of the call's bridge, the pod's netns still there) ──► park():
        the Interface marked PARKED_AT_KEY, then the pod end moved into the node's netns, down, named krp…
        (its addresses go with the move); the host end stays on the bridge, bound
    ADD (the VIF's port has a parked pair plugged with the groups it has now) ──► take_over():
        the parked end moved into the new pod's netns as CNI_IFNAME and configured as links.configure_pod_end
        does; the Interface's ATTACHMENT_KEY names the new pod, its mark removed; ovn-installed stays true,
        as what it speaks of did not change
    the agent, every few seconds ──► parked() + spec.expired() ──► unwire_parked(): pairs parked longer than
        parkFor are unwired as DEL would have (the port goes DOWN)

``ip link set … netns`` takes a netns by name (under /run/netns) or by a
process' id: a netns given another way is not parked, and DEL unwires it.
Callers hold the agent's lock of the host end (node/calls.py), so a
take-over, a sweep and a GC of one pair never run together.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from ..network.vif import Vif
from . import links
from .links import Node
from .spec import ATTACHMENT_KEY, GROUPS_KEY, PARKED_AT_KEY, Invocation, attachment_key, groups_value, parked_ifname

NETNS_DIRS = (Path("/run/netns"), Path("/var/run/netns"))  # where ``ip`` finds a netns by name


def netns_target(path: str | None) -> str | None:
    """What ``ip link set … netns`` takes for the netns at ``path``: its name, a process' id, or None (neither);
    None for ``path`` itself: the agent's own netns, by its process id."""
    if path is None:
        return str(os.getpid())
    where = Path(path)
    if where.parent in NETNS_DIRS:
        return where.name
    parts = where.parts
    if len(parts) == 5 and parts[:2] == ("/", "proc") and parts[2].isdigit() and parts[3:] == ("ns", "net"):
        return parts[2]
    return None


def park(host: str, ids: dict[str, str], call: Invocation, node: Node) -> bool:
    """DEL's hand-over: the pod end parked in the node's netns, the pair kept on the bridge; False (nothing done)
    when it cannot be: not an OVS port of the call's bridge, the pod's netns or interface gone, a netns ``ip``
    cannot name."""
    target = netns_target(node.netns)
    if PARKED_AT_KEY in ids:
        return True  # a DEL again: parked already
    if call.netns is None or target is None or not os.path.exists(call.netns):
        return False
    parked = parked_ifname(host)
    if links.ovs_bridge_of(node, host) != node.bridge_for(call) or links.link(parked, node.netns) is not None:
        return False
    if links.link(call.ifname, call.netns) is None:
        return False
    links.vsctl(node, "set", "Interface", host, f'external_ids:{PARKED_AT_KEY}="{time.time():.0f}"')
    links.ip("link", "set", "dev", call.ifname, "down", "netns", target, "name", parked, netns=call.netns)
    return True


def parked(found: Mapping[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Of ``found`` (OVS interfaces → their external_ids, as links.interfaces gives them), those whose pod end is
    parked."""
    return {name: ids for name, ids in found.items() if PARKED_AT_KEY in ids}


def take_over(host: str, ids: dict[str, str], vif: Vif, call: Invocation, node: Node) -> tuple[str, str] | None:
    """ADD's hand-over: ``host``'s parked pod end made the new pod's interface; the host end's name and MAC, or
    None when it cannot be: the port's security groups changed since it was plugged (a pair plugged anew is
    ready once OVN has installed its flows with the new groups; a pair kept has no such signal), the pair gone or
    taken meanwhile, a netns ``ip`` cannot name, the pod's interface there already. ADD then wires a pair of its
    own, which removes this one."""
    assert call.netns is not None
    target, parked_end = netns_target(call.netns), parked_ifname(host)
    if ids.get(GROUPS_KEY) != groups_value(vif.security_groups) or target is None:
        return None
    if links.link(parked_end, node.netns) is None or links.link(call.ifname, call.netns) is not None:
        return None
    links.ip("link", "set", "dev", parked_end, "netns", target, "name", call.ifname, netns=node.netns)
    links.configure_pod_end(vif, call)
    key = attachment_key(call.container_id, call.ifname)
    links.vsctl(
        node,
        *("remove", "Interface", host, "external_ids", PARKED_AT_KEY),
        *("--", "set", "Interface", host, f'external_ids:{ATTACHMENT_KEY}="{key}"'),
    )
    found = links.link(host, node.netns)
    assert found is not None, f"{host} is the peer of {parked_end}"
    return host, str(found["address"])


def unwire_parked(host: str, node: Node) -> bool:
    """The sweep's: ``host`` unwired if its pod end is still parked (it may have been taken since it was listed);
    whether it was."""
    if PARKED_AT_KEY not in links.interfaces(node, f"name={host}").get(host, {}):
        return False
    links.unwire_host(host, node)
    return True
