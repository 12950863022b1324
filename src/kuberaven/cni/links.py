"""Kernel networking for kuberaven-cni (cni/, the I/O edge): veth pairs, bridges, addresses, through ``ip``.

    plugin.py ADD ──► wire():   bridge of the network (made once, up)
                                veth pair: host end on the bridge, pod end made inside the pod's netns
                                as CNI_IFNAME with the VIF's MAC, MTU, IP/prefix, default route
              DEL ──► unwire(): the host end (the kernel removes its peer), the bridge once empty
              CHECK ──► check(): each of those as the VIF says

The ``ip`` command (iproute2) and ``nsenter`` (util-linux) are what the
plugin needs on the node; both take the netns path the runtime gives.
Bridges are shared by the pods of a network, so making one, attaching to it
and deleting it once empty happen under one lock file per node.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..network.vif import Binding, Vif
from .spec import BRIDGE_PREFIX, CniError, Code, Invocation, bridge_name, host_ifname

LOCK = Path("/run/kuberaven-cni.lock")
OVS_BRIDGE = "br-int"  # where Neutron's OVS agent looks for the ports it binds
OVS_DATAPATH = "ovs-system"  # what the kernel shows as the master of an OVS port
MISSING = ("Cannot find device", "does not exist")


def run(command: list[str]) -> str:
    """Run a command; a failure is a CniError (I/O failure) naming the command and what it said."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CniError(Code.IO_FAILURE, f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def ip(*args: str, netns: str | None = None) -> str:
    """``ip``, in the netns at path ``netns`` if given (``ip -n`` takes only names under /run/netns)."""
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
    host = host_ifname(call.container_id, call.ifname)
    if link(host) is not None:
        ip("link", "del", "dev", host)
    if link(call.ifname, call.netns) is not None:
        ip("link", "del", "dev", call.ifname, netns=call.netns)
    mtu = str(vif.mtu)
    ip("link", "add", host, "mtu", mtu, "type", "veth", "peer", "name", call.ifname, "mtu", mtu, "netns", call.netns)
    ip("link", "set", "dev", "lo", "up", netns=call.netns)
    ip("link", "set", "dev", call.ifname, "address", vif.mac, "up", netns=call.netns)
    ip("address", "add", f"{vif.ip}/{vif.prefix_length}", "dev", call.ifname, netns=call.netns)
    ip("route", "replace", "default", "via", vif.gateway, "dev", call.ifname, "onlink", netns=call.netns)
    _attach(vif, host)
    found = link(host)
    assert found is not None, f"{host} made above"
    return host, str(found["address"])


def _attach(vif: Vif, host: str) -> None:
    if vif.binding == Binding.OVS:
        # What Neutron's OVS agent binds: a port on br-int whose iface-id is the Neutron port.
        external = (f"external-ids:iface-id={vif.port}", f"external-ids:attached-mac={vif.mac}",
                    "external-ids:iface-status=active")  # fmt: skip
        run(["ovs-vsctl", "--may-exist", "add-port", OVS_BRIDGE, host, "--", "set", "Interface", host, *external])
        ip("link", "set", "dev", host, "up")
        return
    bridge = bridge_name(vif.network)
    with node_lock():
        if link(bridge) is None:
            ip("link", "add", "name", bridge, "type", "bridge")
        ip("link", "set", "dev", bridge, "up")
        ip("link", "set", "dev", host, "master", bridge, "up")


def unwire(call: Invocation) -> None:
    """Remove what ADD made: the host end (the kernel removes its peer in the pod's netns with it),
    then the bridge if no port is left on it. What is gone already is fine (DEL may come twice)."""
    host = host_ifname(call.container_id, call.ifname)
    found = link(host)
    if found is None:
        return
    master = found.get("master")
    with node_lock():
        if master == OVS_DATAPATH:  # an OVS port: its record goes too
            run(["ovs-vsctl", "--if-exists", "del-port", OVS_BRIDGE, host])
        _delete(host)
        if master and master.startswith(BRIDGE_PREFIX) and link(master) is not None \
                and not json.loads(ip("-j", "link", "show", "master", master)):  # fmt: skip
            _delete(master)


def _delete(name: str) -> None:
    """``ip link del``; gone already (the kernel still removing it, another DEL) is fine."""
    try:
        ip("link", "del", "dev", name)
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
    host_end = link(host)
    if host_end is None or (vif.binding == Binding.BRIDGE and host_end.get("master") != bridge_name(vif.network)):
        raise CniError(Code.NOT_AS_WIRED, f"{host} is missing or not on {bridge_name(vif.network)}")
