"""Chassis beyond the first (testing/): the OVN data path's second node (`kuberaven testenv up --openstack --nodes 2`).

    node netns <prefix>-node: the first chassis (ovn.py)          node netns <prefix>-node1: a peer chassis
      br-int ── pods' veths, ovn-<peer>-0 (Geneve)                  br-int ── pods' veths, ovn-<first>-0 (Geneve)
      br-ex ── the external netns
      br-phy: 192.168.254.1/30 ── phy1 ════════ veth ════════ phy0 ── br-phy: 192.168.254.2/30
    OVN SB (the first's) ◄── each chassis' ovn-controller: system-id = its node's name, ovn-encap-ip = its br-phy's

A peer is a chassis of its own: its Open_vSwitch database, ovs-vswitchd (the
userspace "netdev" datapath, which makes and ends the Geneve tunnels itself:
no kernel module) and ovn-controller, registered in the first chassis'
southbound database under its node's name, so that Neutron binds the ports of
that node's pods to it. It is no gateway: br-int only (the external network is
the first's). The userspace datapath sends a tunnel's packets through the
bridge whose internal port holds the tunnel's address (the layout of Open
vSwitch's userspace tunneling guide): each chassis' br-phy, with the veth to
the other chassis as its port. The addresses (``TUNNEL_CIDR``) exist only in
the node namespaces. A peer's files are under the first's directory
(``chassis<i>/``) and its netns is named after the first's, so `down` finds it
from the environment's directory alone; it stops with the data path.
"""

from __future__ import annotations

import contextlib
import ipaddress

from .ovn import INTEGRATION_BRIDGE, UNDERLAY_BRIDGE, LocalOVN, OVNError, peer_netns
from .processes import wait_for

# The tunnels' underlay: a private range that none of kuberaven's defaults, the external network (172.24.4.0/24) or
# the VMs' network (192.168.240.0/24) use; one address per chassis, so its size bounds the chassis.
TUNNEL_CIDR = "192.168.254.0/30"
PEER_LINK = "phy0"  # a peer's end of its veth to the first chassis (the first's end: phy<i>)
TUNNEL_TYPE = "geneve"
TUNNEL_WITHIN = 30.0  # seconds for both chassis to have a Geneve port to each other (each controller saw the other)


def tunnel_addresses(chassis: int, cidr: str = TUNNEL_CIDR) -> list[ipaddress.IPv4Interface]:
    """Each chassis' address on the underlay, in order (the first chassis' first): none for a lone chassis,
    which tunnels nowhere (its tunnel address is the loopback's). An error names what ``cidr`` can hold."""
    network = ipaddress.IPv4Network(cidr)
    hosts = list(network.hosts())
    if chassis < 1:
        raise ValueError(f"a data path has at least one chassis, not {chassis}")
    if chassis > len(hosts):
        raise ValueError(f"the tunnels' range {cidr} holds {len(hosts)} chassis, not {chassis}")
    if chassis == 1:
        return []
    return [ipaddress.IPv4Interface(f"{host}/{network.prefixlen}") for host in hosts[:chassis]]


def max_chassis(cidr: str = TUNNEL_CIDR) -> int:
    """The most chassis a data path can have: one per address of the tunnels' range."""
    return len(list(ipaddress.IPv4Network(cidr).hosts()))


def link_names(index: int) -> tuple[str, str]:
    """The veth between the first chassis and peer ``index``: (the first's end, the peer's end)."""
    if index < 1:
        raise ValueError(f"peers are numbered from 1, not {index}")
    return f"phy{index}", PEER_LINK


class PeerChassis(LocalOVN):
    """Chassis number ``index`` (1, 2, …) of ``first``'s data path, named ``hostname`` (its node's name), whose
    tunnels leave from ``address``; ``first`` must tunnel from ``first_address``, on the same range."""

    gateway = False

    def __init__(
        self,
        first: LocalOVN,
        index: int,
        hostname: str,
        address: ipaddress.IPv4Interface,
        first_address: ipaddress.IPv4Interface,
    ) -> None:
        super().__init__(first.dir / f"chassis{index}", hostname, encap_ip=str(address.ip))
        if first.encap_ip != str(first_address.ip):
            raise OVNError(f"the first chassis tunnels from {first.encap_ip}, not {first_address.ip}")
        self.first, self.index = first, index
        self.address, self.first_address = address, first_address
        self.prefix = first.prefix
        self.node_netns = peer_netns(first.dir, index)
        self.external_netns = ""  # the external network is the first chassis' alone

    @property
    def sb_connection(self) -> str:
        return self.first.sb_connection

    @property
    def nb_connection(self) -> str:
        return self.first.nb_connection

    def start(self) -> None:
        """Its netns, joined to the first's by a veth, its switch, both chassis' br-phy, then ovn-controller;
        returns once each chassis has its Geneve port to the other."""
        for sub in ("run", "db", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        first_end, own_end = link_names(self.index)
        try:
            self._netns(self.node_netns)
            self._ip("-n", self.first.node_netns, "link", "add", first_end, "type", "veth",
                     "peer", "name", own_end, "netns", self.node_netns)  # fmt: skip
            self._start_switch()
            underlay(self.first, first_end, self.first_address)
            underlay(self, own_end, self.address)
            self._start_controller()
            for chassis in (self.first, self):
                what = f"{chassis.hostname}'s Geneve port"
                try:
                    wait_for(lambda chassis=chassis: chassis.controller_up() and tunnels(chassis), TUNNEL_WITHIN, what)
                except TimeoutError as error:
                    raise TimeoutError(f"{error}\n{self._tunnels_state()}") from None
        except BaseException:
            self.stop()
            raise

    def _tunnels_state(self) -> str:
        """What a missing tunnel is found from: the southbound's chassis and their encapsulations, and for each
        chassis whether its ovn-controller runs and its log's last lines."""
        lines = []
        with contextlib.suppress(OVNError, OSError):
            lines.append(self.ctl("ovn-sbctl", f"--db={self.sb_connection}", "show"))
        for chassis in (self.first, self):
            for process in chassis.processes:
                if process.name == "ovn-controller":
                    state = "runs" if process.alive() else f"exited ({process.returncode})"
                    lines.append(f"{chassis.hostname}'s ovn-controller {state}; its log ends:\n{process.tail()}")
        return "\n".join(lines)

    def stop(self) -> None:
        """Its daemons and netns (the first's end of the veth goes with the pair), and its port on the first's
        br-phy, if that switch still runs."""
        super().stop()
        first_end, _ = link_names(self.index)
        with contextlib.suppress(OVNError, OSError, ValueError):  # the first has stopped: its bridges went with it
            self.first.ctl("ovs-vsctl", "--timeout=5", "--if-exists", "del-port", UNDERLAY_BRIDGE, first_end)


def underlay(chassis: LocalOVN, link: str, address: ipaddress.IPv4Interface) -> None:
    """``chassis``' br-phy (made if missing) with ``link`` as its port and ``address`` on its internal port (a
    tap in the chassis' netns); returns once ovs-vswitchd routes the range through it (its route table follows
    the netns' own)."""
    chassis.ctl("ovs-vsctl", "--may-exist", "add-br", UNDERLAY_BRIDGE,
                "--", "set", "bridge", UNDERLAY_BRIDGE, "datapath_type=netdev",
                "--", "--may-exist", "add-port", UNDERLAY_BRIDGE, link)  # fmt: skip
    netns = chassis.node_netns
    chassis.ctl("ip", "-n", netns, "link", "set", link, "up")
    chassis.ctl("ip", "-n", netns, "address", "replace", str(address), "dev", UNDERLAY_BRIDGE)
    chassis.ctl("ip", "-n", netns, "link", "set", UNDERLAY_BRIDGE, "up")
    network = str(address.network)
    wait_for(lambda: network in chassis.ctl("ovs-appctl", "ovs/route/show"), 20, f"{chassis.hostname}'s route")


def tunnels(chassis: LocalOVN) -> list[str]:
    """The Geneve ports ovn-controller made on ``chassis``' br-int (one per other chassis)."""
    names = chassis.ctl("ovs-vsctl", "--bare", "--columns=name", "find", "interface", f"type={TUNNEL_TYPE}")
    ports = chassis.ctl("ovs-vsctl", "list-ports", INTEGRATION_BRIDGE).split()
    return [name for name in names.split() if name in ports]
