"""kuberaven-cni on real kernel networking: pods' VIFs from a running translator, wired into network namespaces.

The test plays the node: it registers a Node no fake kubelet serves, binds
pods to it, and runs the plugin as a container runtime does (a subprocess,
CNI_* in its environment, the network config on stdin) against network
namespaces it creates and always removes. Traffic stays between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberaven.cni.spec import Code, bridge_name, host_ifname
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
from tests.helpers import bound_pod, component_running, vif_of
from tests.integration.test_deploy import _apply as apply

SRC = str(Path(__file__).parents[2] / "src")
NETNS_DIR = Path("/var/run/netns")
PORT = 7777

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


@dataclass
class Sandboxes:
    names: list[str]  # network namespaces, as a runtime makes one per pod sandbox
    bridges: set[str] = field(default_factory=set)  # what the plugin should have removed


@pytest.fixture
def netns() -> Iterator[Sandboxes]:
    """Three network namespaces, always removed, with any bridge the plugin left."""
    sandboxes = Sandboxes([f"krvt-{uuid.uuid4().hex[:8]}" for _ in range(3)])
    try:
        for name in sandboxes.names:
            ip("netns", "add", name)
        yield sandboxes
    finally:
        for name in sandboxes.names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        for bridge in sandboxes.bridges:
            subprocess.run(["ip", "link", "del", "dev", bridge], capture_output=True, check=False)


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
    testenv: TestEnv, command: str, sandbox: str, namespace: str, pod: str, **config: Any
) -> tuple[int, dict[str, Any] | None]:
    """Run kuberaven-cni as a runtime does: (exit code, the JSON it printed)."""
    environ = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": SRC,
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": f"ctr-{sandbox}",
        "CNI_NETNS": str(NETNS_DIR / sandbox),
        "CNI_IFNAME": "eth0",
        "CNI_PATH": "/opt/cni/bin",
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod}",
    }
    conf = {
        "cniVersion": "1.0.0",
        "name": "kuberaven",
        "type": "kuberaven-cni",
        "kubeconfig": str(testenv.control_plane.kubeconfig),
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
    assert not err.strip() or process.returncode != 0, err.decode()
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


async def add(testenv: TestEnv, pods: tuple[tuple[str, str, str, Vif], ...]) -> None:
    """ADD each (sandbox, namespace, pod, its VIF): the answer has the VIF's address and MAC."""
    for sandbox, namespace, pod, vif in pods:
        code, answer = await cni(testenv, "ADD", sandbox, namespace, pod)
        assert code == 0 and answer is not None, answer
        assert answer["ips"] == answer_ips(vif)
        assert answer["interfaces"][1] == {"name": "eth0", "mac": vif.mac, "sandbox": str(NETNS_DIR / sandbox)}


async def kubelet_reports(kube: KubeClient, database: Database, namespace: str, pod: str, vif: Vif) -> None:
    """The kubelet reports the CNI's IP as the pod's: the translator keeps the port the pod has."""
    await kube.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        body={"status": {"podIP": vif.ip}},
        content_type="application/merge-patch+json",
    )
    await asyncio.sleep(1)
    with database.session() as session:
        rows = session.query(NetworkTranslation).filter_by(kind="Pod", namespace=namespace, name=pod).all()
    assert [row.state["port"] for row in rows] == [vif.port]


async def test_two_pods_wired_by_the_plugin_reach_each_other_and_del_removes_everything(
    kube: KubeClient, testenv: TestEnv, namespace: str, unserved_node: str, netns: Sandboxes, net_database: Database
) -> None:
    a, b, c = netns.names
    node = unserved_node
    other = f"t-{uuid.uuid4().hex[:8]}"
    await create_namespace(kube, other)
    try:
        async with translating(kube, net_database):
            await bound_pod(kube, namespace, "a", node)
            await bound_pod(kube, namespace, "b", node)
            await bound_pod(kube, other, "c", node)
            vif_a, vif_b = await vif_of(kube, namespace, "a"), await vif_of(kube, namespace, "b")
            vif_c = await vif_of(kube, other, "c")
            # Ports before pods: made while the pods have no IP, bound to their node, one subnet per namespace.
            assert vif_a.network == vif_b.network != vif_c.network and vif_a.node == node
            assert vif_a.ip != vif_b.ip and vif_a.cidr == vif_b.cidr
            netns.bridges |= {bridge_name(vif_a.network), bridge_name(vif_c.network)}

            await add(testenv, ((a, namespace, "a", vif_a), (b, namespace, "b", vif_b), (c, other, "c", vif_c)))
            assert await reaches(b, a, vif_a.ip) and await reaches(a, b, vif_b.ip)
            assert not await reaches(a, c, vif_c.ip), "pods of two namespaces are on two networks"

            await kubelet_reports(kube, net_database, namespace, "a", vif_a)

            # A second ADD is idempotent: the same addresses, one veth pair, still reachable; CHECK agrees.
            code, again = await cni(testenv, "ADD", a, namespace, "a")
            assert code == 0 and again is not None and again["ips"] == answer_ips(vif_a)
            assert [link["ifname"] for link in json.loads(ip("-n", a, "-j", "link", "show"))] == ["lo", "eth0"]
            assert await reaches(b, a, vif_a.ip)
            assert (await cni(testenv, "CHECK", a, namespace, "a"))[0] == 0
            # CHECK finds what differs from the VIF.
            ip("-n", a, "address", "flush", "dev", "eth0")
            code, error = await cni(testenv, "CHECK", a, namespace, "a")
            assert code == 1 and error is not None and error["code"] == Code.NOT_AS_WIRED and vif_a.ip in error["msg"]

        # DEL removes the veth pairs and the bridges once empty; a second DEL is fine.
        for sandbox, ns, pod in ((a, namespace, "a"), (b, namespace, "b"), (c, other, "c")):
            for _ in range(2):
                code, said = await cni(testenv, "DEL", sandbox, ns, pod)
                assert code == 0, said
                assert not link_exists(host_ifname(f"ctr-{sandbox}", "eth0")) and not link_exists("eth0", sandbox)
        assert not link_exists(bridge_name(vif_a.network)) and not link_exists(bridge_name(vif_c.network))
    finally:
        with contextlib.suppress(Exception):
            await kube.request("DELETE", f"/api/v1/namespaces/{other}")


def answer_ips(vif: Vif) -> list[dict[str, Any]]:
    return [{"address": f"{vif.ip}/{vif.prefix_length}", "gateway": vif.gateway, "interface": 1}]


async def test_without_an_annotation_add_answers_try_again_later_within_its_bound(
    kube: KubeClient, testenv: TestEnv, namespace: str, unserved_node: str, netns: Sandboxes
) -> None:
    # No translator: the pod never gets its VIF.
    await bound_pod(kube, namespace, "lonely", unserved_node)
    started = time.monotonic()
    code, error = await cni(testenv, "ADD", netns.names[0], namespace, "lonely", annotationTimeout=1)
    elapsed = time.monotonic() - started
    assert code == 1 and error is not None and error["code"] == Code.TRY_AGAIN_LATER, error
    assert f"{namespace}/lonely" in error["msg"] and VIF_ANNOTATION in error["msg"]
    assert elapsed < 1 + 10, elapsed  # the bound, plus the interpreter's start
    assert not link_exists("eth0", netns.names[0])
    # A sandbox that does not exist: the spec's "container unknown", before any wait.
    code, error = await cni(testenv, "ADD", "no-such-netns", namespace, "lonely")
    assert code == 1 and error is not None and error["code"] == Code.UNKNOWN_CONTAINER


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


def test_the_daemonset_installs_the_shim_the_conflist_and_a_kubeconfig(tmp_path: Path) -> None:
    """install.sh, run as the DaemonSet runs it, against a stand-in for the node's root."""
    scripts = next(d for d in cni_manifests() if d["kind"] == "ConfigMap")["data"]
    config, host, account = tmp_path / "config", tmp_path / "host", tmp_path / "sa"
    for directory in (config, account):
        directory.mkdir()
    for name, text in scripts.items():
        (config / name).write_text(text)
    (account / "token").write_text("secret-token\n")
    (account / "ca.crt").write_text("")
    environ = {
        "PATH": os.environ["PATH"],
        "HOST": str(host),
        "CONFIG": str(config),
        "SERVICE_ACCOUNT": str(account),
        "KUBECONFIG_DIR": str(tmp_path / "kubeconfig"),
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "ONCE": "1",
    }
    subprocess.run(["sh", str(config / "install.sh")], env=environ, check=True, timeout=30)

    conflist = json.loads((host / "etc/cni/net.d/10-kuberaven.conflist").read_text())
    assert conflist["cniVersion"] == "1.0.0" and conflist["plugins"][0]["type"] == "kuberaven-cni"
    kubeconfig = yaml.safe_load((tmp_path / "kubeconfig/kubeconfig").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://10.0.0.1:443"
    assert kubeconfig["users"][0]["user"]["token"] == "secret-token"
    assert int((host / "run/kuberaven-cni/pid").read_text()) > 0
    shim = host / "opt/cni/bin/kuberaven-cni"
    assert os.access(shim, os.X_OK)

    # The DaemonSet gone (its pid is no process): the runtime gets the spec's "try again later".
    (host / "run/kuberaven-cni/pid").write_text("999999999\n")
    done = subprocess.run(
        [str(shim)],
        env={"PATH": os.environ["PATH"], "KUBERAVEN_CNI_RUN": str(host / "run/kuberaven-cni")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and json.loads(done.stdout)["code"] == Code.TRY_AGAIN_LATER
