"""Open vSwitch + OVN as one chassis (testing/): the data path under the local OpenStack's Neutron ML2/OVN.

    OVN NB ovsdb-server ◄── neutron-server (ML2 ovn), Octavia's ovn provider (unix sockets)
        │ ovn-northd
    OVN SB ovsdb-server ◄── ovn-controller: chassis <hostname>, gateway-capable, physnet1 → br-ex
                                 │ OpenFlow
    Open_vSwitch ovsdb-server ◄── ovs-vswitchd (userspace "netdev" datapath), inside the node netns
                                     br-int: pods' veths (kuberaven-cni)   br-ex: the external netns

Everything lives in one directory (databases, unix sockets, pid files, logs)
and in two network namespaces, ``<prefix>-node`` (ovs-vswitchd, its bridges'
taps and the host ends of pods' veths) and ``<prefix>-ext`` (a host on the
external network, holding its gateway address): nothing appears in the root
netns and no TCP port is taken, so environments side by side cannot collide.
The userspace datapath needs no kernel module; ``userspace-tso-enable`` is set
before ovs-vswitchd starts, or TCP from veths with checksum offload would be
dropped. Daemons run in the foreground as our children; ``stop()`` stops
ovn-controller first (it would make br-int again), deletes the bridges, then
the rest, then the namespaces. More chassis may join this one's southbound
database (testing/chassis.py: each in a netns ``<prefix>-node<i>``, tunnelling
to this one over a veth); this one's ``encap_ip`` is then its end of it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
import subprocess
from pathlib import Path

from .processes import Process, wait_for

PACKAGES = ("openvswitch-switch", "openvswitch-common", "ovn-central", "ovn-host", "ovn-common")
BINARIES = ("ovsdb-server", "ovs-vswitchd", "ovn-northd", "ovn-controller")
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
OVN_SCHEMAS = {"nb": "/usr/share/ovn/ovn-nb.ovsschema", "sb": "/usr/share/ovn/ovn-sb.ovsschema"}
INTEGRATION_BRIDGE, EXTERNAL_BRIDGE = "br-int", "br-ex"
# Daemons a node's init system restarts, and so does the environment's supervisor: the flows ovn-controller
# installed stay in ovs-vswitchd while it is down, and it installs them again when it is back.
RESTARTED = ("ovn-controller",)
PHYSNET = "physnet1"  # the external network's physical network (Neutron flat network → br-ex)
CMS_OPTIONS, AS_GATEWAY = "ovn-cms-options", "enable-chassis-as-gw"  # a chassis Neutron may put routers' gateways on
SOCKET_PATH_MAX = 107  # sun_path
LOOPBACK = "127.0.0.1"  # a lone chassis' tunnel address: it has no tunnel
UNDERLAY_BRIDGE = "br-phy"  # where chassis beyond one carry their Geneve tunnels (testing/chassis.py)


class OVNError(RuntimeError):
    pass


def installed() -> bool:
    return all(Path("/usr/sbin", b).exists() or Path("/usr/bin", b).exists() for b in BINARIES)


def namespaces(directory: Path) -> tuple[str, str]:
    """The node's and the external host's network namespaces of the chassis in ``directory``: named after
    it, so two environments never share one, and found again from it alone."""
    prefix = "krv-" + hashlib.sha256(str(Path(directory).absolute()).encode()).hexdigest()[:8]
    return f"{prefix}-node", f"{prefix}-ext"


def peer_netns(directory: Path, index: int) -> str:
    """The node netns of the data path's chassis number ``index`` (1, 2, …: the chassis beyond the first, which
    testing/chassis.py starts), named after the first's so that it is found again from ``directory`` alone."""
    return f"{namespaces(directory)[0]}{index}"


def remove_namespaces(directory: Path) -> None:
    """What a chassis whose supervisor was killed leaves: its namespaces (with them its taps and veths), and
    those of the chassis beyond it (``peer_netns``)."""
    node = namespaces(directory)[0]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    peers = [n for n in (line.split()[0] for line in listed.splitlines() if line.strip()) if _is_peer(n, node)]
    for name in [*namespaces(directory), *peers]:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def _is_peer(name: str, node: str) -> bool:
    return name.startswith(node) and name[len(node) :].isdigit()


class LocalOVN:
    """One chassis named ``hostname``, with ``external_cidr``'s gateway address in the external netns.
    ``encap_ip``: its Geneve tunnels' address (the loopback's while it is the only chassis; where others join,
    its address on the underlay that testing/chassis.py makes)."""

    gateway = True  # the chassis of the external network (br-ex): this one; testing/chassis.py's are not

    def __init__(
        self, directory: Path, hostname: str, external_cidr: str = "172.24.4.0/24", encap_ip: str = LOOPBACK
    ) -> None:
        if not installed():
            raise OVNError(f"Open vSwitch/OVN not installed (Debian packages {' '.join(PACKAGES)})")
        self.dir = Path(directory).absolute()
        self.hostname = hostname
        self.encap_ip = encap_ip
        self.external = ipaddress.ip_network(external_cidr)
        self.node_netns, self.external_netns = namespaces(self.dir)
        self.prefix = self.node_netns.removesuffix("-node")
        self.processes: list[Process] = []
        self._netns_made: list[str] = []
        if len(str(self.run_dir / "ovnnb_db.sock")) > SOCKET_PATH_MAX:
            raise OVNError(f"directory {self.dir} is too long for unix socket paths (at most ~80 characters)")

    # -- where things are ----------------------------------------------------

    @property
    def run_dir(self) -> Path:
        return self.dir / "run"

    @property
    def ovsdb(self) -> str:
        """The chassis' Open_vSwitch database (what kuberaven-cni's ``ovsdb`` names)."""
        return f"unix:{self.run_dir}/db.sock"

    @property
    def nb_connection(self) -> str:
        return f"unix:{self.run_dir}/ovnnb_db.sock"

    @property
    def sb_connection(self) -> str:
        return f"unix:{self.run_dir}/ovnsb_db.sock"

    @property
    def external_gateway(self) -> str:
        return str(next(self.external.hosts()))

    def environ(self) -> dict[str, str]:
        """OVS_*/OVN_* directories: every daemon and ctl command honours them."""
        run, db, log = str(self.run_dir), str(self.dir / "db"), str(self.dir / "log")
        return {
            **os.environ,
            "OVS_RUNDIR": run,
            "OVS_DBDIR": db,
            "OVS_LOGDIR": log,
            "OVS_SYSCONFDIR": db,
            "OVN_RUNDIR": run,
            "OVN_DBDIR": db,
            "OVN_LOGDIR": log,
            "OVN_SYSCONFDIR": db,
        }

    def ctl(self, *args: str) -> str:
        """An ovs-vsctl / ovn-nbctl / ovn-sbctl / ovs-appctl command against this chassis."""
        done = subprocess.run(args, capture_output=True, text=True, env=self.environ(), check=False, timeout=60)
        if done.returncode != 0:
            raise OVNError(f"{' '.join(args)}: {done.stderr.strip()}")
        return done.stdout.strip()

    # -- start / stop ----------------------------------------------------------

    def start(self) -> None:
        for sub in ("run", "db", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        try:
            self._netns(self.node_netns)
            self._start_switch()
            self._start_ovn()
            self._external_host()
        except BaseException:
            self.stop()
            raise

    def restart_dead(self) -> list[tuple[str, int | None, str]]:
        """Start again the RESTARTED daemons that died; for each, its name, its exit status and its log's tail."""
        dead = [process for process in self.processes if process.name in RESTARTED and not process.alive()]
        told = [(process.name, process.returncode, process.tail()) for process in dead]
        for process in dead:
            process.start()
        return told

    def controller_up(self) -> bool:
        """True while ovn-controller runs; one that died is started again, as the environment's supervisor does
        once the chassis is up (restart_dead()), and the wait it is polled by is told why. Debian 12's OVN 23.03
        dies of SIGSEGV at start-up here in about one start of ten (6 of 60 starts of two chassis), also when a
        second chassis joins. Not its --monitor: the daemon it forks would outlive an environment killed with
        SIGKILL, where ovn-controller itself dies with its parent."""
        for name, status, tail in self.restart_dead():
            raise OVNError(f"{name} died (exit status {status}) and was started again; its log ended:\n{tail}")
        return True

    def _spawn(self, name: str, args: list[str]) -> Process:
        process = Process(name, args, self.dir / "log", env=self.environ())
        process.start()
        self.processes.append(process)
        return process

    def _database(self, name: str, path: Path, schema: str, extra: list[str]) -> Process:
        self.ctl("ovsdb-tool", "create", str(path), schema)
        sock = self.run_dir / f"{name}.sock"
        process = self._spawn(
            name,
            [
                "ovsdb-server",
                str(path),
                f"--remote=punix:{sock}",
                f"--pidfile={self.run_dir}/{name}.pid",
                f"--unixctl={self.run_dir}/{name}.ctl",
                f"--log-file={self.dir}/log/{name}.log",
                "-vconsole:off",
                *extra,
            ],
        )
        # Not sock.exists: ovsdb-server binds the path before it listens, and a connect in between is refused.
        wait_for(lambda: _accepts(sock), 20, name, process=process)
        return process

    def _start_switch(self) -> None:
        self._database("db", self.dir / "db" / "conf.db", OVS_SCHEMA, [])
        self.ctl("ovs-vsctl", "--no-wait", "init")
        # Read at ovs-vswitchd's start only: veths hand over TCP with partial checksums, which the
        # userspace datapath forwards as they are unless it takes them as TSO packets.
        external_ids = {
            "system-id": self.hostname,
            "hostname": self.hostname,
            "ovn-remote": self.sb_connection,
            "ovn-encap-type": "geneve",
            "ovn-encap-ip": self.encap_ip,
            "ovn-bridge-datapath-type": "netdev",
            **({CMS_OPTIONS: AS_GATEWAY} if self.gateway else {}),
        }
        self.ctl(
            "ovs-vsctl",
            "--no-wait",
            "set",
            "open",
            ".",
            "other_config:userspace-tso-enable=true",
            *(f"external_ids:{k}={v}" for k, v in external_ids.items()),
        )
        switch = self._spawn(
            "ovs-vswitchd",
            [
                "nsenter",
                f"--net=/run/netns/{self.node_netns}",
                "ovs-vswitchd",
                f"unix:{self.run_dir}/db.sock",
                # As ovs-ctl runs it: a crash (SIGABRT: the userspace datapath's conntrack has asserted under
                # the tests) is followed by a new ovs-vswitchd, which takes the bridges and ports back.
                "--monitor",
                "--pidfile",
                "--log-file",
                "-vconsole:off",
            ],
        )
        wait_for(lambda: self.ctl("ovs-appctl", "-t", "ovs-vswitchd", "version"), 20, "ovs-vswitchd", process=switch)
        if self.gateway:
            self._external_bridge()

    def _external_bridge(self) -> None:
        self.ctl(
            "ovs-vsctl",
            "--may-exist",
            "add-br",
            EXTERNAL_BRIDGE,
            "--",
            "set",
            "bridge",
            EXTERNAL_BRIDGE,
            "datapath_type=netdev",
        )
        # After br-ex exists, or ovn-controller complains it has no bridge for the network.
        self.ctl("ovs-vsctl", "set", "open", ".", f"external_ids:ovn-bridge-mappings={PHYSNET}:{EXTERNAL_BRIDGE}")

    def _start_ovn(self) -> None:
        self._database("ovnnb_db", self.dir / "db" / "ovnnb_db.db", OVN_SCHEMAS["nb"], [])
        self._database("ovnsb_db", self.dir / "db" / "ovnsb_db.db", OVN_SCHEMAS["sb"], [])
        self._spawn(
            "ovn-northd",
            [
                "ovn-northd",
                f"--ovnnb-db={self.nb_connection}",
                f"--ovnsb-db={self.sb_connection}",
                "--pidfile",
                "--log-file",
                "-vconsole:off",
            ],
        )
        self._start_controller()

    def _start_controller(self) -> None:
        self._spawn(
            "ovn-controller",
            ["ovn-controller", f"unix:{self.run_dir}/db.sock", "--pidfile", "--log-file", "-vconsole:off"],
        )
        wait_for(lambda: self.controller_up() and self._chassis_registered(), 30, "the OVN chassis", interval=0.1)
        if self.gateway:
            self._gateway_for_neutron()
        self.ctl("ovs-vsctl", "--timeout=20", "wait-until", "bridge", INTEGRATION_BRIDGE, "datapath_type=netdev")

    def _gateway_for_neutron(self) -> None:
        """Say on the chassis' southbound row, where Debian 12's Neutron (Zed) reads them, that it is a gateway
        and bridges the external network: OVN 23.03's ovn-controller writes both to the row's other_config only.
        Without them Neutron takes every chassis for a gateway, and may schedule the router's external port on
        one that does not reach the external network (a second chassis): floating IPs then answer nothing."""
        self.ctl(
            "ovn-sbctl",
            "set",
            "chassis",
            self.hostname,
            f"external_ids:{CMS_OPTIONS}={AS_GATEWAY}",
            f"external_ids:ovn-bridge-mappings={PHYSNET}:{EXTERNAL_BRIDGE}",
        )

    def _chassis_registered(self) -> bool:
        names = self.ctl("ovn-sbctl", f"--db={self.sb_connection}", "--bare", "--columns=hostname", "list", "chassis")
        return self.hostname in names.split()

    def _external_host(self) -> None:
        """The external netns: a host on br-ex with the external network's gateway address."""
        self._netns(self.external_netns)
        host = f"{self.prefix[4:]}ex"  # the veth's end on br-ex (in the node netns), ≤ 15 characters
        self._ip(
            "-n",
            self.node_netns,
            "link",
            "add",
            host,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            self.external_netns,
        )
        self._ip("-n", self.external_netns, "link", "set", "lo", "up")
        self._ip(
            "-n",
            self.external_netns,
            "address",
            "add",
            f"{self.external_gateway}/{self.external.prefixlen}",
            "dev",
            "eth0",
        )
        self._ip("-n", self.external_netns, "link", "set", "eth0", "up")
        self._ip("-n", self.node_netns, "link", "set", host, "up")
        self.ctl("ovs-vsctl", "--may-exist", "add-port", EXTERNAL_BRIDGE, host)

    def _netns(self, name: str) -> None:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)  # a crashed run's
        self._ip("netns", "add", name)
        self._netns_made.append(name)
        self._ip("-n", name, "link", "set", "lo", "up")

    @staticmethod
    def _ip(*args: str) -> None:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OVNError(f"ip {' '.join(args)}: {done.stderr.strip()}")

    def stop(self) -> None:
        by_name = {p.name: p for p in self.processes}
        if "ovn-controller" in by_name:
            by_name["ovn-controller"].stop()  # first: it makes br-int again
        if "ovs-vswitchd" in by_name and by_name["ovs-vswitchd"].alive():
            subprocess.run(
                [
                    "ovs-vsctl",
                    "--timeout=5",
                    "--if-exists",
                    "del-br",
                    INTEGRATION_BRIDGE,
                    "--",
                    "--if-exists",
                    "del-br",
                    EXTERNAL_BRIDGE,
                    "--",
                    "--if-exists",
                    "del-br",
                    UNDERLAY_BRIDGE,
                ],
                capture_output=True,
                env=self.environ(),
                check=False,
            )
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        for name in reversed(self._netns_made):  # with the node netns go the taps and the veths' host ends
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        self._netns_made.clear()


def _accepts(sock: Path) -> bool:
    """A server listens on the unix socket ``sock`` (else OSError, which wait_for reports if it lasts)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(sock))
    return True
