"""kuberaven-cni and its node agent on real kernel networking: pods' VIFs from a running translator, wired into
network namespaces.

The test plays the node: it registers a Node no fake kubelet serves, binds
pods to it, runs `kuberaven node` for it (the node's side, bridges and host
ends, in a network namespace of the test's: nothing of the host's is seen or
touched) and runs the plugin as a container runtime does (a subprocess,
CNI_* in its environment, the network config on stdin) against network
namespaces it creates and always removes. Traffic stays between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberaven.cni.spec import ErrorCode, bridge_name, host_ifname
from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import ApiError
from kuberaven.kube.resources import Discovery
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.backend import CNI_KUBERAVEN, NetworkOptions
from kuberaven.network.backends import make_backend
from kuberaven.network.translator import NetworkTranslator
from kuberaven.network.vif import VIF_ANNOTATION, Vif
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace
from tests.helpers import bound_pod, component_running, eventually, vif_of
from tests.integration.test_deploy import _apply as apply

SRC = str(Path(__file__).parents[2] / "src")
NETNS_DIR = Path("/var/run/netns")
PORT = 7777
AGENT_READY_WITHIN = 60.0  # seconds for a started agent's STATUS to succeed

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    # The host's links and bridges are shared by every test process: these run in one.
    pytest.mark.xdist_group("host-network"),
]


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def link_exists(name: str, netns: str | None = None) -> bool:
    command = ["ip", *(["-n", netns] if netns else []), "link", "show", "dev", name]
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


def links_of(netns: str) -> list[str]:
    return [link["ifname"] for link in json.loads(ip("-n", netns, "-j", "link", "show"))]


@dataclass
class Agent:
    """`kuberaven node` for the test's node, its node side in the netns ``node_netns``."""

    node: str
    kubeconfig: Path
    socket: Path
    node_netns: str  # a name under /run/netns
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "kuberaven", "node", "--node", self.node),
                    *("--kubeconfig", str(self.kubeconfig), "--socket", str(self.socket)),
                    *("--node-netns", str(NETNS_DIR / self.node_netns)),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": SRC},
            )

    async def ready(self) -> None:
        """Until its STATUS succeeds: the socket answers and the watch of the node's pods has synced."""

        async def status() -> None:
            assert self.process is not None and self.process.poll() is None, self.log.read_text()
            assert await cni(self, "STATUS") == (0, None)

        await eventually(status, timeout=AGENT_READY_WITHIN)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> int:
        """SIGTERM, as the DaemonSet's pod is stopped: its exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)


@dataclass
class Sandboxes:
    names: list[str]  # network namespaces, as a runtime makes one per pod sandbox


@pytest.fixture
def netns() -> Iterator[Sandboxes]:
    """Three network namespaces, always removed."""
    sandboxes = Sandboxes([f"krvt-{uuid.uuid4().hex[:8]}" for _ in range(3)])
    try:
        for name in sandboxes.names:
            ip("netns", "add", name)
        yield sandboxes
    finally:
        for name in sandboxes.names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@pytest.fixture
def node_netns() -> Iterator[str]:
    """The node's network namespace: the agent's bridges and host ends go there, and all go with it."""
    name = f"krvt-node-{uuid.uuid4().hex[:6]}"
    ip("netns", "add", name)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@pytest.fixture
async def agent(testenv: TestEnv, unserved_node: str, node_netns: str, tmp_path: Path) -> AsyncIterator[Agent]:
    """The node's agent, running and ready; killed at the end if the test left it running."""
    started = Agent(
        unserved_node, testenv.control_plane.kubeconfig, tmp_path / "run" / "cni.sock", node_netns, tmp_path / "a.log"
    )
    try:
        started.start()
        await started.ready()
        yield started
    finally:
        if started.process is not None and started.process.poll() is None:
            started.kill()


@pytest.fixture
def net_database(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path}/kuberaven.db")
    database.prepare()
    yield database
    database.dispose()


@contextlib.asynccontextmanager
async def translating(kube: KubeClient, database: Database) -> AsyncIterator[NetworkTranslator]:
    options = NetworkOptions(cni=CNI_KUBERAVEN, subnet_mode="namespace", namespace_pool="10.96.0.0/16")
    backend = make_backend("embedded", database)
    translator = NetworkTranslator(kube, database, f"c-{uuid.uuid4().hex[:8]}", backend, options, gc_period=3600)
    async with component_running(translator):
        yield translator


async def cni(
    agent: Agent,
    command: str,
    sandbox: str = "",
    namespace: str = "",
    pod: str = "",
    extra: dict[str, Any] | None = None,
    **config: Any,
) -> tuple[int, dict[str, Any] | None]:
    """Run kuberaven-cni as a runtime does: (exit code, the JSON it printed). ``extra``: config keys that are not
    identifiers (GC's cni.dev/valid-attachments)."""
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": SRC, "CNI_COMMAND": command, "CNI_PATH": "/opt/cni/bin"}
    if sandbox:
        environ |= {
            "CNI_CONTAINERID": f"ctr-{sandbox}",
            "CNI_NETNS": str(NETNS_DIR / sandbox),
            "CNI_IFNAME": "eth0",
            "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod}",
        }
    conf = {
        "cniVersion": "1.1.0",
        "name": "kuberaven",
        "type": "kuberaven-cni",
        "socket": str(agent.socket),
        **(extra or {}),
        **config,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kuberaven.cni.plugin",
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await process.communicate(json.dumps(conf).encode())
    assert process.returncode is not None
    assert not err.strip(), err.decode()
    return process.returncode, json.loads(out) if out.strip() else None


async def reaches(source: str, target: str, address: str) -> bool:
    """A TCP connection from netns ``source`` to a listener on ``address`` in netns ``target``."""
    server = await asyncio.create_subprocess_exec(
        "ip",
        "netns",
        "exec",
        target,
        sys.executable,
        "-c",
        "import socket,sys;s=socket.create_server((sys.argv[1],int(sys.argv[2])));print('up',flush=True);"
        "c,_=s.accept();c.sendall(b'hello');c.close()",
        address,
        str(PORT),
        stdout=subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        assert await asyncio.wait_for(server.stdout.readline(), 10) == b"up\n"
        client = await asyncio.create_subprocess_exec(
            "ip",
            "netns",
            "exec",
            source,
            sys.executable,
            "-c",
            "import socket,sys;c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=2);"
            "print(c.recv(5).decode())",
            address,
            str(PORT),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        out, _ = await client.communicate()
        return client.returncode == 0 and out.strip() == b"hello"
    finally:
        with contextlib.suppress(ProcessLookupError):
            server.kill()
        await server.wait()


async def add(agent: Agent, pods: tuple[tuple[str, str, str, Vif], ...]) -> None:
    """ADD each (sandbox, namespace, pod, its VIF), all at once: each answer has its VIF's address and MAC."""
    answers = await asyncio.gather(*(cni(agent, "ADD", sandbox, namespace, pod) for sandbox, namespace, pod, _ in pods))
    for (code, answer), (sandbox, _, _, vif) in zip(answers, pods, strict=True):
        assert code == 0 and answer is not None, answer
        assert answer["cniVersion"] == "1.1.0" and answer["ips"] == answer_ips(vif)
        assert answer["interfaces"][1] == {"name": "eth0", "mac": vif.mac, "sandbox": str(NETNS_DIR / sandbox)}


async def kubelet_reports(
    kube: KubeClient, translator: NetworkTranslator, database: Database, namespace: str, pod: str, vif: Vif
) -> None:
    """The kubelet reports the CNI's IP as the pod's: the translator keeps the port the pod has."""
    await kube.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        body={"status": {"podIP": vif.ip}},
        content_type="application/merge-patch+json",
    )
    # The translator has seen the IP and reconciled what it brought: only then is "the port stayed" a finding.
    pods = translator.pods.pods
    assert pods is not None

    def seen_ip() -> None:
        known = pods.get(f"{namespace}/{pod}")
        assert known is not None and known["status"].get("podIP") == vif.ip, known

    await eventually(seen_ip)
    await asyncio.wait_for(translator.engine.controller("network-pods").wait_idle(), 30)
    with database.session() as session:
        rows = session.query(NetworkTranslation).filter_by(kind="Pod", namespace=namespace, name=pod).all()
    assert [row.state["port"] for row in rows] == [vif.port]


async def test_two_pods_wired_by_the_agent_reach_each_other_and_del_removes_everything(
    kube: KubeClient,
    namespace: str,
    unserved_node: str,
    netns: Sandboxes,
    net_database: Database,
    agent: Agent,
) -> None:
    a, b, c = netns.names
    node = unserved_node
    other = f"t-{uuid.uuid4().hex[:8]}"
    await create_namespace(kube, other)
    try:
        async with translating(kube, net_database) as translator:
            await bound_pod(kube, namespace, "a", node)
            await bound_pod(kube, namespace, "b", node)
            await bound_pod(kube, other, "c", node)
            vif_a, vif_b = await vif_of(kube, namespace, "a"), await vif_of(kube, namespace, "b")
            vif_c = await vif_of(kube, other, "c")
            # Ports before pods: made while the pods have no IP, bound to their node, one subnet per namespace.
            assert vif_a.network == vif_b.network != vif_c.network and vif_a.node == node
            assert vif_a.ip != vif_b.ip and vif_a.cidr == vif_b.cidr

            await add(agent, ((a, namespace, "a", vif_a), (b, namespace, "b", vif_b), (c, other, "c", vif_c)))
            # The node's side is in the node's netns: the bridges of two networks, three host ends.
            assert {bridge_name(vif_a.network), bridge_name(vif_c.network)} <= set(links_of(agent.node_netns))
            assert await reaches(b, a, vif_a.ip) and await reaches(a, b, vif_b.ip)
            assert not await reaches(a, c, vif_c.ip), "pods of two namespaces are on two networks"

            await kubelet_reports(kube, translator, net_database, namespace, "a", vif_a)

            # The agent keeps no state: stopped (gracefully) and started again, the pods stay wired and CHECK
            # finds them.
            assert agent.stop() == 0 and not agent.socket.exists()
            assert await reaches(b, a, vif_a.ip)
            agent.start()
            await agent.ready()
            assert (await cni(agent, "CHECK", a, namespace, "a"))[0] == 0

            # A second ADD is idempotent: the same addresses, one veth pair, still reachable; CHECK agrees.
            code, again = await cni(agent, "ADD", a, namespace, "a")
            assert code == 0 and again is not None and again["ips"] == answer_ips(vif_a)
            assert links_of(a) == ["lo", "eth0"]
            assert await reaches(b, a, vif_a.ip)
            assert (await cni(agent, "CHECK", a, namespace, "a"))[0] == 0
            # CHECK finds what differs from the VIF.
            ip("-n", a, "address", "flush", "dev", "eth0")
            code, error = await cni(agent, "CHECK", a, namespace, "a")
            assert (
                code == 1 and error is not None and error["code"] == ErrorCode.NOT_AS_WIRED and vif_a.ip in error["msg"]
            )

        # DEL removes the veth pairs and the bridges once empty; a second DEL is fine.
        for sandbox, ns, pod in ((a, namespace, "a"), (b, namespace, "b"), (c, other, "c")):
            for _ in range(2):
                code, said = await cni(agent, "DEL", sandbox, ns, pod)
                assert code == 0, said
                assert not link_exists(host_ifname(f"ctr-{sandbox}", "eth0"), agent.node_netns)
                assert not link_exists("eth0", sandbox)
        assert links_of(agent.node_netns) == ["lo"]
    finally:
        with contextlib.suppress(Exception):
            await kube.request("DELETE", f"/api/v1/namespaces/{other}")


async def waits_in_agent(agent: Agent, key: str, calls: int) -> None:
    """Until the agent's log says that ``calls`` calls for pod ``key`` have waited on its watch (node/pods.py says
    so once per call): the call has reached the agent and is held there."""

    def said() -> None:
        count = agent.log.read_text(errors="replace").count(f"{key}: waiting up to")
        assert count >= calls, f"{count} of {calls} calls for {key} waiting"

    await eventually(said, timeout=30)


def answer_ips(vif: Vif) -> list[dict[str, Any]]:
    return [{"address": f"{vif.ip}/{vif.prefix_length}", "gateway": vif.gateway, "interface": 1}]


async def test_without_an_annotation_add_answers_try_again_later_within_its_bound(
    kube: KubeClient, namespace: str, unserved_node: str, netns: Sandboxes, agent: Agent
) -> None:
    # No translator: the pod never gets its VIF.
    await bound_pod(kube, namespace, "lonely", unserved_node)
    started = time.monotonic()
    waiting = asyncio.create_task(cni(agent, "ADD", netns.names[0], namespace, "lonely", annotationTimeout=2))
    # Meanwhile the agent answers other calls: a waiting ADD holds up nothing else.
    await waits_in_agent(agent, f"{namespace}/lonely", 1)
    assert await cni(agent, "STATUS") == (0, None) and not waiting.done()
    code, error = await waiting
    elapsed = time.monotonic() - started
    assert code == 1 and error is not None and error["code"] == ErrorCode.TRY_AGAIN_LATER, error
    assert f"{namespace}/lonely" in error["msg"] and VIF_ANNOTATION in error["msg"]
    assert "network translator" in error["details"]
    assert 2 <= elapsed < 2 + 2, elapsed  # the bound, plus the plugin's start and the call
    assert not link_exists("eth0", netns.names[0])
    # A sandbox that does not exist: the spec's "container unknown", before any wait.
    code, error = await cni(agent, "ADD", "no-such-netns", namespace, "lonely")
    assert code == 1 and error is not None and error["code"] == ErrorCode.UNKNOWN_CONTAINER


async def test_without_an_agent_the_plugin_names_the_socket_and_what_to_start(tmp_path: Path) -> None:
    nobody = Agent("n", tmp_path / "k", tmp_path / "none" / "cni.sock", "", tmp_path / "log")
    code, error = await cni(nobody, "ADD", "krvt-x", "ns", "p")
    assert code == 1 and error is not None and error["code"] == ErrorCode.TRY_AGAIN_LATER, error
    assert str(nobody.socket) in error["msg"] and "kuberaven node" in error["details"]
    assert error["cniVersion"] == "1.1.0"
    code, error = await cni(nobody, "STATUS")
    assert code == 1 and error is not None and error["code"] == ErrorCode.NOT_AVAILABLE, error
    # VERSION is the plugin's own, in the config's version.
    code, answer = await cni(nobody, "VERSION", cniVersion="1.0.0")
    assert (code, answer) == (0, {"cniVersion": "1.0.0", "supportedVersions": ["1.0.0", "1.1.0"]})


async def test_gc_removes_the_attachments_the_runtime_does_not_list_and_keeps_the_others(
    kube: KubeClient, namespace: str, unserved_node: str, netns: Sandboxes, net_database: Database, agent: Agent
) -> None:
    a, b, _ = netns.names
    async with translating(kube, net_database):
        await bound_pod(kube, namespace, "a", unserved_node)
        await bound_pod(kube, namespace, "b", unserved_node)
        vif_a, vif_b = await vif_of(kube, namespace, "a"), await vif_of(kube, namespace, "b")
    await add(agent, ((a, namespace, "a", vif_a), (b, namespace, "b", vif_b)))
    # Someone else's interface in the node's netns, named like ours but not one of ours: never GC's.
    ip("-n", agent.node_netns, "link", "add", "krvother", "type", "veth", "peer", "name", "other0")
    host_a, host_b = host_ifname(f"ctr-{a}", "eth0"), host_ifname(f"ctr-{b}", "eth0")

    # b's sandbox is gone from the runtime's view (its DEL never came): GC with a alone removes b's pair.
    valid = {"cni.dev/valid-attachments": [{"containerID": f"ctr-{a}", "ifname": "eth0"}]}
    assert await cni(agent, "GC", extra=valid) == (0, None)
    assert not link_exists(host_b, agent.node_netns) and not link_exists("eth0", b)
    assert link_exists(host_a, agent.node_netns) and link_exists("krvother", agent.node_netns)
    assert (await cni(agent, "CHECK", a, namespace, "a"))[0] == 0

    # Nothing valid: a's pair goes, and its bridge once empty.
    assert await cni(agent, "GC", extra={"cni.dev/valid-attachments": []}) == (0, None)
    assert sorted(links_of(agent.node_netns)) == ["krvother", "lo", "other0"]
    assert not link_exists("eth0", a)


async def test_an_add_cut_by_the_agents_death_is_retried_and_succeeds_once_the_vif_comes(
    kube: KubeClient, namespace: str, unserved_node: str, netns: Sandboxes, net_database: Database, agent: Agent
) -> None:
    """SIGKILL while ADD waits for the VIF; the runtime retries against the restarted agent, which wires the pod as
    soon as its watch brings the VIF (no polling: the answer comes within moments of the annotation)."""
    a = netns.names[0]
    await bound_pod(kube, namespace, "late", unserved_node)
    first = asyncio.create_task(cni(agent, "ADD", a, namespace, "late", annotationTimeout=60))
    await waits_in_agent(agent, f"{namespace}/late", 1)  # the call is in the agent, waiting for the VIF
    assert not first.done()
    agent.kill()
    code, error = await asyncio.wait_for(first, 10)
    assert code == 1 and error is not None and error["code"] == ErrorCode.TRY_AGAIN_LATER, error
    assert str(agent.socket) in error["msg"]

    agent.start()  # its socket file, left by the killed agent, is replaced
    await agent.ready()
    # A second agent on the same socket refuses to start: two would wire the same pods.
    second = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "kuberaven", "node", "--node", agent.node, "--socket", str(agent.socket)),
        env={**os.environ, "PYTHONPATH": SRC, "KUBECONFIG": str(agent.kubeconfig)},
        stderr=subprocess.PIPE,
    )
    _, said = await asyncio.wait_for(second.communicate(), 60)
    assert second.returncode == 1 and f"another agent answers on {agent.socket}" in said.decode(), said
    retry = asyncio.create_task(cni(agent, "ADD", a, namespace, "late", annotationTimeout=60))
    await waits_in_agent(agent, f"{namespace}/late", 2)
    assert not retry.done()  # waiting: the VIF has not been written
    async with translating(kube, net_database):
        vif = await vif_of(kube, namespace, "late")
        written = time.monotonic()
        code, answer = await asyncio.wait_for(retry, 60)
    assert code == 0 and answer is not None and answer["ips"] == answer_ips(vif), answer
    assert time.monotonic() - written < 5
    assert links_of(a) == ["lo", "eth0"]
    assert (await cni(agent, "CHECK", a, namespace, "late"))[0] == 0
    assert await cni(agent, "DEL", a, namespace, "late") == (0, None)


MANIFESTS = Path(__file__).parents[2] / "deploy" / "kuberaven-cni.yaml"


def cni_manifests() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]


async def test_the_daemonset_manifests_pass_server_side_dry_run(kube: KubeClient) -> None:
    documents = cni_manifests()
    assert {d["kind"] for d in documents} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
    }
    namespace = documents[0]["metadata"]["namespace"]
    with contextlib.suppress(ApiError):
        await create_namespace(kube, namespace)  # kept: deploy/kuberaven.yaml's own, shared with test_deploy
    discovery = Discovery(kube)
    for document in documents:
        try:
            await apply(kube, discovery, document, dryRun="All")
        except ApiError as error:
            raise AssertionError(f"{document['kind']} {document['metadata']['name']} rejected: {error}") from None


def test_the_daemonset_installs_the_shim_and_the_conflist_and_runs_the_agent(tmp_path: Path) -> None:
    """install.sh, run as the DaemonSet runs it, against a stand-in for the node's root."""
    documents = cni_manifests()
    scripts = next(d for d in documents if d["kind"] == "ConfigMap")["data"]
    container = next(d for d in documents if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    # The container becomes `kuberaven node` for its own node, on the socket the conflist names.
    assert container["command"][:2] == ["sh", "/config/install.sh"] and "exec kuberaven node" in scripts["install.sh"]
    assert container["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    config, host = tmp_path / "config", tmp_path / "host"
    config.mkdir()
    for name, text in scripts.items():
        (config / name).write_text(text)
    environ = {"PATH": os.environ["PATH"], "HOST": str(host), "CONFIG": str(config), "ONCE": "1"}
    subprocess.run(["sh", str(config / "install.sh")], env=environ, check=True, timeout=30)

    conflist = json.loads((host / "etc/cni/net.d/10-kuberaven.conflist").read_text())
    assert conflist["cniVersion"] == "1.0.0" and conflist["cniVersions"] == ["1.0.0", "1.1.0"]
    plugin = conflist["plugins"][0]
    assert plugin["type"] == "kuberaven-cni" and plugin["socket"] == container["command"][-1]
    assert int((host / "run/kuberaven/pid").read_text()) > 0
    shim = host / "opt/cni/bin/kuberaven-cni"
    assert os.access(shim, os.X_OK)

    # The DaemonSet gone (its pid is no process): the runtime gets the spec's "try again later", STATUS 50.
    (host / "run/kuberaven/pid").write_text("999999999\n")
    for command, code in (("ADD", ErrorCode.TRY_AGAIN_LATER), ("STATUS", ErrorCode.NOT_AVAILABLE)):
        done = subprocess.run(
            [str(shim)],
            env={"PATH": os.environ["PATH"], "KUBERAVEN_CNI_RUN": str(host / "run/kuberaven"), "CNI_COMMAND": command},
            capture_output=True,
            text=True,
            check=False,
        )
        answer = json.loads(done.stdout)
        assert done.returncode == 1 and answer["code"] == code and "kuberaven node" in answer["details"], answer
