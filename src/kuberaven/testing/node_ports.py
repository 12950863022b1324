"""Node ports on the local data path (testing/): kube-proxy beside kuberaven, `testenv up --openstack --node-ports`.

    Neutron: network kuberaven-nodes + subnet ──► per node a port (bound to its chassis, no port security)
    chassis netns: br-int ── nport<i> (iface-id = the port) ══ veth ══ node<i>: the port's MAC, the node's address
        routes: the pods' pool, the Services' CIDR and the external network via the subnet's gateway
    the fake kubelet: InternalIP = the node's address (kube-proxy and the node ports answer on it)
    per node: netns_forward (127.0.0.1:<apiserver port> in the netns → the root netns')
              + kube-proxy --proxy-mode iptables inside the node netns, with the environment's kubeconfig
    join(): the subnet joins the cluster's router (kuberaven makes it), so the gateway leads to the pods, and each
    node's port gets a floating IP, by which the external netns reaches it

kube-proxy serves what kuberaven does not: <node address>:<nodePort>. Its rules for cluster IPs stay unused by
pods, whose packets never cross the node's iptables (kuberaven-cni wires them into OVN). The rules live in the
node's netns and go with it on `down`; Neutron's records go with the environment's database.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..network.backend import NetworkOptions
from .controlplane import SERVICE_CIDR
from .k8s_extra import extra_binary
from .ovn import INTEGRATION_BRIDGE
from .processes import STDLIB_PYTHON, Process, wait_for

if TYPE_CHECKING:
    from .ovn import LocalOVN

NODE_NETWORK = "kuberaven-nodes"
NODE_CIDR = "192.168.241.0/24"  # the nodes' addresses: none of kuberaven's default CIDRs, nor the VMs' or external
NODE_NIC = "node{index}"  # the node's end of its veth (its address), in the chassis netns
OVS_NIC = "nport{index}"  # the end on br-int
ACTIVE_WITHIN = 60.0  # seconds for OVN to bind a node's port and Neutron to report it ACTIVE
PROXY_READY_WITHIN = 60.0  # seconds for kube-proxy to answer its healthz
METRICS = "127.0.0.1:10249"  # kube-proxy's own; inside the node's netns, where nothing else listens
HEALTHZ = "127.0.0.1:10256"
FORWARDING = "net.ipv4.ip_forward"  # the node netns' own (a new netns does not forward)
# Left as the kernel has them: kube-proxy would otherwise write nf_conntrack_max and the hash size, which are
# the whole machine's, not the netns'.
CONNTRACK_UNTOUCHED = ("--conntrack-max-per-core", "0", "--conntrack-min", "0")
# `ethtool -K <nic> tx off` without ethtool: the SIOCETHTOOL ioctl, run inside a netns. A veth leaves TCP's
# checksum to offload; the userspace datapath's NAT (a floating IP's) spoils such a partial checksum, and a node
# that forwards the packet on to a pod sends it with a wrong one, which OVN's conntrack drops. So the nodes' NICs
# and, with node ports, the external host compute their checksums (as tests/datapath.py's pods that cross a
# tunnel do).
TX_CHECKSUMS_OFF = """
import array, fcntl, socket, struct, sys
SIOCETHTOOL, ETHTOOL_STXCSUM = 0x8946, 0x17
value = array.array("B", struct.pack("II", ETHTOOL_STXCSUM, 0))
request = struct.pack("16sP", sys.argv[1].encode(), value.buffer_info()[0])
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
    fcntl.ioctl(control.fileno(), SIOCETHTOOL, request)
"""
# Any HTTP answer (an error status too): urllib raises only when nothing answered.
ANSWERS = """
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=2).close()
except urllib.error.HTTPError:
    pass
"""
CONNECTS = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2).close()"


@dataclass(frozen=True)
class NodeLeg:
    """A node's port into the pods' networks: its node, netns, Neutron port, MAC, address."""

    node: str
    netns: str
    port: str
    mac: str
    ip: str


def routed_cidrs(external_cidr: str) -> list[str]:
    """What the node reaches through its subnet's gateway: the pods' addresses (kuberaven-cni's namespace
    pool), the Services' cluster IPs, and the external network (replies to outside clients)."""
    return [NetworkOptions().namespace_pool, SERVICE_CIDR, external_cidr]


def proxy_args(binary: Path, kubeconfig: Path, node: str) -> list[str]:
    """kube-proxy for ``node`` in iptables mode, run inside the node's netns."""
    return [
        *("ip", "netns", "exec"),
        "{netns}",
        str(binary),
        *("--kubeconfig", str(kubeconfig), "--hostname-override", node),
        *("--proxy-mode", "iptables", "--cluster-cidr", NetworkOptions().namespace_pool),
        *("--metrics-bind-address", METRICS, "--healthz-bind-address", HEALTHZ),
        *CONNTRACK_UNTOUCHED,
    ]


class NodePorts:
    """The nodes' legs into ``openstack``'s OVN and, once started, a kube-proxy each (logs in ``logs``)."""

    def __init__(self, openstack: Any, logs: Path) -> None:
        self.openstack, self.logs = openstack, logs
        self.legs: list[NodeLeg] = []
        self.gateway = ""
        self.subnet = ""
        self.processes: list[Process] = []

    def plug(self, chassis: list[LocalOVN]) -> dict[str, str]:
        """The nodes' network, the port of each node of ``chassis`` plugged and ACTIVE: node name → its address
        (its InternalIP)."""
        conn = self.openstack.connection()
        try:
            network = conn.network.create_network(name=NODE_NETWORK)
            subnet = conn.network.create_subnet(
                network_id=network.id, name=NODE_NETWORK, ip_version=4, cidr=NODE_CIDR, enable_dhcp=False
            )
            self.subnet, self.gateway = subnet.id, subnet.gateway_ip
            for index, ovn in enumerate(chassis):
                port = conn.network.create_port(
                    network_id=network.id, name=f"node-{ovn.hostname}", binding_host_id=ovn.hostname,
                    device_owner="compute:kuberaven-node", device_id=ovn.hostname, port_security_enabled=False,
                )  # fmt: skip
                leg = NodeLeg(ovn.hostname, ovn.node_netns, port.id, port.mac_address, port.fixed_ips[0]["ip_address"])
                self.legs.append(leg)
                self._wire(ovn, leg, index, int(network.mtu))
            outside = chassis[0]  # the external network's chassis: its external host computes its checksums
            outside.ctl("ip", "netns", "exec", outside.external_netns, *STDLIB_PYTHON, "-c", TX_CHECKSUMS_OFF, "eth0")
            for leg in self.legs:
                active = lambda leg=leg: conn.network.get_port(leg.port).status == "ACTIVE"  # noqa: E731
                wait_for(active, ACTIVE_WITHIN, f"{leg.node}'s node port", interval=0.5)
        finally:
            conn.close()
        return {leg.node: leg.ip for leg in self.legs}

    def _wire(self, ovn: LocalOVN, leg: NodeLeg, index: int, mtu: int) -> None:
        """A veth in the chassis netns: one end on br-int as os-vif plugs a NIC (iface-id = the port), the other
        the node's address with routes through the subnet's gateway."""
        nic, host, run = NODE_NIC.format(index=index), OVS_NIC.format(index=index), ovn.ctl
        prefix = ipaddress.ip_network(NODE_CIDR).prefixlen
        run("ip", "-n", leg.netns, "link", "add", host, "mtu", str(mtu), "type", "veth", "peer", "name", nic)
        run("ip", "-n", leg.netns, "link", "set", nic, "address", leg.mac, "mtu", str(mtu), "up")
        run("ip", "-n", leg.netns, "address", "add", f"{leg.ip}/{prefix}", "dev", nic)
        run("ip", "-n", leg.netns, "link", "set", host, "up")
        # A node port's packets are DNATed to a pod and leave by the way they came: the node forwards.
        run("ip", "netns", "exec", leg.netns, "sysctl", "-qw", f"{FORWARDING}=1")
        for cidr in routed_cidrs(str(ovn.external)):
            run("ip", "-n", leg.netns, "route", "replace", cidr, "via", self.gateway, "dev", nic)
        external = (f"external_ids:iface-id={leg.port}", f"external_ids:attached-mac={leg.mac}",
                    "external_ids:iface-status=active")  # fmt: skip
        run("ovs-vsctl", "--may-exist", "add-port", INTEGRATION_BRIDGE, host, "--", "set", "Interface", host, *external)
        # The userspace datapath passes a veth's packets on with their checksums left to offload: computed here.
        run("ip", "netns", "exec", leg.netns, *STDLIB_PYTHON, "-c", TX_CHECKSUMS_OFF, nic)

    def start(self, kubeconfig: Path, apiserver_port: int) -> None:
        """Per node the forwarder to the API server, then kube-proxy; returned once each answers its healthz."""
        binary = extra_binary("kube-proxy")
        for leg in self.legs:
            forward = [sys.executable, "-m", "kuberaven.testing.netns_forward", leg.netns, str(apiserver_port)]
            forwarder = self._spawn(f"apiserver-forward-{leg.node}", forward)
            wait_for(lambda leg=leg: _listening(leg.netns, apiserver_port), PROXY_READY_WITHIN,
                     f"the API server's forwarder into {leg.netns}", interval=0.2, process=forwarder)  # fmt: skip
            args = [a.format(netns=leg.netns) for a in proxy_args(binary, kubeconfig, leg.node)]
            proxy = self._spawn(f"kube-proxy-{leg.node}", args)
            wait_for(lambda leg=leg: _healthy(leg.netns), PROXY_READY_WITHIN, f"kube-proxy of {leg.node}",
                     interval=0.5, process=proxy)  # fmt: skip

    def _spawn(self, name: str, args: list[str]) -> Process:
        process = Process(name, args, self.logs)
        process.start()
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def describe(self) -> dict[str, Any]:
        return {"subnet": self.subnet, "gateway": self.gateway, "cidr": NODE_CIDR,
                "nodes": [{"node": leg.node, "address": leg.ip, "port": leg.port} for leg in self.legs]}  # fmt: skip


def _healthy(netns: str) -> bool:
    """Whether the kube-proxy in ``netns`` answers its healthz (any HTTP answer: it serves)."""
    probe = [*("ip", "netns", "exec", netns, *STDLIB_PYTHON, "-c"), ANSWERS, f"http://{HEALTHZ}/healthz"]
    return subprocess.run(probe, capture_output=True, check=False, timeout=10).returncode == 0


def _listening(netns: str, port: int) -> bool:
    """Whether something inside ``netns`` listens on 127.0.0.1:``port`` (a TCP connection is made)."""
    probe = [*("ip", "netns", "exec", netns, *STDLIB_PYTHON, "-c"), CONNECTS, str(port)]
    return subprocess.run(probe, capture_output=True, check=False, timeout=10).returncode == 0


def join(conn: Any, router: Any, described: dict[str, Any]) -> dict[str, str]:
    """The nodes' subnet (``described``: env.json's openstack.node_ports) joins ``router``, the cluster's, which
    kuberaven makes: the nodes' gateway then leads to the pods and out. Each node's port gets a floating IP on
    the router's external network: node name → it. Outside clients reach a node by it, as a cloud's VMs are
    reached: the router SNATs what its subnets send out, so a reply from a node's own address would not be the
    one a client reached."""
    conn.network.add_interface_to_router(router, subnet=described["subnet"])
    external = router.external_gateway_info["network_id"]
    found = {}
    for node in described["nodes"]:
        ip = conn.network.create_ip(floating_network_id=external, port_id=node["port"])
        found[node["node"]] = ip.floating_ip_address
    return found


def leave(conn: Any, router: Any, described: dict[str, Any]) -> None:
    """Undo join(): the nodes' floating IPs, then the router's interface on their subnet (a router with it left
    could not be deleted by kuberaven)."""
    for node in described["nodes"]:
        for ip in conn.network.ips(port_id=node["port"]):
            conn.network.delete_ip(ip)
    conn.network.remove_interface_from_router(router, subnet=described["subnet"])
