"""Kernel networking of the node agent (cni/, the I/O edge): veth pairs, bridges, OVS ports, through ``ip``
and ``ovs-vsctl``. Blocking calls: the agent (node/) runs them in its threads, pods in parallel.

    ADD ──► wire():     veth pair (an earlier ADD's pair and its OVS port removed first): pod end made
                        inside the pod's netns as CNI_IFNAME with the VIF's MAC, MTU, IP/prefix,
                        default route; host end attached by the VIF's binding:
                        bridge: to the network's Linux bridge (made once, up)
                        ovs:    to br-int with external_ids iface-id/attached-mac/iface-status, what
                                OVN's ovn-controller (or Neutron's OVS agent) binds, as os-vif does, once
                                any other interface of the bridge claiming that port is removed
    DEL ──► host_end(): the attachment's host end (ATTACHMENT_KEY in OVS, else its own name), then, unless
                        handover.py parks it, unwire_host(): the OVS port record (asked of OVS, not guessed
                        from the kernel: the userspace datapath shows no ``ovs-system`` master), the host
                        end (the kernel removes its peer), the bridge once empty
    CHECK ──► check():  each of those as the VIF says
    GC ──► host_ends(): every krv… interface of the node and OVS port of the bridge, for spec.stale()

``ip`` (iproute2) and ``nsenter`` (util-linux) are what the agent needs on
the node, and ``ovs-vsctl`` for the OVS binding. Host ends, bridges and OVS
live in the node's netns (``Node.netns``: the agent's own, or the netns of a
node whose OVS runs in one of its own). Bridges are shared by the pods of a
network, so making one, attaching to it and deleting it once empty happen
under one lock file per node (one lock per open file: threads exclude each
other too).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..network.vif import Binding, Vif
from .spec import (
    ATTACHMENT_KEY,
    BRIDGE_PREFIX,
    GROUPS_KEY,
    CniError,
    ErrorCode,
    Invocation,
    attachment_key,
    bridge_name,
    groups_value,
    host_ifname,
)

LOCK = Path("/run/kuberaven-cni.lock")
MISSING = ("Cannot find device", "does not exist")
NO_OVS_PORT = "no port named"  # ovs-vsctl port-to-br of a port OVS does not have
NO_KEY = "no key"  # ovs-vsctl get of a map's key the record does not have
OVS_TIMEOUT = "10"  # seconds ovs-vsctl waits for the database
DEFAULT_OVS_BRIDGE = "br-int"  # where OVN's ovn-controller (or Neutron's OVS agent) binds ports
DEFAULT_OVSDB = "/var/run/openvswitch/db.sock"  # ovs-vsctl's own database socket
DEFAULT_PARK_FOR = 60.0  # seconds a gone pod's pair waits, bound, for the next pod of its port (handover.py)


@dataclass(frozen=True)
class Node:
    """Where the node's side of pods lives: the agent's settings, the same for every call."""

    netns: str | None = None  # path of the netns of host ends, bridges and OVS; None: the agent's own
    ovsdb: str | None = None  # the Open_vSwitch database (ovs-vsctl --db); None: ovs-vsctl's default
    ovs_bridge: str = DEFAULT_OVS_BRIDGE
    park_for: float = DEFAULT_PARK_FOR  # 0: DEL unwires every pair, none is handed over

    def bridge_for(self, call: Invocation) -> str:
        """The OVS bridge of this call: the config's ovsBridge, else the agent's."""
        return call.ovs_bridge or self.ovs_bridge


def run(command: list[str]) -> str:
    """Run a command; a failure is a CniError (I/O failure) naming the command and what it said."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CniError(ErrorCode.IO_FAILURE, f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def ip(*args: str, netns: str | None = None) -> str:
    """``ip``, in the netns at path ``netns`` if given (``ip -n`` takes only names under /run/netns); None: the
    agent's own."""
    return run([*(["nsenter", f"--net={netns}"] if netns else []), "ip", *args])


def link(name: str, netns: str | None = None, details: bool = False) -> dict[str, Any] | None:
    """``ip -j link show`` of one interface (``details``: with ``-d``, its kind and linkinfo), or None if there is
    none by that name."""
    try:
        shown = ip("-j", *(["-d"] if details else []), "link", "show", "dev", name, netns=netns)
        return json.loads(shown)[0]  # type: ignore[no-any-return]
    except CniError as error:
        if any(text in error.msg for text in MISSING):
            return None
        raise


@contextlib.contextmanager
def node_lock() -> Iterator[None]:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def vsctl(node: Node, *args: str) -> str:
    """``ovs-vsctl`` against the node's database."""
    database = [f"--db={node.ovsdb}"] if node.ovsdb else []
    return run(["ovs-vsctl", *database, f"--timeout={OVS_TIMEOUT}", *args]).strip()


def vsctl_command(node: Node, *args: str) -> list[str]:
    """The ``ovs-vsctl`` command line for the node's database without a timeout (the caller bounds it)."""
    return ["ovs-vsctl", *([f"--db={node.ovsdb}"] if node.ovsdb else []), *args]


def wire(vif: Vif, call: Invocation, node: Node, claiming: Iterable[str] | None = None) -> tuple[str, str]:
    """Make the pod's interface as the VIF says; returns the host end's name and MAC. Repeatable: an earlier
    ADD's pair is removed first with its OVS port record, so a second ADD leaves one pair, as the first did, and
    its readiness wait reads a new record (the old one's ovn-installed speaks of the old pair; under that record
    the new pair carried no packet). ``claiming``: the port's claimants() when the caller has them already."""
    assert call.netns is not None
    host = host_ifname(call.container_id, call.ifname)
    if link(host, node.netns) is not None:
        unwire_host(host, node)
    if link(call.ifname, call.netns) is not None:
        ip("link", "del", "dev", call.ifname, netns=call.netns)
    mtu = str(vif.mtu)
    peer = ("peer", "name", call.ifname, "mtu", mtu, "netns", call.netns)
    ip("link", "add", host, "mtu", mtu, "type", "veth", *peer, netns=node.netns)
    configure_pod_end(vif, call)
    if vif.binding == Binding.OVS:
        _plug_ovs(vif, host, call, node, claimants(vif.port, node) if claiming is None else claiming)
    else:
        _attach_bridge(vif, host, node)
    found = link(host, node.netns)
    assert found is not None, f"{host} made above"
    return host, str(found["address"])


def configure_pod_end(vif: Vif, call: Invocation) -> None:
    """The pod's interface, already in its netns as CNI_IFNAME: the VIF's MAC, up, its IP/prefix, the default
    route via the gateway (and the netns' loopback up)."""
    ip("link", "set", "dev", "lo", "up", netns=call.netns)
    ip("link", "set", "dev", call.ifname, "address", vif.mac, "up", netns=call.netns)
    ip("address", "add", f"{vif.ip}/{vif.prefix_length}", "dev", call.ifname, netns=call.netns)
    ip("route", "replace", "default", "via", vif.gateway, "dev", call.ifname, "onlink", netns=call.netns)


def _plug_ovs(vif: Vif, host: str, call: Invocation, node: Node, claiming: Iterable[str]) -> None:
    """What os-vif's ovs plugin makes and ovn-controller (or Neutron's OVS agent) binds: a port on the bridge
    whose iface-id is the Neutron port, and whose ATTACHMENT_KEY names the call's attachment. Ports are recycled
    between pods: another interface of the bridge with that iface-id (a pod whose DEL never came, a pair parked
    that could not be handed over) would keep the binding, so it goes first (``claiming``: the port's
    claimants())."""
    bridge = node.bridge_for(call)
    for other in claiming:
        if other != host and ovs_bridge_of(node, other) == bridge:
            vsctl(node, "--if-exists", "del-port", other)
            if link(other, node.netns) is not None:
                delete(other, node.netns)
    external = (
        f"external-ids:iface-id={vif.port}",
        f"external-ids:attached-mac={vif.mac}",
        "external-ids:iface-status=active",
        f'external-ids:{ATTACHMENT_KEY}="{attachment_key(call.container_id, call.ifname)}"',
        f'external-ids:{GROUPS_KEY}="{groups_value(vif.security_groups)}"',
    )
    ip("link", "set", "dev", host, "up", netns=node.netns)
    vsctl(node, "--may-exist", "add-port", bridge, host, "--", "set", "Interface", host, *external)


def claimants(port: str, node: Node) -> dict[str, dict[str, str]]:
    """The OVS interfaces whose external_ids:iface-id is ``port``, name → external_ids."""
    return interfaces(node, f"external_ids:iface-id={port}")


def _attach_bridge(vif: Vif, host: str, node: Node) -> None:
    bridge = bridge_name(vif.network)
    with node_lock():
        if link(bridge, node.netns) is None:
            ip("link", "add", "name", bridge, "type", "bridge", netns=node.netns)
        ip("link", "set", "dev", bridge, "up", netns=node.netns)
        ip("link", "set", "dev", host, "master", bridge, "up", netns=node.netns)


def has_ovs() -> bool:
    """Whether ovs-vsctl is installed (a node without it has no OVS port to find)."""
    return shutil.which("ovs-vsctl") is not None


def uses_ovs(node: Node) -> bool:
    """Whether the node has an Open vSwitch whose health is the agent's: a database named to the agent, or
    ovs-vsctl's own database socket present."""
    return node.ovsdb is not None or (has_ovs() and Path(DEFAULT_OVSDB).exists())


def ovs_bridge_of(node: Node, host: str) -> str | None:
    """The OVS bridge that has port ``host``, or None (no such port, or no OVS on the node)."""
    if not uses_ovs(node):
        return None
    try:
        return vsctl(node, "port-to-br", host)
    except CniError as error:
        if NO_OVS_PORT in error.msg:
            return None
        raise


def interfaces(node: Node, *conditions: str) -> dict[str, dict[str, str]]:
    """The OVS Interfaces matching ``conditions`` (``ovs-vsctl find``'s; none: all), name → external_ids."""
    shown = vsctl(node, "--format=json", "--columns=name,external_ids", "find", "Interface", *conditions)
    return {name: dict(ids[1]) for name, ids in json.loads(shown)["data"]}


def serving(node: Node) -> dict[str, str]:
    """Host end → the attachment it serves (ATTACHMENT_KEY), as the node's Open vSwitch says; none without one."""
    if not (uses_ovs(node) and ovs_answers(node)):
        return {}
    return {name: ids[ATTACHMENT_KEY] for name, ids in interfaces(node).items() if ATTACHMENT_KEY in ids}


def host_end(call: Invocation, node: Node) -> tuple[str | None, dict[str, str]]:
    """The host end serving the call's attachment and its external_ids: the Interface whose ATTACHMENT_KEY names
    it (a pair handed over keeps its first pod's name), else the attachment's own name, unless that serves
    another pod now (None: nothing on the node is this attachment's)."""
    own = host_ifname(call.container_id, call.ifname)
    if not uses_ovs(node):
        return own, {}
    key = attachment_key(call.container_id, call.ifname)
    try:
        found = interfaces(node, f'external_ids:{ATTACHMENT_KEY}="{key}"')
        if found:
            return min(found.items())
        ids = interfaces(node, f"name={own}").get(own, {})
    except CniError:  # OVS does not answer: what the node has under the attachment's name
        return own, {}
    return (own, ids) if ids.get(ATTACHMENT_KEY, key) == key else (None, ids)


def unwire_host(host: str, node: Node) -> None:
    """Remove a host end: its OVS port record, the link (the kernel removes its peer in the pod's netns with
    it), then the bridge if no port is left on it. What is gone already is fine (DEL may come twice)."""
    found = link(host, node.netns)
    master = found.get("master") if found else None
    on_bridge = bool(master and master.startswith(BRIDGE_PREFIX))
    if not on_bridge:
        # An OVS port's record outlives its interface (the runtime may have deleted the pod's netns,
        # and with it the pair): asked of OVS whether the link is there or not.
        try:
            if ovs_bridge_of(node, host) is not None:
                vsctl(node, "--if-exists", "del-port", host)
        except CniError:
            if found is not None:
                raise
            # Nothing of ours left on the node that we can see, and OVS does not answer: done.
    if found is None:
        return
    with node_lock():
        delete(host, node.netns)
        if on_bridge and master and link(master, node.netns) is not None and not _ports_of(master, node):
            delete(master, node.netns)


def _ports_of(bridge: str, node: Node) -> list[dict[str, Any]]:
    return json.loads(ip("-j", "link", "show", "master", bridge, netns=node.netns))  # type: ignore[no-any-return]


def delete(name: str, netns: str | None = None) -> None:
    """``ip link del``; gone already (the kernel still removing it, another DEL) is fine."""
    try:
        ip("link", "del", "dev", name, netns=netns)
    except CniError as error:
        if not any(text in error.msg for text in MISSING):
            raise


def host_ends(node: Node, bridge: str) -> set[str]:
    """The node's interfaces and the OVS ``bridge``'s ports (if the node has OVS and the bridge): what GC sorts."""
    names = {entry["ifname"] for entry in json.loads(ip("-j", "link", "show", netns=node.netns))}
    if uses_ovs(node) and ovs_answers(node):
        with contextlib.suppress(CniError):  # no such bridge: no ports
            names |= set(vsctl(node, "list-ports", bridge).split())
    return names


def ovs_answers(node: Node) -> bool:
    """Whether the node's Open_vSwitch database answers."""
    try:
        vsctl(node, "get", "Open_vSwitch", ".", "ovs_version")
    except CniError:
        return False
    return True


def ovn_remote(node: Node) -> str | None:
    """The Open_vSwitch table's external_ids:ovn-remote (set where ovn-controller runs), or None when it has no
    such key; a CniError when the database does not answer (nothing can be told then)."""
    try:
        return vsctl(node, "get", "Open_vSwitch", ".", "external_ids:ovn-remote").strip('"') or None
    except CniError as error:
        if NO_KEY in error.msg:
            return None
        raise


def check(vif: Vif, call: Invocation, node: Node) -> None:
    """CHECK: the pod's interface, address and route, and the host end's bridge, are as the VIF says."""
    check_pod_end(vif, call)
    host = host_end(call, node)[0] or host_ifname(call.container_id, call.ifname)
    found = link(host, node.netns)
    if vif.binding == Binding.OVS:
        _check_ovs(vif, node.bridge_for(call), host, found is not None, node)
    elif found is None or found.get("master") != bridge_name(vif.network):
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{host} is missing or not on {bridge_name(vif.network)}")


def check_pod_end(vif: Vif, call: Invocation) -> None:
    """CHECK of the pod's side: its interface has the VIF's MAC and address, its netns a default route via the
    VIF's gateway."""
    assert call.netns is not None
    pod_end = link(call.ifname, call.netns)
    if pod_end is None or pod_end.get("address") != vif.mac:
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{call.ifname} in {call.netns} is missing or has not MAC {vif.mac}")
    addresses = json.loads(ip("-j", "address", "show", "dev", call.ifname, netns=call.netns))
    held = {(a["local"], a["prefixlen"]) for a in addresses[0].get("addr_info", [])}
    if (vif.ip, vif.prefix_length) not in held:
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{call.ifname} in {call.netns} lacks {vif.ip}/{vif.prefix_length}")
    routes = json.loads(ip("-j", "route", "show", "default", netns=call.netns))
    if not any(route.get("gateway") == vif.gateway for route in routes):
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{call.netns} has no default route via {vif.gateway}")


def _check_ovs(vif: Vif, bridge: str, host: str, exists: bool, node: Node) -> None:
    """The host end is a port of the OVS bridge whose iface-id is the VIF's port."""
    if not exists:
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{host} is missing")
    found = ovs_bridge_of(node, host)
    if found != bridge:
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{host} is not a port of OVS bridge {bridge} (it is on {found})")
    iface_id = vsctl(node, "get", "Interface", host, "external_ids:iface-id").strip('"')
    if iface_id != vif.port:
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{host} has iface-id {iface_id}, not the VIF's port {vif.port}")
