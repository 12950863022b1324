"""The node agent's answers that need no kernel and no cluster (node/pods.py, node/calls.py): VIFs found in what
the watch gave, waits woken by the watch, STATUS's codes, the spec's errors in the config's version."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kuberaven import cli
from kuberaven.cni.links import DEFAULT_OVSDB, Node
from kuberaven.cni.spec import CniError, ErrorCode, Invocation, invocation
from kuberaven.kube.loops import OffLoop
from kuberaven.kube.reflector import WatchEvent
from kuberaven.network.vif import PORT_ACTIVE, PORT_DOWN, VIF_ANNOTATION, Binding, Vif
from kuberaven.node import readiness
from kuberaven.node.calls import Calls
from kuberaven.node.pods import AgentPods
from kuberaven.node.readiness import Readiness
from tests.helpers import eventually

VIF = Vif(port="7", network="2", subnet="3", cidr="10.64.0.0/24", gateway="10.64.0.1", mac="fa:16:3e:00:00:07",
          ip="10.64.0.5", node="n")  # fmt: skip


def pod_event(kind: str, name: str = "web", uid: str = "u-1", vif: str | None = None) -> WatchEvent:
    annotations = {VIF_ANNOTATION: vif} if vif is not None else {}
    metadata = {"name": name, "namespace": "shop", "uid": uid, "annotations": annotations}
    return WatchEvent(kind, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata})


async def test_a_wait_is_woken_by_the_event_that_brings_the_vif() -> None:
    pods = AgentPods()
    pods.on_event(pod_event("ADDED"))
    assert pods.vif("shop/web", None) == f"the pod has no {VIF_ANNOTATION} annotation"
    loop = asyncio.get_running_loop()
    loop.call_later(0.2, pods.on_event, pod_event("MODIFIED", vif=VIF.to_json()))
    started = time.monotonic()
    assert await pods.wait("shop/web", "u-1", lambda _: True, 30) == VIF
    assert time.monotonic() - started < 1  # woken by the event, not by the bound
    assert pods._waiters == {}  # nothing left behind


async def test_a_wait_past_its_bound_says_why_and_the_uid_must_match() -> None:
    pods = AgentPods()
    assert await pods.wait("shop/web", None, lambda _: True, 0.1) == "the watch is syncing"
    pods.on_synced()
    assert "has not seen it" in str(await pods.wait("shop/web", None, lambda _: True, 0.1))
    pods.on_event(pod_event("ADDED", vif=VIF.to_json()))
    assert await pods.wait("shop/web", "u-2", lambda _: True, 0.1) == "the pod is another one (uid u-1, not u-2)"
    # Ready only when the predicate says so: the last VIF seen otherwise.
    assert await pods.wait("shop/web", None, lambda vif: vif.active is False, 0.1) == VIF
    pods.on_event(pod_event("DELETED"))
    assert pods.pods == {}
    pods.on_event(pod_event("ADDED", vif='{"version": 9}'))
    with pytest.raises(CniError) as caught:
        pods.vif("shop/web", None)
    assert caught.value.code == ErrorCode.DECODE_FAILURE


@pytest.fixture
def threads() -> Iterator[OffLoop]:
    made = OffLoop(2, "wire")
    try:
        yield made
    finally:
        made.close(wait=True)


async def call(calls: Calls, command: str, version: str = "1.1.0", **environ: str) -> tuple[int, Any]:
    config = json.dumps({"cniVersion": version, "name": "kuberaven", "type": "kuberaven-cni", "annotationTimeout": 0.2})
    code, stdout = await calls.answer({"CNI_COMMAND": command, **environ}, config)
    return code, json.loads(stdout) if stdout else None


@pytest.mark.skipif(Path(DEFAULT_OVSDB).exists(), reason=f"an Open vSwitch runs here ({DEFAULT_OVSDB}): STATUS asks it")
async def test_status_is_50_until_the_watch_is_synced(threads: OffLoop) -> None:
    synced = False
    calls = Calls(AgentPods(), Node(), Readiness.AUTO, threads, lambda: synced)
    code, error = await call(calls, "STATUS", version="1.0.0")
    assert (code, error["code"], error["cniVersion"]) == (1, ErrorCode.NOT_AVAILABLE, "1.0.0")
    synced = True
    assert await call(calls, "STATUS") == (0, None)


async def test_status_is_51_when_the_nodes_open_vswitch_does_not_answer(threads: OffLoop, tmp_path: Path) -> None:
    if shutil.which("ovs-vsctl") is None:
        pytest.skip("ovs-vsctl is not installed")
    calls = Calls(AgentPods(), Node(ovsdb=f"unix:{tmp_path}/db.sock"), Readiness.AUTO, threads, lambda: True)
    code, error = await call(calls, "STATUS")
    assert (code, error["code"]) == (1, ErrorCode.LIMITED_CONNECTIVITY) and f"{tmp_path}/db.sock" in error["msg"]


async def test_add_answers_from_the_watch_and_never_waits_past_its_bound(threads: OffLoop) -> None:
    pods = AgentPods()
    pods.on_synced()
    calls = Calls(pods, Node(), Readiness.AUTO, threads, lambda: True)
    environ = {"CNI_CONTAINERID": "c", "CNI_IFNAME": "eth0", "CNI_ARGS": "K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web"}
    code, error = await call(calls, "ADD", CNI_NETNS="/proc/self/ns/net", **environ)
    assert (code, error["code"]) == (1, ErrorCode.TRY_AGAIN_LATER)
    assert "pod shop/web: no VIF after 0.2 s" in error["msg"] and "network translator" in error["details"]
    code, error = await call(calls, "ADD", CNI_NETNS="/no/such/netns", **environ)
    assert (code, error["code"]) == (1, ErrorCode.UNKNOWN_CONTAINER)
    code, error = await call(calls, "ADD", version="0.4.0", CNI_NETNS="/proc/self/ns/net", **environ)
    assert (code, error["code"], error["cniVersion"]) == (1, ErrorCode.INCOMPATIBLE_VERSION, "1.1.0")
    assert await call(calls, "VERSION", version="1.0.0") == (
        0,
        {"cniVersion": "1.0.0", "supportedVersions": ["1.0.0", "1.1.0"]},
    )


@pytest.fixture
def ovsdb(tmp_path: Path) -> Iterator[Node]:
    """A real Open_vSwitch database (ovsdb-server alone, no switch, no OVN) with br-int and one port, p1."""
    if shutil.which("ovsdb-server") is None:
        pytest.skip("ovsdb-server is not installed")
    database, socket = tmp_path / "conf.db", tmp_path / "db.sock"
    subprocess.run(["ovsdb-tool", "create", str(database), OVS_SCHEMA], check=True)
    server = subprocess.Popen(
        ["ovsdb-server", f"--remote=punix:{socket}", f"--unixctl={tmp_path / 'ctl'}", str(database)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not socket.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        node = Node(ovsdb=f"unix:{socket}")
        vsctl = ["ovs-vsctl", f"--db={node.ovsdb}", "--timeout=10", "--no-wait"]
        subprocess.run([*vsctl, "init"], check=True)
        subprocess.run([*vsctl, "add-br", "br-int", "--", "add-port", "br-int", "p1"], check=True)
        yield node
    finally:
        server.kill()
        server.wait()


OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def monitors(node: Node) -> int:
    """The monitors the fixture's ovsdb-server serves (its memory/show): a waiting ``ovs-vsctl wait-until`` has some,
    nothing else in these tests holds one."""
    assert node.ovsdb is not None
    control = Path(node.ovsdb.removeprefix("unix:")).with_name("ctl")
    shown = subprocess.run(
        ["ovs-appctl", "-t", str(control), "memory/show"], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"monitors:(\d+)", shown)
    assert found is not None, shown
    return int(found[1])


async def test_ovn_installed_is_awaited_in_the_database_and_auto_follows_ovn_remote(
    ovsdb: Node, threads: OffLoop
) -> None:
    vsctl = ["ovs-vsctl", f"--db={ovsdb.ovsdb}", "--no-wait"]
    # Not set: the wait ends at its bound, saying so.
    started = time.monotonic()
    assert await readiness.ovn_installed(ovsdb, "p1", 0.5) == "p1 is not ovn-installed after 0.5 s"
    assert time.monotonic() - started < 2
    # Set while waiting (as ovn-controller sets it): the wait returns at once, not at its bound.
    await eventually(lambda: monitors(ovsdb) == 0, timeout=10, off_loop=True)  # the timed-out wait's is gone
    waiting = asyncio.create_task(readiness.ovn_installed(ovsdb, "p1", 30))
    await eventually(lambda: monitors(ovsdb) > 0, timeout=10, off_loop=True)  # its ovs-vsctl watches the database
    assert not waiting.done()
    started = time.monotonic()
    await asyncio.to_thread(subprocess.run, [*vsctl, "set", "Interface", "p1", "external_ids:ovn-installed=true"])
    assert await asyncio.wait_for(waiting, 5) is None
    assert time.monotonic() - started < 2
    # auto: port-active without ovn-remote (no ovn-controller configured), ovn-installed with it.
    assert await readiness.resolve(Readiness.AUTO, ovsdb) == Readiness.PORT_ACTIVE
    await asyncio.to_thread(subprocess.run, [*vsctl, "set", "Open_vSwitch", ".", "external_ids:ovn-remote=unix:/x"])
    assert await readiness.resolve(Readiness.AUTO, ovsdb) == Readiness.OVN_INSTALLED
    assert await readiness.resolve(Readiness.PORT_ACTIVE, ovsdb) == Readiness.PORT_ACTIVE
    # A database that does not answer decides nothing (the next ADD asks again).
    with pytest.raises(CniError):
        await readiness.resolve(Readiness.AUTO, Node(ovsdb=f"{ovsdb.ovsdb}-none"))
    # STATUS asks the database: it answers.
    calls = Calls(AgentPods(), ovsdb, Readiness.AUTO, threads, lambda: True)
    assert await call(calls, "STATUS") == (0, None)


def shop_web_add() -> Invocation:
    """ADD of pod shop/web, whose wait for its port gives up after 0.3 s."""
    config = {"cniVersion": "1.1.0", "name": "kuberaven", "activeTimeout": 0.3}
    environ = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0"}
    return invocation({**environ, "CNI_ARGS": "K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web"}, config)


async def test_port_active_readiness_waits_for_the_vif_to_say_active(threads: OffLoop) -> None:
    """Nodes without OVN: the pod is ready once Neutron's ACTIVE, written into its VIF, comes through the watch."""
    down = dataclasses.replace(VIF, binding=Binding.OVS, status=PORT_DOWN)
    pods = AgentPods()
    pods.on_event(pod_event("ADDED", vif=down.to_json()))
    calls = Calls(pods, Node(), Readiness.PORT_ACTIVE, threads, lambda: True)
    add = shop_web_add()
    with pytest.raises(CniError) as caught:
        await calls._ready(add, down, "krv0")
    assert caught.value.code == ErrorCode.TRY_AGAIN_LATER
    assert caught.value.msg == "pod shop/web: port 7 is DOWN, not ACTIVE, after 0.3 s"
    # ACTIVE while waiting: the wait ends with the event, not at its bound.
    patient = dataclasses.replace(add, active_timeout=30)
    active = dataclasses.replace(down, status=PORT_ACTIVE)
    asyncio.get_running_loop().call_later(0.2, pods.on_event, pod_event("MODIFIED", vif=active.to_json()))
    started = time.monotonic()
    await calls._ready(patient, down, "krv0")
    assert time.monotonic() - started < 2


async def test_a_nested_pods_add_waits_for_its_subport_and_names_the_trunk(threads: OffLoop) -> None:
    """binding vlan: whatever the readiness mode, ADD waits for the subport ACTIVE in the VIF before it wires
    anything; a subport still DOWN at activeTimeout (its trunk's parent not ACTIVE) is an error naming the
    trunk."""
    nested = dataclasses.replace(
        VIF, binding=Binding.VLAN, status=PORT_DOWN, vlan_id=101, trunk="trunk-0", parent_mac="fa:16:3e:aa:00:01"
    )
    pods = AgentPods()
    pods.on_event(pod_event("ADDED", vif=nested.to_json()))
    calls = Calls(pods, Node(), Readiness.OVN_INSTALLED, threads, lambda: True)
    add = shop_web_add()
    with pytest.raises(CniError) as caught:
        await calls.add(add, nested)
    assert caught.value.code == ErrorCode.TRY_AGAIN_LATER
    assert caught.value.msg == "pod shop/web: subport 7 of trunk trunk-0 is DOWN, not ACTIVE, after 0.3 s"
    assert "fa:16:3e:aa:00:01" in caught.value.details
    # ACTIVE while waiting: the wait ends with the event and gives the newest VIF, the one wired.
    patient = dataclasses.replace(add, active_timeout=30)
    active = dataclasses.replace(nested, status=PORT_ACTIVE)
    asyncio.get_running_loop().call_later(0.2, pods.on_event, pod_event("MODIFIED", vif=active.to_json()))
    started = time.monotonic()
    assert await calls._subport_active(patient, nested) == active
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (["--park-for", "-1"], "park_for: Input should be greater than or equal to 0 (from --park-for)"),
        (["--workers", "0"], "workers: Input should be greater than or equal to 1 (from --workers)"),
        (["--park-for", "soon"], "park_for: Input should be a valid number, unable to parse string as a number"),
    ],
)
def test_kuberaven_node_refuses_bad_settings_and_names_them(flags: list[str], refusal: str) -> None:
    done = CliRunner().invoke(cli.app, ["node", "--node", "n1", *flags])
    assert done.exit_code == 2 and refusal in done.output, done.output
