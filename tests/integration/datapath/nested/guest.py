"""The container runtime of a nested node, played inside its VM (testing/vm.py) through the VM's ``exec``.

Each VM of env.json's openstack.nested says how to run a command in it (``exec``), the cni_config of its agent
and how to run kuberaven-cni there (``cni``). A nested pod's sandbox is a network namespace in the guest, wired
by kuberaven-cni run in the guest as a runtime would run it; its servers and clients run there too, with the
host's Python (``-I -S``: the standard library only, each start costs about a second of emulated CPU). Every
sandbox is removed at the end, with a DEL first, as tests/datapath.py's Sandboxes do on the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kuberaven.cni.spec import ErrorCode
from kuberaven.kube.client import KubeClient
from tests.datapath import (
    CLIENT,
    CONNECT_TIMEOUT,
    DROPPED,
    FIRST_POD_RETRY,
    RETRY_EVERY,
    SERVER,
    DataPath,
    Pod,
    attempt,
    create_pod,
    run_process,
)
from tests.helpers import vif_of

SERVER_UP_WITHIN = 60.0  # seconds for a server in a guest to listen (a Python start under emulation)
GUEST_COMMAND_TIMEOUT = 120.0  # seconds any one command in a guest may take


async def in_vm(
    vm: dict[str, Any],
    *argv: str,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = GUEST_COMMAND_TIMEOUT,
) -> tuple[int, str, str]:
    """``argv`` run in the VM ``vm`` (its ``exec``): (exit code, stdout, stderr). Past ``timeout`` its exec is
    killed, which ends the command in the guest too, and TimeoutError is raised."""
    options = [*(["-i"] if stdin is not None else []), *(f"--env={k}={v}" for k, v in (env or {}).items())]
    command = [*vm["exec"], *options, "--", *argv]
    return await run_process(command, stdin, timeout=timeout)


async def in_vm_ok(vm: dict[str, Any], *argv: str) -> str:
    code, out, err = await in_vm(vm, *argv)
    assert code == 0, f"{vm['node']}: {' '.join(argv)}: {code} {err}"
    return out


async def vm_cni(
    vm: dict[str, Any],
    command: str,
    sandbox: str,
    namespace: str,
    pod: str,
    extra: dict[str, Any] | None = None,
    timeout: float = GUEST_COMMAND_TIMEOUT,
) -> tuple[int, dict[str, Any] | None]:
    """kuberaven-cni run in the VM as its runtime runs it: (exit code, the JSON it printed). ``extra``: keys added
    to the VM's cni_config (GC's cni.dev/valid-attachments); ``timeout``: the runtime's deadline for the call."""
    environ = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": f"ctr-{sandbox}",
        "CNI_NETNS": f"/run/netns/{sandbox}",
        "CNI_IFNAME": "eth0",
        "CNI_PATH": "/opt/cni/bin",
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod}",
    }
    config = {**vm["cni_config"], **(extra or {})}
    code, out, err = await in_vm(vm, *vm["cni"], env=environ, stdin=json.dumps(config).encode(), timeout=timeout)
    assert not err.strip() or code != 0, err
    return code, json.loads(out) if out.strip() else None


async def vm_links(vm: dict[str, Any], sandbox: str | None = None) -> list[dict[str, Any]]:
    """`ip -j -d link show` in the VM (in its sandbox ``sandbox``, if given)."""
    netns = ["-n", sandbox] if sandbox else []
    return list(json.loads(await in_vm_ok(vm, "ip", *netns, "-j", "-d", "link", "show")))


def vlan_links(links: list[dict[str, Any]]) -> list[str]:
    """The 802.1Q links among ``links``: what a nested pod leaves in its VM if its DEL did not clean up."""
    return [link["ifname"] for link in links if link.get("linkinfo", {}).get("info_kind") == "vlan"]


@dataclass
class GuestSandboxes:
    """Sandboxes (network namespaces) a test made in the VMs, and the nested pods wired into them."""

    datapath: DataPath
    kube: KubeClient
    add_timeout: float = GUEST_COMMAND_TIMEOUT  # the runtime's deadline for one ADD
    made: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (VM, sandbox)
    pods: list[Pod] = field(default_factory=list)

    async def new(self, vm: dict[str, Any]) -> str:
        name = f"krvdp-{uuid.uuid4().hex[:8]}"
        await in_vm_ok(vm, "ip", "netns", "add", name)
        self.made.append((vm, name))
        return name

    async def pod(self, namespace: str, name: str, vm: dict[str, Any], labels: dict[str, str] | None = None) -> Pod:
        """A pod bound to ``vm``'s node, wired by kuberaven-cni ADD in the VM right after it was created (ADD
        returns once its subport is ACTIVE); a namespace's first pod is retried while its network is made."""
        first = all(pod.namespace != namespace for pod in self.pods)
        await create_pod(self.kube, self.datapath, namespace, name, labels, node=vm["node"])
        sandbox = await self.new(vm)
        deadline = time.monotonic() + (FIRST_POD_RETRY if first else 0.0)
        while True:
            code, answer = await vm_cni(vm, "ADD", sandbox, namespace, name, timeout=self.add_timeout)
            if code == 0 or (answer or {}).get("code") != ErrorCode.TRY_AGAIN_LATER or time.monotonic() > deadline:
                break
            await asyncio.sleep(RETRY_EVERY)
        assert code == 0 and answer is not None, f"{namespace}/{name} on {vm['node']}: {answer}"
        pod = Pod(namespace, name, sandbox, await vif_of(self.kube, namespace, name, timeout=1), answer, vm)
        self.pods.append(pod)
        return pod

    async def delete(self, pod: Pod) -> None:
        """The runtime's end of a pod: DEL, then its sandbox removed."""
        assert pod.vm is not None
        code, answer = await vm_cni(pod.vm, "DEL", pod.sandbox, pod.namespace, pod.name)
        assert code == 0, answer
        await in_vm_ok(pod.vm, "ip", "netns", "del", pod.sandbox)
        self.pods.remove(pod)
        self.made.remove((pod.vm, pod.sandbox))

    async def remove(self) -> None:
        for pod in self.pods:
            with contextlib.suppress(Exception):
                await vm_cni(pod.vm or {}, "DEL", pod.sandbox, pod.namespace, pod.name)
        for vm, sandbox in self.made:
            with contextlib.suppress(Exception):
                await in_vm(vm, "ip", "netns", "del", sandbox)


@contextlib.asynccontextmanager
async def guest_sandboxes(
    datapath: DataPath, kube: KubeClient, add_timeout: float = GUEST_COMMAND_TIMEOUT
) -> AsyncIterator[GuestSandboxes]:
    """Sandboxes in the VMs, every one removed at the end; ``add_timeout``: the runtime's deadline for one ADD."""
    made = GuestSandboxes(datapath, kube, add_timeout)
    try:
        yield made
    finally:
        await made.remove()


@contextlib.asynccontextmanager
async def vm_serving(vm: dict[str, Any], netns: str | None, port: int, name: str) -> AsyncIterator[None]:
    """tests/datapath.py's TCP server, in the VM (in its sandbox ``netns``, else the VM's own netns); killing
    its exec on the host kills it in the guest."""
    where = ["ip", "netns", "exec", netns] if netns else []
    argv = [*where, vm["python"], "-I", "-S", "-c", SERVER, str(port), name]
    server = await asyncio.create_subprocess_exec(*vm["exec"], "--", *argv, stdout=asyncio.subprocess.PIPE)
    try:
        assert server.stdout is not None
        assert await asyncio.wait_for(server.stdout.readline(), SERVER_UP_WITHIN) == b"up\n", f"{name} on {vm['node']}"
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            server.kill()
        await server.wait()


async def attempt_from(pod: Pod, address: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str:
    """A TCP connection from ``pod``'s sandbox, in its VM or on the host: what the server answered, or "! " and the
    client's error."""
    if pod.vm is None:
        return await attempt(pod.sandbox, address, port, timeout)
    argv = ["ip", "netns", "exec", pod.sandbox, pod.vm["python"], "-I", "-S", "-c", CLIENT, address, str(port)]
    _, out, _ = await in_vm(pod.vm, *argv, str(timeout))
    return out.strip() or "! no answer"


async def reaches(source: Pod, target: Pod, port: int = 8080) -> None:
    """``source`` connects to ``target``'s server, which sees ``source``'s own address."""
    answer = await attempt_from(source, target.ip, port)
    assert answer == f"{target.name} {source.ip}", f"{source.name} → {target.name}:{port}: {answer}"


async def dropped_from(source: Pod, address: str, port: int) -> None:
    """A TCP connection from ``source`` is dropped (no answer within the client's timeout), as a security group
    drops it; a refusal or an unreachable host fails."""
    answer = await attempt_from(source, address, port)
    assert answer == DROPPED, f"{source.name} → {address}:{port}: {answer!r}, not dropped"
