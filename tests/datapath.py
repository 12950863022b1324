"""The OpenStack data path for tests: `kuberaven testenv up --openstack`, `kuberaven run` on it, pods wired.

An environment for each package of the data path's tests (the ``datapath`` fixture of each package under
tests/integration/datapath/):
the control plane with its one node, Neutron ML2/OVN, Octavia's ovn provider,
the OVN chassis in its node netns, the node's agent (`kuberaven node`), and a
``kuberaven run`` configured from the environment's JSON as docs/network.md
says. Tests play the container runtime: they make a network namespace per pod,
run kuberaven-cni into it (CNI_* environment, the environment's ``cni_config``
on stdin; the plugin hands the call to the agent) and always remove both.
Traffic stays between those namespaces and the external netns.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kuberaven.cni.spec import ErrorCode
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.backends.ovn_northbound import OWNER_KEY
from kuberaven.network.pools import KIND as POOLED
from kuberaven.network.vif import Vif
from kuberaven.testing.env import OPENSTACK_DIR, down, restarts, server_died, up
from kuberaven.testing.nested import vm_prefix
from kuberaven.testing.node_ports import TX_CHECKSUMS_OFF
from kuberaven.testing.openstack import OVN_DIR, data_path_installed
from kuberaven.testing.ovn import namespaces as chassis_namespaces
from kuberaven.testing.ovn import peer_netns
from kuberaven.testing.processes import STDLIB_PYTHON, running
from tests.helpers import PAUSE, Daemon, daemon_running, vif_of

SRC = str(Path(__file__).parents[1] / "src")
# The data path's tests in two xdist groups, each run by one worker with an environment of its own (about seven
# minutes each, side by side): Services and traffic; ports (pools, binding, nested pods).
SERVICES_GROUP, PORTS_GROUP = "datapath", "datapath-ports"
CONNECT_TIMEOUT = 3.0  # seconds a client waits for a connection that a policy may drop
DROPPED = "! timed out"  # what CLIENT prints when no answer came within its timeout
REFUSED = "! [Errno 111] Connection refused"  # what CLIENT prints when a TCP reset answered its SYN
# New connections that confirm a Service's member gone, once a first sample said so: one of n members still there
# is missed by all of them with odds ((n - 1) / n) ** 30 (2**-30 of two, below 1e-5 of three).
CONFIRM = 30
# A namespace's first pod waits for its network, subnet, router interface and pool to be made in Neutron: on a
# loaded 2-core machine (a cold `make test`) longer than ADD's own bound, so "try again later" is retried then,
# as a kubelet retries a sandbox. Later pods of the namespace must be wired at the first ADD.
FIRST_POD_RETRY = 120.0
# The runtime's processes (kuberaven-cni, `ip netns`, a pod's TCP client), each run whole on a thread of its own, as
# a kubelet's goroutines run them: an asyncio subprocess is forked, fed and read on the event loop, where a burst's
# calls would queue each other's start and answer behind whatever else the loop does.
RUNTIME_THREADS = 256
_runtime = ThreadPoolExecutor(RUNTIME_THREADS, thread_name_prefix="runtime")


async def run_process(
    command: list[str], stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float | None = None
) -> tuple[int, str, str]:
    """``command`` run to its end on one of the runtime's threads: (exit code, stdout, stderr). Past ``timeout``
    seconds it is killed, as a runtime kills a CNI call past its deadline, and TimeoutError is raised: a caller
    that gives up on a call leaves nothing running."""

    def call() -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(command, input=stdin, env=env, capture_output=True, check=False, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{command[0]} killed after {timeout:.0f} s") from None

    done = await asyncio.get_running_loop().run_in_executor(_runtime, call)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


RETRY_EVERY = 1.0  # seconds between two ADDs of one pod


@dataclass
class DataPath:
    env: dict[str, Any]  # env.json
    daemon: Daemon
    start_daemon: Callable[[], Daemon]  # another `kuberaven run`, on the same database

    def kill_daemon(self) -> None:
        """SIGKILL `kuberaven run`, as a crash or an OOM kill would end it (restart_daemon() starts it again)."""
        self.daemon.process.kill()
        self.daemon.process.wait()

    def restart_daemon(self) -> None:
        """Start `kuberaven run` again; the last run's log is kept beside, as kuberaven-run.log.<n>."""
        log = self.daemon.log
        log.rename(log.with_name(f"{log.name}.{len(list(log.parent.glob(log.name + '.*'))) + 1}"))
        self.daemon = self.start_daemon()

    def agent_pid(self, vm: dict[str, Any] | None = None) -> int:
        """The pid of the node's agent (`kuberaven node`, the one serving this environment's socket), or of the
        VM's ``vm``. A child the agent forked has its command line until it execs (``ip``, ``nsenter``): the agent
        is the one of them whose parent is none of them, whatever the order of their pids."""
        socket = (vm or self.openstack)["cni_config"]["socket"].encode()
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes().split(b"\0")
                if entry.name.isdigit() and b"node" in command and socket in command:
                    stat = (entry / "stat").read_text()
                    parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        agents = [pid for pid, parent in parents.items() if parent not in parents]
        assert len(agents) == 1, f"{len(agents)} node agents serve {socket.decode()}: {agents}"
        return agents[0]

    def kill_agent(self, vm: dict[str, Any] | None = None) -> int:
        """SIGKILL the node's agent (or the VM's ``vm``): its pid. The environment's supervisor starts it again, as
        the kubelet restarts a DaemonSet's container."""
        pid = self.agent_pid(vm)
        os.kill(pid, signal.SIGKILL)
        return pid

    @property
    def openstack(self) -> dict[str, Any]:
        return self.env["openstack"]

    @property
    def node(self) -> str:
        """The bare node: the chassis (the nested nodes' names sort after it)."""
        return self.env["nodes"][0]

    @property
    def chassis(self) -> list[dict[str, Any]]:
        """Every node's chassis (`testenv up --openstack --nodes N`), the first first: each its node, ovsdb,
        node_netns, encap_ip and cni_config."""
        return list(self.openstack["chassis"])

    @property
    def nested(self) -> list[dict[str, Any]]:
        """The VMs (`testenv up --nested`): each its node, netns, address, mac, port, trunk and cni_config."""
        return list(self.openstack["nested"])

    @property
    def nb_connection(self) -> str:
        """The OVN northbound database: what Neutron and Octavia's provider wrote (and `kuberaven run` is given)."""
        return str(self.openstack["nb_connection"])

    @property
    def sb_connection(self) -> str:
        """The OVN southbound database: the chassis and the ports OVN bound to them."""
        return self.nb_connection.replace("ovnnb_db.sock", "ovnsb_db.sock")

    def connection(self) -> Any:
        import openstack

        os.environ["OS_CLIENT_CONFIG_FILE"] = self.openstack["clouds_yaml"]
        return openstack.connect(cloud=self.openstack["cloud"])


def holders(datapath: DataPath) -> dict[str, str | None]:
    """Every pooled port's holder, from the daemon's database (network/pools.py): port → pod uid (None: free)."""
    database = Database(datapath.daemon.database_url)
    try:
        with database.session() as session:
            rows = session.scalars(sa.select(NetworkTranslation).where(NetworkTranslation.kind == POOLED)).all()
            return {row.uid: row.state.get("pod") for row in rows}
    finally:
        database.dispose()


def daemon_environment(env: dict[str, Any]) -> dict[str, str]:
    """What docs/network.md tells a newcomer to set for `kuberaven run` on this environment."""
    openstack = env["openstack"]
    return {
        "OS_CLIENT_CONFIG_FILE": openstack["clouds_yaml"],
        "KUBERAVEN_NETWORK_CLOUD": openstack["cloud"],
        "KUBERAVEN_NETWORK_CNI": "kuberaven",
        "KUBERAVEN_NETWORK_EXTERNAL_NETWORK": openstack["external_network"],
        # Neutron's [ovn] ovn_nb_connection: ClientIP affinity on the ovn provider's load balancers.
        "KUBERAVEN_NETWORK_OVN_NB_CONNECTION": openstack["nb_connection"],
    }


def leftovers(directory: Path, namespaces: list[str]) -> list[str]:
    """What an environment in ``directory`` left running: processes that name it (zombies are gone), and
    network namespaces."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in command and running(int(entry.name)):
            found.append(f"process {entry.name}: {command[:200]}")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    found += [f"netns {name}" for name in namespaces if name in listed.split()]
    return found


async def cni(
    datapath: DataPath,
    command: str,
    sandbox: str,
    namespace: str,
    pod: str,
    vm: dict[str, Any] | None = None,
    **config: Any,
) -> tuple[int, dict[str, Any] | None]:
    """kuberaven-cni run as the node's container runtime runs it (a VM's, given ``vm``: its cni_config names its
    agent): (exit code, the JSON it printed)."""
    environ = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": SRC,
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": f"ctr-{sandbox}",
        "CNI_NETNS": f"/run/netns/{sandbox}",
        "CNI_IFNAME": "eth0",
        "CNI_PATH": "/opt/cni/bin",
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod}",
    }
    base = (vm or datapath.openstack)["cni_config"]
    plugin = [sys.executable, "-m", "kuberaven.cni.plugin"]
    code, out, err = await run_process(plugin, json.dumps({**base, **config}).encode(), environ)
    assert not err.strip() or code != 0, err
    return code, json.loads(out) if out.strip() else None


@dataclass
class Pod:
    namespace: str
    name: str
    sandbox: str  # its network namespace
    vif: Vif
    result: dict[str, Any]
    # Where it runs, if not on the first node: the VM (a nested pod) or the further chassis, whose agent wired it.
    vm: dict[str, Any] | None = None

    @property
    def ip(self) -> str:
        return self.vif.ip


@dataclass
class Sandboxes:
    """Network namespaces a test made (one per pod), and the pods wired into them."""

    datapath: DataPath
    kube: KubeClient
    names: list[str] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)

    def new(self) -> str:
        name = f"krvdp-{uuid.uuid4().hex[:8]}"
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
        self.names.append(name)
        return name

    async def pod(
        self,
        namespace: str,
        name: str,
        labels: dict[str, str] | None = None,
        vm: dict[str, Any] | None = None,
        chassis: dict[str, Any] | None = None,
        **spec: Any,
    ) -> Pod:
        """A pod on the node (or, given ``vm``, on that VM's nested node; given ``chassis``, an entry of
        DataPath.chassis, on that chassis' node), wired by kuberaven-cni ADD called right after it was created
        (ADD returns once OVN has installed its port, or its subport is ACTIVE)."""
        where = vm or chassis
        node = where["node"] if where else self.datapath.node
        first = all(pod.namespace != namespace for pod in self.pods)
        await create_pod(self.kube, self.datapath, namespace, name, labels, node=node, **spec)
        pod, _ = await self.wire(namespace, name, where, FIRST_POD_RETRY if first else 0.0)
        return pod

    async def wire(
        self, namespace: str, name: str, vm: dict[str, Any] | None = None, retry_for: float = 0.0
    ) -> tuple[Pod, int]:
        """ADD for a pod that exists, at once, as a kubelet calls it once the pod is scheduled (the agent waits
        for the VIF itself): the pod wired, and how many calls it took. ``retry_for``: seconds an answer of "try
        again later" is retried, as a kubelet retries a sandbox (0: the first answer counts)."""
        sandbox = self.new()
        deadline, calls = time.monotonic() + retry_for, 0
        while True:
            calls += 1
            code, answer = await cni(self.datapath, "ADD", sandbox, namespace, name, vm)
            if code == 0 or (answer or {}).get("code") != ErrorCode.TRY_AGAIN_LATER or time.monotonic() > deadline:
                break
            await asyncio.sleep(RETRY_EVERY)
        assert code == 0 and answer is not None, f"{namespace}/{name}: {answer}"
        vif = await vif_of(self.kube, namespace, name, timeout=1)
        pod = Pod(namespace, name, sandbox, vif, answer, vm)
        self.pods.append(pod)
        return pod, calls

    async def remove(self) -> None:
        for pod in self.pods:
            with contextlib.suppress(Exception):
                await cni(self.datapath, "DEL", pod.sandbox, pod.namespace, pod.name, pod.vm)
        delete_netns(self.names)


async def ingress_address(kube: KubeClient, namespace: str, name: str) -> str:
    """The Service's first load balancer ingress IP (its floating IP); an AssertionError until it has one."""
    status = (await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}"))["status"]
    ingress = (status.get("loadBalancer") or {}).get("ingress") or []
    assert ingress, json.dumps(status)
    return str(ingress[0]["ip"])


async def create_pod(
    kube: KubeClient,
    datapath: DataPath,
    namespace: str,
    name: str,
    labels: dict[str, str] | None = None,
    node: str | None = None,
    **spec: Any,
) -> None:
    """A pod bound to ``node`` (by default the data path's bare node) at creation (its scheduling), gone at once
    when deleted."""
    body = {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeName": node or datapath.node,
            "containers": [{"name": "c", "image": PAUSE, **spec}],
            "terminationGracePeriodSeconds": 0,
        },
    }
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)


def vsctl(datapath: DataPath, *args: str) -> subprocess.CompletedProcess[str]:
    """``ovs-vsctl`` against the data path's node's Open vSwitch database."""
    database = datapath.openstack["ovsdb"]
    return subprocess.run(["ovs-vsctl", f"--db={database}", *args], capture_output=True, text=True, check=False)


def delete_netns(names: list[str]) -> None:
    for name in names:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


async def full_checksums(sandbox: str, interface: str = "eth0") -> None:
    """``interface`` of the sandbox computes its packets' checksums (TX_CHECKSUMS_OFF: as `ethtool -K eth0 tx
    off`). Open vSwitch 3.1's userspace datapath sends nothing into a tunnel that still has a checksum to fill in
    (its netdev_push_header drops it, "Tunneling packets with HW offload flags is not supported"), and a veth
    leaves TCP's checksum to offload: a pod whose packets cross the Geneve tunnel between two chassis of the
    local data path computes them itself."""
    code, _, err = await run_process(
        ["ip", "netns", "exec", sandbox, *STDLIB_PYTHON, "-c", TX_CHECKSUMS_OFF, interface]
    )
    assert code == 0, err


@contextlib.asynccontextmanager
async def sandboxes(datapath: DataPath, kube: KubeClient) -> AsyncIterator[Sandboxes]:
    made = Sandboxes(datapath, kube)
    try:
        yield made
    finally:
        await made.remove()


SERVER = """
import socket, sys
server = socket.create_server(("0.0.0.0", int(sys.argv[1])))
print("up", flush=True)
while True:
    connection, (peer, _) = server.accept()
    connection.sendall(f"{sys.argv[2]} {peer}".encode())
    connection.close()
"""
CLIENT = """
import socket, sys
try:
    connection = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    connection.settimeout(float(sys.argv[3]))
    print(connection.recv(200).decode())
except OSError as error:
    print(f"! {error}")
"""


@contextlib.asynccontextmanager
async def serving(netns: str, port: int, name: str, program: str = SERVER) -> AsyncIterator[None]:
    """A server in ``netns`` answering with ``name`` and the client's address: ``program`` (TCP, by default; it
    prints "up" once it listens)."""
    server = await asyncio.create_subprocess_exec(
        "ip",
        "netns",
        "exec",
        netns,
        *STDLIB_PYTHON,
        "-c",
        program,
        str(port),
        name,
        stdout=subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        assert await asyncio.wait_for(server.stdout.readline(), 20) == b"up\n"
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            server.kill()
        await server.wait()


async def attempt(netns: str, address: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str:
    """A TCP connection from ``netns``: what the server answered (its name and the client address it saw), or
    "! " and the client's error (timed out, refused, unreachable)."""
    _, out, _ = await run_process(
        ["ip", "netns", "exec", netns, *STDLIB_PYTHON, "-c", CLIENT, address, str(port), str(timeout)]
    )
    return out.strip() or "! no answer"


async def dropped(netns: str, address: str, port: int, timeout: float = CONNECT_TIMEOUT) -> None:
    """A TCP connection from ``netns`` is dropped, as a security group drops it: nobody answers within
    ``timeout``. A refusal (the server is gone) or an unreachable host (no route) is another failure, and fails."""
    answer = await attempt(netns, address, port, timeout)
    assert answer == DROPPED, f"{address}:{port} from {netns}: {answer!r}, not dropped"


async def refused(netns: str, address: str, port: int) -> None:
    """A TCP connection from ``netns`` is refused at once (a reset), as kube-proxy's REJECT refuses it."""
    answer = await attempt(netns, address, port)
    assert answer == REFUSED, f"{address}:{port} from {netns}: {answer!r}, not refused"


def acls_of(datapath: DataPath, owner: str) -> int:
    """How many ACLs of ``owner`` (a Service's uid: its source filters) OVN's northbound database holds."""
    nb, owned = datapath.openstack["nb_connection"], f"external_ids:{OWNER_KEY}={owner}"
    found = subprocess.run(
        ["ovn-nbctl", f"--db={nb}", "--bare", "--columns=_uuid", "find", "ACL", owned],
        capture_output=True,
        text=True,
        check=True,
    )
    return len(found.stdout.split())


async def steadily(check: Callable[[], Awaitable[Any]], tries: int) -> None:
    """``check`` passes ``tries`` times in a row: a state judged over a stretch once it holds, where one lucky
    try (a removed endpoint not hashed to, a connection lost for another reason) would prove nothing."""
    for _ in range(tries):
        await check()


async def connect(netns: str, address: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """What the server answered to a TCP connection from ``netns``, or None when no connection was made
    within ``timeout``."""
    answer = await attempt(netns, address, port, timeout)
    return None if answer.startswith("!") else answer


# Pools smaller than the defaults (45 free ports per node and namespace). Each port costs ML2/OVN about 1.3 s
# of CPU to make and delete, and a test's namespace lives a few seconds, so on two cores the ports made ahead
# slowed every other test of the session. The pools behave the same; bench/ovn_vif_bench.py measures the
# defaults. POOL_TESTS_POOLS: the pools' own tests (ports/), whose bursts outgrow a batch; LEAN_POOLS: the
# other packages (services/, nested/), whose pods need a port each and nothing of a pool's sizes: none made
# ahead (no namespace prewarms a port on a node none of its pods use), one per waiting pod, and up to two kept
# for the next pods (test_traffic.py's seven tests: Neutron's CPU 60 s instead of 72 with a minimum of 1).
POOL_TESTS_POOLS = {"KUBERAVEN_NETWORK_POOL_MIN": "5", "KUBERAVEN_NETWORK_POOL_MAX": "15"}
LEAN_POOLS = {
    "KUBERAVEN_NETWORK_POOL_MIN": "0",
    "KUBERAVEN_NETWORK_POOL_MAX": "2",
    "KUBERAVEN_NETWORK_POOL_BATCH": "1",
}


@contextlib.contextmanager
def environment(
    nested: int, pools: dict[str, str], park_for: float | None = None, nodes: int = 1, node_ports: bool = False
) -> Iterator[DataPath]:
    """`kuberaven testenv up --openstack --nodes N --nested M` (Neutron ML2/OVN, Octavia's ovn provider, an OVN
    chassis per node, ``nested`` VMs on the first as nested nodes) and `kuberaven run` on it as docs/network.md
    says (with the ``pools`` settings above); no server of it may die under the tests, and `testenv down` must
    leave nothing behind. A VM's nested pools cost every namespace Neutron refills: only the tests that need VMs
    have them.
    ``park_for``: the node agent's ``--park-for`` (None: its default). ``node_ports``: `--node-ports`, each node a
    port into OVN and a kube-proxy serving its node ports (testing/node_ports.py)."""
    if os.geteuid() != 0:
        pytest.skip("the OVN data path needs root (network namespaces, Open vSwitch)")
    if not data_path_installed():
        pytest.skip(
            "Debian packages openvswitch-switch, ovn-central, ovn-host, python3-ovn-octavia-provider are "
            "not installed (make deps installs them)"
        )
    directory = Path(tempfile.mkdtemp(prefix="krv-dp-"))
    try:
        described = up(
            directory, nodes, openstack=True, nested=nested, exit_with=os.getpid(), park_for=park_for,
            node_ports=node_ports,
        )  # fmt: skip
        with contextlib.ExitStack() as daemons:

            def start() -> Daemon:
                return daemons.enter_context(
                    daemon_running(
                        Path(described["kubeconfig"]),
                        directory,
                        "--network-backend",
                        "openstack",
                        env={**daemon_environment(described), **pools},
                        ready_within=240,
                    )
                )

            yield DataPath(described, start(), start)
    finally:
        died = server_died(directory)
        for line in restarts(directory):
            warnings.warn(f"the data path's {line}", stacklevel=1)
        down(directory)
        chassis = directory / OPENSTACK_DIR / OVN_DIR
        vms = [f"{vm_prefix(chassis)}{index}" for index in range(nested)]
        peers = [peer_netns(chassis, index) for index in range(1, nodes)]
        left = leftovers(directory, [*chassis_namespaces(chassis), *vms, *peers])
        shutil.rmtree(directory, ignore_errors=True)
        assert not died, f"a server of the environment died under the tests: {died}"
        assert not left, f"testenv down left: {left}"
