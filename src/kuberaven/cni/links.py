"""Kernel networking for kuberaven-cni (cni/, the I/O edge): veth pairs, bridges, OVS ports, through ``ip``
and ``ovs-vsctl``.

    plugin.py ADD ──► wire():   veth pair: pod end made inside the pod's netns as CNI_IFNAME with the VIF's
                                MAC, MTU, IP/prefix, default route; host end attached by the VIF's binding:
                                bridge: to the network's Linux bridge (made once, up)
                                ovs:    to br-int with external_ids iface-id/attached-mac/iface-status,
                                        what OVN's ovn-controller (or Neutron's OVS agent) binds, as os-vif does
              DEL ──► unwire(): the OVS port record (asked of OVS, not guessed from the kernel: the userspace
                                datapath shows no ``ovs-system`` master), the host end (the kernel removes its
                                peer), the bridge once empty
              CHECK ──► check(): each of those as the VIF says

The ``ip`` command (iproute2) and ``nsenter`` (util-linux) are what the
plugin needs on the node, and ``ovs-vsctl`` for the OVS binding; both take
the netns path the runtime gives. The host ends live in the node's netns:
the plugin's own, or ``nodeNetns`` of the config where the node's OVS runs in
one of its own. Bridges are shared by the pods of a network, so making one,
attaching to it and deleting it once empty happen under one lock file per node.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..network.vif import Binding, Vif
from .spec import BRIDGE_PREFIX, CniError, Code, Invocation, bridge_name, host_ifname

LOCK = Path("/run/kuberaven-cni.lock")
MISSING = ("Cannot find device", "does not exist")
NO_OVS_PORT = "no port named"  # ovs-vsctl port-to-br of a port OVS does not have
OVS_TIMEOUT = "10"  # seconds ovs-vsctl waits for the database


def run(command: list[str]) -> str:
    """Run a command; a failure is a CniError (I/O failure) naming the command and what it said."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CniError(Code.IO_FAILURE, f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def ip(*args: str, netns: str | None = None) -> str:
    """``ip``, in the netns at path ``netns`` if given (``ip -n`` takes only names under /run/netns); None: the
    plugin's own."""
    return run([*(["nsenter", f"--net={netns}"] if netns else []), "ip", *args])


def link(name: str, netns: str | None = None) -> dict[str, Any] | None:
    """``ip -j link show`` of one interface, or None if there is none by that name."""
    try:
        return json.loads(ip("-j", "link", "show", "dev", name, netns=netns))[0]  # type: ignore[no-any-return]
    except CniError as error:
        if any(text in error.msg for text in MISSING):
            return None
        raise


@contextlib.contextmanager
def node_lock() -> Iterator[None]:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def wire(vif: Vif, call: Invocation) -> tuple[str, str]:
    """Make the pod's interface as the VIF says; returns the host end's name and MAC. Repeatable:
    an earlier ADD's pair is removed first, so a second ADD leaves one pair, as the first did."""
    assert call.netns is not None
    host, node = host_ifname(call.container_id, call.ifname), call.node_netns
    if link(host, node) is not None:
        ip("link", "del", "dev", host, netns=node)
    if link(call.ifname, call.netns) is not None:
        ip("link", "del", "dev", call.ifname, netns=call.netns)
    mtu = str(vif.mtu)
    ip(
        "link",
        "add",
        host,
        "mtu",
        mtu,
        "type",
        "veth",
        "peer",
        "name",
        call.ifname,
        "mtu",
        mtu,
        "netns",
        call.netns,
        netns=node,
    )
    ip("link", "set", "dev", "lo", "up", netns=call.netns)
    ip("link", "set", "dev", call.ifname, "address", vif.mac, "up", netns=call.netns)
    ip("address", "add", f"{vif.ip}/{vif.prefix_length}", "dev", call.ifname, netns=call.netns)
    ip("route", "replace", "default", "via", vif.gateway, "dev", call.ifname, "onlink", netns=call.netns)
    _attach(vif, host, call)
    found = link(host, node)
    assert found is not None, f"{host} made above"
    return host, str(found["address"])


def vsctl(call: Invocation, *args: str) -> str:
    """``ovs-vsctl`` against the node's database (the config's ``ovsdb``, else ovs-vsctl's default)."""
    database = [f"--db={call.ovsdb}"] if call.ovsdb else []
    return run(["ovs-vsctl", *database, f"--timeout={OVS_TIMEOUT}", *args]).strip()


def _attach(vif: Vif, host: str, call: Invocation) -> None:
    if vif.binding == Binding.OVS:
        # What os-vif's ovs plugin makes and ovn-controller (or Neutron's OVS agent) binds: a port on
        # br-int whose iface-id is the Neutron port.
        external = (
            f"external-ids:iface-id={vif.port}",
            f"external-ids:attached-mac={vif.mac}",
            "external-ids:iface-status=active",
        )
        ip("link", "set", "dev", host, "up", netns=call.node_netns)
        vsctl(call, "--may-exist", "add-port", call.ovs_bridge, host, "--", "set", "Interface", host, *external)
        return
    bridge = bridge_name(vif.network)
    with node_lock():
        if link(bridge) is None:
            ip("link", "add", "name", bridge, "type", "bridge")
        ip("link", "set", "dev", bridge, "up")
        ip("link", "set", "dev", host, "master", bridge, "up")


def ovs_bridge_of(call: Invocation, host: str) -> str | None:
    """The OVS bridge that has port ``host``, or None (no such port, or no OVS on the node)."""
    if shutil.which("ovs-vsctl") is None:
        return None
    try:
        return vsctl(call, "port-to-br", host)
    except CniError as error:
        if NO_OVS_PORT in error.msg:
            return None
        raise


def unwire(call: Invocation) -> None:
    """Remove what ADD made: the host end (the kernel removes its peer in the pod's netns with it),
    then the bridge if no port is left on it. What is gone already is fine (DEL may come twice)."""
    host, node = host_ifname(call.container_id, call.ifname), call.node_netns
    found = link(host, node)
    master = found.get("master") if found else None
    on_bridge = bool(master and master.startswith(BRIDGE_PREFIX))
    if not on_bridge:
        # An OVS port's record outlives its interface (the runtime may have deleted the pod's netns,
        # and with it the pair): asked of OVS whether the link is there or not.
        try:
            if ovs_bridge_of(call, host) is not None:
                vsctl(call, "--if-exists", "del-port", host)
        except CniError:
            if found is not None:
                raise
            # Nothing of ours left on the node that we can see, and OVS does not answer: done.
    if found is None:
        return
    with node_lock():
        _delete(host, node)
        if (
            on_bridge
            and master
            and link(master) is not None
            and not json.loads(ip("-j", "link", "show", "master", master))
        ):
            _delete(master)


def _delete(name: str, netns: str | None = None) -> None:
    """``ip link del``; gone already (the kernel still removing it, another DEL) is fine."""
    try:
        ip("link", "del", "dev", name, netns=netns)
    except CniError as error:
        if not any(text in error.msg for text in MISSING):
            raise


def check(vif: Vif, call: Invocation) -> None:
    """CHECK: the pod's interface, address and route, and the host end's bridge, are as the VIF says."""
    assert call.netns is not None
    host = host_ifname(call.container_id, call.ifname)
    pod_end = link(call.ifname, call.netns)
    if pod_end is None or pod_end.get("address") != vif.mac:
        raise CniError(Code.NOT_AS_WIRED, f"{call.ifname} in {call.netns} is missing or has not MAC {vif.mac}")
    addresses = json.loads(ip("-j", "address", "show", "dev", call.ifname, netns=call.netns))
    held = {(a["local"], a["prefixlen"]) for a in addresses[0].get("addr_info", [])}
    if (vif.ip, vif.prefix_length) not in held:
        raise CniError(Code.NOT_AS_WIRED, f"{call.ifname} in {call.netns} lacks {vif.ip}/{vif.prefix_length}")
    routes = json.loads(ip("-j", "route", "show", "default", netns=call.netns))
    if not any(route.get("gateway") == vif.gateway for route in routes):
        raise CniError(Code.NOT_AS_WIRED, f"{call.netns} has no default route via {vif.gateway}")
    host_end = link(host, call.node_netns)
    if vif.binding == Binding.OVS:
        _check_ovs(vif, call, host, host_end is not None)
    elif host_end is None or host_end.get("master") != bridge_name(vif.network):
        raise CniError(Code.NOT_AS_WIRED, f"{host} is missing or not on {bridge_name(vif.network)}")


def _check_ovs(vif: Vif, call: Invocation, host: str, exists: bool) -> None:
    """The host end is a port of the OVS bridge whose iface-id is the VIF's port."""
    if not exists:
        raise CniError(Code.NOT_AS_WIRED, f"{host} is missing")
    bridge = ovs_bridge_of(call, host)
    if bridge != call.ovs_bridge:
        raise CniError(Code.NOT_AS_WIRED, f"{host} is not a port of OVS bridge {call.ovs_bridge} (it is on {bridge})")
    iface_id = vsctl(call, "get", "Interface", host, "external_ids:iface-id").strip('"')
    if iface_id != vif.port:
        raise CniError(Code.NOT_AS_WIRED, f"{host} has iface-id {iface_id}, not the VIF's port {vif.port}")
