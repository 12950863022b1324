"""The whole local test environment (testing/): control plane + fake kubelet + broker (+ PostgreSQL)
(+ an OpenStack with an OVN data path, whose chassis is the environment's node, and that node's agent,
`kuberaven node`, which kuberaven-cni calls) (+ N "VMs" on that chassis, each a nested node with its agent:
testing/nested.py).

``TestEnv`` runs in-process (pytest fixtures). ``kuberaven testenv up`` runs
it in a detached supervisor process (``python -m kuberaven.testing.env``)
that writes ``<dir>/env.json`` once everything is ready and stops everything
on SIGTERM (``kuberaven testenv down``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..kube.client import KubeClient
from .agents import cni_config, start_agent
from .broker import Broker
from .chassis import PeerChassis, max_chassis
from .controlplane import ControlPlane
from .k8s_build import binaries
from .k8s_extra import extra_binary
from .kubelet import NODE_PREFIX, FakeKubelet
from .nested import NestedVms, Vm, remove_vm_namespaces
from .node_ports import NodePorts
from .openstack import CLOUD, EXTERNAL_NETWORK, OVN_DIR, LocalOpenStack
from .ovn import RESTARTED, LocalOVN, remove_namespaces
from .postgres import PostgresServer
from .processes import Process, running
from .restart import ANSWER_TIMEOUT, Restarted, RestartFailed, answer_requests, ask, check_component
from .vm import QemuVms
from .vm_image import guest

STATE_FILE = "env.json"
SUPERVISOR_LOG = "supervisor.log"
SERVER_ERRORS = 10  # ERROR lines of each server's log told when the environment fails to start
DIED = "died, stopping the environment"  # what the supervisor logs when a server of it dies
RESTARTED_NOTE = "died, started again"  # and when one that a node restarts (ovn-controller) died
PLANNED_RESTART = "restart asked for"  # and when `kuberaven testenv restart` had it restart a server
OPENSTACK_DIR = "openstack"
CNI_SOCKET = "cni.sock"  # in the environment's directory: where its node's `kuberaven node` serves kuberaven-cni
VM_SOCKET = "cni-{node}.sock"  # … and where another node's does (a nested node's, a further chassis' node's)


class EnvError(ValueError):
    pass


class TestEnv:
    """Control plane, fake kubelet (on its own loop in a thread), broker and, if asked, PostgreSQL."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        directory: Path | None = None,
        nodes: int = 1,
        broker: bool = True,
        postgres: bool = False,
        openstack: bool = False,
        nested: int = 0,
        park_for: float | None = None,
        node_ports: bool = False,
        nested_netns: bool = False,
    ) -> None:
        """``openstack``: also Neutron + Octavia on an OVN data path, with a chassis per node. ``nested``:
        that many VMs on the chassis (QEMU: testing/vm.py; ``nested_netns``: namespaces, testing/nested.py), each
        a Kubernetes node whose pods are its trunk's subports. ``park_for``:
        the node agent's ``--park-for`` (None: its default). ``node_ports``: each node a port into OVN and a
        kube-proxy serving its node ports (testing/node_ports.py)."""
        _check_shape(nodes, openstack, nested, node_ports)
        self.owns_directory = directory is None  # a directory of our own making goes with stop()
        self.dir = Path(directory or tempfile.mkdtemp(prefix="kuberaven-env-")).absolute()
        self.control_plane = ControlPlane(self.dir)
        # The node's name is the chassis' hostname: Neutron binds a pod's port (binding:host_id = the
        # pod's node) to the chassis of that hostname.
        self.openstack = (
            LocalOpenStack(self.dir / OPENSTACK_DIR, data_path=True, hostname=f"{NODE_PREFIX}0", peers=_peers(nodes))
            if openstack
            else None
        )
        self.broker = Broker(self.dir) if broker else None
        # In a directory of its own: the postgres user must reach it, and ours may be private.
        self.postgres = PostgresServer() if postgres else None
        self.database_url: str | None = None
        self.nodes = nodes
        self.kubelet: FakeKubelet | None = None
        self.agent: Process | None = None  # `kuberaven node` for the data path's node
        self.park_for = park_for
        self.vms = _vms(self.openstack, nested, nested_netns, self.dir, self.control_plane.apiserver_port)
        self.node_ports = NodePorts(self.openstack, self.dir) if self.openstack is not None and node_ports else None
        self.vm_agents: dict[str, Process] = {}  # a nested node's name → its `kuberaven node`
        self.peer_agents: dict[str, Process] = {}  # a further chassis' node's name → its `kuberaven node`
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started_by: threading.Thread | None = None  # whose children the servers are (restart_apiserver)

    def start(self) -> None:
        # In this thread, one after the other: a child started by another thread would be killed when
        # that thread ends (PR_SET_PDEATHSIG follows the thread that forked it).
        self._started_by = threading.current_thread()
        try:
            self.control_plane.start()
            if self.broker is not None:
                self.broker.start()
            if self.postgres is not None:
                self.postgres.start()
                self.database_url = self.postgres.create_database("kuberaven")
            if self.openstack is not None:
                self.openstack.start()
            if self.vms is not None:
                self.vms.start()
            addresses = self.node_ports.plug(_chassis(self.openstack)) if self.node_ports is not None else None
            self._start_kubelet(addresses)
            if self.node_ports is not None:
                self.node_ports.start(self.control_plane.kubeconfig, self.control_plane.apiserver_port)
            if self.openstack is not None:
                self._start_agent()
                for peer in self.openstack.peers:
                    self._start_peer_agent(peer)
            for vm in self.vms.vms if self.vms is not None else []:
                self._start_vm_agent(vm)
        except BaseException:
            self.stop()
            raise

    def _start_kubelet(self, addresses: dict[str, str] | None = None) -> None:
        started = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            client = KubeClient.from_kubeconfig(self.control_plane.kubeconfig)
            # With the data path, pods wait for their VIF, as they do where kuberaven-cni is the CNI.
            nested = {vm.node: vm.ip for vm in self.vms.vms} if self.vms is not None else None
            self.kubelet = FakeKubelet(
                client, self.nodes, vif_wait=self.openstack is not None, nested=nested, addresses=addresses
            )
            try:
                await self.kubelet.start()
            except BaseException as error:
                failure.append(error)
                started.set()
                return
            started.set()
            await self.kubelet.wait()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(main())

        self._thread = threading.Thread(target=run, name="fake-kubelet", daemon=True)
        self._thread.start()
        started.wait(120)
        if failure:
            raise RuntimeError(f"fake kubelet failed to start: {failure[0]}") from failure[0]

    async def kubelet_idle(self, timeout: float = 30) -> None:
        """Until the fake kubelet has handled every pod event it has received (on its own loop): a test that made
        a pod change before a later one the kubelet has acted on knows that the kubelet has seen the first too."""
        assert self.kubelet is not None and self._loop is not None, "no fake kubelet runs"
        idle = asyncio.run_coroutine_threadsafe(self.kubelet.engine.wait_idle(timeout), self._loop)
        await asyncio.wrap_future(idle)

    @property
    def cni_socket(self) -> Path:
        return self.dir / CNI_SOCKET

    def _start_agent(self) -> None:
        """`kuberaven node` for the one node, with the chassis' Open vSwitch database and netns; ready once its
        STATUS succeeds."""
        assert self.openstack is not None and self.openstack.ovn is not None
        ovn = self.openstack.ovn
        park = ("--park-for", str(self.park_for)) if self.park_for is not None else ()
        options = ("--ovsdb", ovn.ovsdb, "--node-netns", f"/run/netns/{ovn.node_netns}", *park)
        self.agent = self._agent("kuberaven-node", f"{NODE_PREFIX}0", self.cni_socket, options)

    def _start_vm_agent(self, vm: Vm) -> None:
        """`kuberaven node` for a nested node: in the VM, or beside it with the VM's netns as its node side; it has
        no Open vSwitch."""
        if isinstance(self.vms, QemuVms):
            self.vm_agents[vm.node] = self.vms.start_agent(vm, self.control_plane.kubeconfig, self.dir)
            return
        options = ("--node-netns", f"/run/netns/{vm.netns}")
        self.vm_agents[vm.node] = self._agent(f"kuberaven-node-{vm.node}", vm.node, self.vm_socket(vm), options)

    def _start_peer_agent(self, peer: PeerChassis) -> None:
        """`kuberaven node` for a further chassis' node, with that chassis' Open vSwitch database and netns."""
        park = ("--park-for", str(self.park_for)) if self.park_for is not None else ()
        options = ("--ovsdb", peer.ovsdb, "--node-netns", f"/run/netns/{peer.node_netns}", *park)
        socket = self.node_socket(peer.hostname)
        self.peer_agents[peer.hostname] = self._agent(f"kuberaven-node-{peer.hostname}", peer.hostname, socket, options)

    def node_socket(self, node: str) -> Path:
        """Where the agent of ``node`` (a nested node, a further chassis' node) serves kuberaven-cni."""
        return self.dir / VM_SOCKET.format(node=node)

    def _agents(self) -> list[tuple[Process, Callable[[], None]]]:
        """Every node agent running, with what starts it again."""
        agents: list[tuple[Process, Callable[[], None]]] = [(self.agent, self._start_agent)] if self.agent else []
        for vm in self.vms.vms if self.vms is not None else []:
            if vm.node in self.vm_agents:
                agents.append((self.vm_agents[vm.node], functools.partial(self._start_vm_agent, vm)))
        for peer in self.openstack.peers if self.openstack is not None else []:
            if peer.hostname in self.peer_agents:
                agents.append((self.peer_agents[peer.hostname], functools.partial(self._start_peer_agent, peer)))
        return agents

    def _agent(self, name: str, node: str, socket: Path, options: tuple[str, ...]) -> Process:
        return start_agent(name, node, self.control_plane.kubeconfig, socket, options, self.dir)

    def vm_socket(self, vm: Vm) -> Path:
        return self.dir / VM_SOCKET.format(node=vm.node)

    def cni_config(self, socket: Path | None = None) -> dict[str, Any]:
        """What a container runtime on the node (or in a VM: that agent's ``socket``) passes to kuberaven-cni on
        stdin (it adds only CNI_*)."""
        return cni_config(socket or self.cni_socket)

    def stop(self) -> None:
        for agent, _ in self._agents():
            agent.stop()
        if self.kubelet is not None and self._loop is not None and self._thread is not None:
            future = asyncio.run_coroutine_threadsafe(self.kubelet.stop(), self._loop)
            with contextlib.suppress(Exception):
                future.result(30)
            self._thread.join(10)
        if self.broker is not None:
            self.broker.stop()
        if self.postgres is not None:
            self.postgres.stop()
        if self.node_ports is not None:
            self.node_ports.stop()
        if self.vms is not None:  # before the chassis: a VM's tap is a port of its br-int
            self.vms.stop()
        if self.openstack is not None:
            self.openstack.stop()
        self.control_plane.stop()
        if self.owns_directory:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart_agent(self) -> bool:
        """Start a node agent again if it died (True), as the kubelet restarts a DaemonSet's container: pods
        it wired stay wired, and a runtime retries the ADDs it cut."""
        died = [(agent, start) for agent, start in self._agents() if not agent.alive()]
        for agent, start in died:
            print(f"{agent.name} died, starting it again:\n{agent.tail()}", flush=True)
            start()
        return bool(died)

    def restart_ovn(self) -> None:
        """Start ovn-controller again if it died, as a node's init system would (testing/ovn.py's RESTARTED)."""
        for chassis in _chassis(self.openstack):
            for name, status, tail in chassis.restart_dead():
                print(f"{chassis.hostname}'s {name} {RESTARTED_NOTE} (exit status {status}):\n{tail}", flush=True)

    def restart_apiserver(self) -> Restarted:
        """Kill kube-apiserver and start it again (same flags, port, certificates, etcd data), leaving every other
        server alone; return once /readyz answers again. From the thread that started the environment only: a
        server is killed when the thread that forked it ends."""
        if threading.current_thread() is not self._started_by:
            raise EnvError("restart the API server from the thread that started the environment")
        assert self.control_plane.apiserver is not None
        previous = self.control_plane.apiserver.pid
        down_for = self.control_plane.restart_apiserver()
        return Restarted("apiserver", previous, self.control_plane.apiserver.pid, round(down_for, 2))

    def restart(self, component: str) -> Restarted:
        """Restart ``component`` (one of restart.RESTARTABLE): what `kuberaven testenv restart` asks for."""
        check_component(component)
        return {"apiserver": self.restart_apiserver}[component]()

    def servers(self) -> list[Process]:
        """Every server process of the environment but the node agent: a supervisor stops the environment when
        one of these dies, and restarts the agent (restart_agent)."""
        servers = [self.broker, self.postgres]
        stack = [*self.openstack.processes] if self.openstack else []
        stack += [process for chassis in _chassis(self.openstack) for process in _watched(chassis)]
        stack += self.node_ports.processes if self.node_ports is not None else []
        stack += self.vms.processes if self.vms is not None else []
        return [
            *self.control_plane.processes(),
            *(s.process for s in servers if s is not None and s.process),
            *stack,
        ]

    def describe_openstack(self) -> dict[str, Any] | None:
        """Where kuberaven finds this OpenStack, and what a runtime on the node gives kuberaven-cni (its node
        agent's socket; the agent knows the node's Open vSwitch database and netns, given here too)."""
        if self.openstack is None or self.openstack.ovn is None:
            return None
        ovn = self.openstack.ovn
        return {
            "clouds_yaml": str(self.openstack.clouds_yaml),
            "cloud": CLOUD,
            "external_network": EXTERNAL_NETWORK,
            "external_netns": ovn.external_netns,
            "nb_connection": ovn.nb_connection,  # OVN's northbound database: `run`'s network_ovn_nb_connection
            "ovsdb": ovn.ovsdb,
            "node_netns": ovn.node_netns,
            "cni_config": self.cni_config(),
            "nested": [self.vms.describe(self.cni_config(self.vm_socket(vm)), vm) for vm in self.vms.vms]
            if self.vms is not None
            else [],
            "chassis": [self._describe_chassis(chassis) for chassis in _chassis(self.openstack)],
            "node_ports": self.node_ports.describe() if self.node_ports is not None else None,
        }

    def _describe_chassis(self, chassis: LocalOVN) -> dict[str, Any]:
        """A node's chassis: its name, Open vSwitch database, netns, tunnel address and the cni_config of its
        agent."""
        first = self.openstack is not None and chassis is self.openstack.ovn
        socket = self.cni_socket if first else self.node_socket(chassis.hostname)
        return {"node": chassis.hostname, "ovsdb": chassis.ovsdb, "node_netns": chassis.node_netns,
                "encap_ip": chassis.encap_ip, "cni_config": self.cni_config(socket)}  # fmt: skip

    def describe(self) -> dict[str, Any]:
        return {
            "kubeconfig": str(self.control_plane.kubeconfig),
            "kafka_bootstrap": self.broker.bootstrap if self.broker else None,
            "database_url": self.database_url,
            "dir": str(self.dir),
            "server": self.control_plane.server,
            "nodes": sorted(self.kubelet.nodes) if self.kubelet else [],
            "pid": os.getpid(),
            "openstack": self.describe_openstack(),
        }


# -- the detached supervisor behind `kuberaven testenv up/down` -------------------------------------


def up(
    directory: Path | None,
    nodes: int,
    timeout: float = 600,
    postgres: bool = False,
    openstack: bool = False,
    exit_with: int | None = None,
    nested: int = 0,
    park_for: float | None = None,
    node_ports: bool = False,
    nested_netns: bool = False,
) -> dict[str, Any]:
    """Start a supervisor in the background; return env.json once it is ready.

    ``exit_with``: a process id the environment stops with (a test session's: an interrupted session
    whose teardown never ran leaves nothing running); by default it lives until `down`. ``nested``: VMs on the
    data path's chassis, each a nested node (QEMU, testing/vm.py; ``nested_netns``: namespaces,
    testing/nested.py). ``park_for``: the node agent's ``--park-for``
    (None: its default). ``node_ports``: kube-proxy serving each node's node ports (testing/node_ports.py)."""
    _check_shape(nodes, openstack, nested, node_ports)
    binaries()  # a first build takes minutes: here, in the foreground, not under the timeout; its errors first
    if node_ports:
        extra_binary("kube-proxy")  # likewise
    if nested and not nested_netns:
        guest()  # likewise: the VMs' kernel and initramfs (testing/vm_image.py)
    directory = Path(directory or tempfile.mkdtemp(prefix="kuberaven-env-")).absolute()
    directory.mkdir(parents=True, exist_ok=True)
    state = directory / STATE_FILE
    if state.exists():
        existing = json.loads(state.read_text())
        if running(existing["pid"]):
            return existing
        state.unlink()
    log = (directory / SUPERVISOR_LOG).open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kuberaven.testing.env",
            "--dir",
            str(directory),
            "--nodes",
            str(nodes),
            *(["--postgres"] if postgres else []),
            *(["--openstack"] if openstack else []),
            *(["--nested", str(nested)] if nested else []),
            *(["--exit-with", str(exit_with)] if exit_with else []),
            *(["--park-for", str(park_for)] if park_for is not None else []),
            *(["--node-ports"] if node_ports else []),
            *(["--nested-netns"] if nested_netns else []),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # survives the `up` command's own exit
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state.exists():
            return json.loads(state.read_text())
        if process.poll() is not None:
            tail = (directory / SUPERVISOR_LOG).read_text(errors="replace").splitlines()[-30:]
            raise RuntimeError("test environment failed to start:\n" + "\n".join([*tail, *server_errors(directory)]))
        time.sleep(0.2)
    process.terminate()
    raise TimeoutError(f"test environment not ready within {timeout:.0f}s; see {directory / SUPERVISOR_LOG}")


def server_errors(directory: Path, last: int = SERVER_ERRORS) -> list[str]:
    """The last ``last`` ERROR lines of each server's log under ``directory`` (a 500 from Neutron says why only
    there, and the directory goes with the failed environment)."""
    found = []
    for path in sorted(directory.rglob("*.log")):
        if path.name == SUPERVISOR_LOG:
            continue
        errors = [line for line in path.read_text(errors="replace").splitlines() if " ERROR " in line][-last:]
        found += [f"{path.relative_to(directory)}: {line}" for line in errors]
    return found


def _check_shape(nodes: int, openstack: bool, nested: int, node_ports: bool = False) -> None:
    """The environments there are: the OpenStack data path has a chassis per node, as many as its tunnels'
    range holds (testing/chassis.py); VMs sit on the first."""
    if openstack and not 1 <= nodes <= max_chassis():
        raise EnvError(f"the OpenStack data path has a chassis per node, 1 to {max_chassis()}: not {nodes}")
    if nested and not openstack:
        raise EnvError("nested nodes are VMs on the OpenStack data path: --nested needs --openstack")
    if nested < 0:
        raise EnvError(f"--nested is a number of VMs, not {nested}")
    if node_ports and not openstack:
        raise EnvError("node ports are served on the OpenStack data path: --node-ports needs --openstack")


def down(directory: Path, timeout: float = 60) -> bool:
    """Stop the supervisor of ``directory``; False if none was running."""
    state = Path(directory) / STATE_FILE
    if not state.exists():
        return False
    pid = json.loads(state.read_text())["pid"]
    if running(pid):  # a zombie (our own child, not yet reaped) has stopped already
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if running(pid):
            os.kill(pid, signal.SIGKILL)  # its children die with it; its network namespaces do not
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # started by this process (`up` in a test): reaped
    remove_namespaces(Path(directory).absolute() / OPENSTACK_DIR / OVN_DIR)
    remove_vm_namespaces(Path(directory).absolute() / OPENSTACK_DIR / OVN_DIR)
    state.unlink(missing_ok=True)
    return True


def restart(directory: Path, component: str, timeout: float = ANSWER_TIMEOUT) -> Restarted:
    """Have the supervisor of ``directory`` restart ``component`` (testing/restart.py): once it serves again,
    what was done. RestartFailed without a running environment there, or when the restart failed (with the
    server's death, if the environment stopped for it)."""
    check_component(component)
    state = Path(directory) / STATE_FILE
    pid = json.loads(state.read_text())["pid"] if state.exists() else None
    if pid is None or not running(pid):
        raise RestartFailed(f"no test environment running in {directory}")
    try:
        return ask(Path(directory), component, lambda: running(pid), timeout)
    except RestartFailed as error:
        died = server_died(directory)
        raise RestartFailed(f"{error}\n{died}" if died else str(error)) from None


def server_died(directory: Path) -> str | None:
    """What the supervisor of ``directory`` logged from a server's death on (its name and its log's tail), or
    None if every server lived: a test whose environment stopped under it says why."""
    log = Path(directory) / SUPERVISOR_LOG
    text = log.read_text(errors="replace") if log.exists() else ""
    return text[text.rfind("\n", 0, text.index(DIED)) + 1 :] if DIED in text else None


def _peers(nodes: int) -> tuple[str, ...]:
    """The nodes whose chassis join the first's (the first node's): the rest, in order."""
    return tuple(f"{NODE_PREFIX}{index}" for index in range(1, nodes))


def _vms(
    openstack: LocalOpenStack | None, count: int, netns: bool, directory: Path, api_port: int
) -> NestedVms | QemuVms | None:
    """The nested nodes' VMs: QEMU's (their guests reach the API server's port at their own 127.0.0.1), or
    namespaces (``netns``); None without any."""
    if openstack is None or not count:
        return None
    return NestedVms(openstack, count) if netns else QemuVms(openstack, count, directory / "vms", [api_port])


def _chassis(openstack: LocalOpenStack | None) -> list[LocalOVN]:
    """Every chassis of the data path, the first first."""
    if openstack is None or openstack.ovn is None:
        return []
    return [openstack.ovn, *openstack.peers]


def _watched(ovn: LocalOVN | None) -> list[Process]:
    """The chassis' daemons whose death stops the environment (not those it restarts)."""
    return [p for p in ovn.processes if p.name not in RESTARTED] if ovn is not None else []


def restarts(directory: Path) -> list[str]:
    """The supervisor's lines of ``directory`` that say a server was started again (restart_ovn)."""
    log = Path(directory) / SUPERVISOR_LOG
    text = log.read_text(errors="replace") if log.exists() else ""
    return [line for line in text.splitlines() if RESTARTED_NOTE in line]


def _supervise(arguments: argparse.Namespace) -> None:
    directory, exit_with = arguments.dir, arguments.exit_with
    env = TestEnv(
        directory,
        arguments.nodes,
        postgres=arguments.postgres,
        openstack=arguments.openstack,
        nested=arguments.nested,
        park_for=arguments.park_for,
        node_ports=arguments.node_ports,
        nested_netns=arguments.nested_netns,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    env.start()
    try:
        temporary = directory / (STATE_FILE + ".tmp")
        temporary.write_text(json.dumps(env.describe(), indent=2))
        temporary.rename(directory / STATE_FILE)
        while not stop.wait(1):
            for done in answer_requests(directory, env.restart):  # before the death check: never taken for one
                print(f"{PLANNED_RESTART}: {done}", flush=True)
            env.restart_agent()
            env.restart_ovn()
            for process in env.servers():
                if process is not None and not process.alive():
                    print(f"{process.name} {DIED} (exit status {process.returncode}):\n{process.tail()}", flush=True)
                    stop.set()
            if exit_with is not None and not running(exit_with):
                print(f"process {exit_with} is gone: stopping with it", flush=True)
                stop.set()
    finally:
        started = time.monotonic()
        env.stop()
        print(f"stopped in {time.monotonic() - started:.1f} s", flush=True)
        (directory / STATE_FILE).unlink(missing_ok=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="kuberaven test environment supervisor")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--openstack", action="store_true")
    parser.add_argument("--nested", type=int, default=0)
    parser.add_argument("--exit-with", type=int, help="stop when this process is gone")
    parser.add_argument("--park-for", type=float, help="the node agent's --park-for")
    parser.add_argument("--node-ports", action="store_true", help="kube-proxy serving each node's node ports")
    parser.add_argument("--nested-netns", action="store_true", help="nested nodes in namespaces, not QEMU VMs")
    _supervise(parser.parse_args())
