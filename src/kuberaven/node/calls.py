"""One CNI call, as the node agent answers it (node/): the plugin's request in, (exit code, stdout) out.

    (CNI_* environment, config text) ──► spec.py: Invocation ──►
        ADD    the pod's VIF from AgentPods (waiting up to annotationTimeout for the watch to bring it)
               ──► links.wire in the agent's threads ──► OVS binding: readiness.py's wait (up to activeTimeout)
               vlan binding (a nested pod, the node a VM): the VIF ACTIVE first (up to activeTimeout; else an
               error naming the trunk) ──► vlan_links.wire: an 802.1Q link on the VM's NIC, no OVS
               ──► the result, in the config's cniVersion
        ADD    of an OVS port with a parked pair (handover.py): that pair taken over, no new one made
        DEL    links.host_end ──► handover.park (an OVS port: the pair kept for the port's next pod), else
               links.unwire_host; vlan_links.unwire_pod_end (gone already is fine: DEL twice succeeds)
        CHECK  links.check (vlan_links.check for a nested pod) against the VIF
        STATUS the informer synced (else 50) and, on an OVS node, its database answering (else 51)
        GC     the node's krv… interfaces and OVS ports that serve no valid attachment (spec.stale) ──► unwired
    sweep (the agent's, every few seconds): pairs parked past parkFor (spec.expired) ──► unwired
    any failure ──► the spec's error JSON, exit 1

Calls for one attachment (container + interface: its host end's name) run
one at a time; calls for different pods run in parallel. Nothing is kept
between calls but the attachments in flight: everything else is found again
by name, so an agent restarted mid-call answers the runtime's retry as the
first would have.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from ..cni import handover, links, vlan_links
from ..cni.links import Node
from ..cni.protocol import config_version, version_json
from ..cni.spec import (
    PARKED_AT_KEY,
    CniError,
    Command,
    ErrorCode,
    Invocation,
    expired,
    host_ifname,
    invocation,
    parse_config,
    result,
    stale,
)
from ..kube.loops import OffLoop
from ..network.vif import Binding, Vif
from . import readiness
from .pods import AgentPods
from .readiness import Readiness

log = logging.getLogger(__name__)
T = TypeVar("T")
WRITES_VIF = "kuberaven's network translator writes it once the pod is scheduled (network_cni=kuberaven)"


class Calls:
    """The agent's answers to the plugin; ``ready()`` says whether its informer is synced and current."""

    def __init__(
        self, pods: AgentPods, node: Node, mode: Readiness, threads: OffLoop, ready: Callable[[], bool]
    ) -> None:
        """``threads``: where the kernel's and Open vSwitch's commands run (they block), pods in parallel."""
        self.pods, self.node, self.mode, self.threads, self.ready = pods, node, mode, threads, ready
        self._resolved: Readiness | None = None
        self._locks: dict[str, asyncio.Lock] = {}  # host end → the lock of its calls in flight
        self._users: dict[str, int] = {}

    async def answer(self, environ: dict[str, str], config: str) -> tuple[int, str]:
        """(exit code, stdout) of one call: the result or nothing and 0, or the spec's error and 1."""
        started, version = time.monotonic(), config_version(config)
        command = environ.get("CNI_COMMAND", "")
        try:
            found = await self._run(command, environ, config)
        except CniError as error:
            log.warning("%s %s: error %d: %s", command, _who(environ), error.code, error.msg)
            return 1, error.to_json(version)
        except Exception as error:  # anything unforeseen still answers in the spec's format
            log.exception("%s %s failed", command, _who(environ))
            return 1, CniError(ErrorCode.IO_FAILURE, f"{type(error).__name__}: {error}").to_json(version)
        log.info("%s %s: done in %.2f s", command, _who(environ), time.monotonic() - started)
        return 0, "" if found is None else json.dumps(found)

    async def _run(self, command: str, environ: dict[str, str], text: str) -> dict[str, Any] | None:
        if command == Command.VERSION:
            return json.loads(version_json(text))  # type: ignore[no-any-return]
        call = invocation(environ, parse_config(text))
        if call.command == Command.STATUS:
            await self.status()
            return None
        if call.command == Command.GC:
            await self.gc(call)
            return None
        if call.command == Command.DEL:
            await self.delete(call)
            return None
        assert call.netns is not None  # required for ADD and CHECK
        if not await self._blocking(os.path.exists, call.netns):
            raise CniError(ErrorCode.UNKNOWN_CONTAINER, f"network namespace {call.netns} does not exist")
        vif = await self._vif(call)
        if call.command == Command.CHECK:
            await self._blocking(vlan_links.check if vif.binding == Binding.VLAN else links.check, vif, call, self.node)
            return None
        return await self.add(call, vif)

    async def add(self, call: Invocation, vif: Vif) -> dict[str, Any]:
        """Wire the pod (an OVS port's parked pair taken over if it has one) and, for an OVS port, wait until it
        is ready; a nested pod's subport is waited for first (its readiness needs nothing of the VM's: a failed
        wait leaves nothing to undo)."""
        if vif.binding == Binding.VLAN:
            vif = await self._subport_active(call, vif)
        own = host_ifname(call.container_id, call.ifname)
        async with self._attachment(own):
            if vif.binding != Binding.OVS:
                wire = vlan_links.wire if vif.binding == Binding.VLAN else links.wire
                host, host_mac = await self._blocking(wire, vif, call, self.node)
                return result(vif, call, host, host_mac)
            claiming = await self._blocking(links.claimants, vif.port, self.node)  # one look, for both below
            wired = await self._take_over(call, vif, own, claiming)
            if wired is None:
                wired = await self._blocking(links.wire, vif, call, self.node, list(claiming))
            host, host_mac = wired
            await self._ready(call, vif, host)
        return result(vif, call, host, host_mac)

    async def _take_over(
        self, call: Invocation, vif: Vif, own: str, claiming: dict[str, dict[str, str]]
    ) -> tuple[str, str] | None:
        """The host end and MAC of a parked pair of the VIF's port (of its ``claiming`` interfaces), handed to this
        pod; None if it has none."""
        if self.node.park_for <= 0:
            return None
        for host, ids in handover.parked(claiming).items():
            async with self._attachment(host) if host != own else contextlib.nullcontext():
                taken = await self._blocking(handover.take_over, host, ids, vif, call, self.node)
            if taken is not None:
                log.info("ADD %s: took over %s, parked by the port's last pod", call.pod, host)
                return taken
        return None

    async def delete(self, call: Invocation) -> None:
        """DEL: the attachment's host end parked for the next pod of its port, else unwired; then a nested pod's
        802.1Q link. Gone already, or handed to another pod, is fine: DEL twice succeeds."""
        own = host_ifname(call.container_id, call.ifname)
        async with self._attachment(own):
            host, ids = await self._blocking(links.host_end, call, self.node)
            if host is not None:
                async with self._attachment(host) if host != own else contextlib.nullcontext():
                    if not await self._park(host, ids, call):
                        await self._blocking(links.unwire_host, host, self.node)
            await self._blocking(vlan_links.unwire_pod_end, call)

    async def _park(self, host: str, ids: dict[str, str], call: Invocation) -> bool:
        if self.node.park_for <= 0 or not ids:
            return False
        try:
            return await self._blocking(handover.park, host, ids, call, self.node)
        except CniError as error:
            log.warning("DEL %s: %s not parked (%s); unwired", call.pod, host, error.msg)
            return False

    async def sweep(self) -> None:
        """Unwire the pairs parked for parkFor seconds or more: no pod of their port came."""
        if self.node.park_for <= 0 or not links.uses_ovs(self.node):
            return
        found = handover.parked(await self._blocking(links.interfaces, self.node))
        since = {host: float(ids[PARKED_AT_KEY]) for host, ids in found.items()}
        for host in expired(since, time.time(), self.node.park_for):
            async with self._attachment(host):
                if await self._blocking(handover.unwire_parked, host, self.node):
                    log.info("unwired %s: parked %.0f s, no pod of its port came", host, time.time() - since[host])

    async def _vif(self, call: Invocation) -> Vif:
        found = await self.pods.wait(call.pod, call.pod_uid, lambda _: True, call.timeout)
        if isinstance(found, Vif):
            return found
        raise CniError(
            ErrorCode.TRY_AGAIN_LATER, f"pod {call.pod}: no VIF after {call.timeout:g} s ({found})", WRITES_VIF
        )

    async def _ready(self, call: Invocation, vif: Vif, host: str) -> None:
        """Until the plugged port is ready, as the readiness mode says; TRY_AGAIN_LATER past activeTimeout."""
        if self._resolved is None:
            self._resolved = await readiness.resolve(self.mode, self.node)
        bridge = self.node.bridge_for(call)
        if self._resolved == Readiness.OVN_INSTALLED:
            reason = await readiness.ovn_installed(self.node, host, call.active_timeout)
            if reason is not None:
                raise CniError(
                    ErrorCode.TRY_AGAIN_LATER,
                    f"pod {call.pod}: port {vif.port} plugged into {bridge}: {reason}",
                    "ovn-controller sets external_ids:ovn-installed on the Interface once it has bound the port "
                    "to this chassis and installed its flows",
                )
            return
        found = await self._port_active(call, vif)
        if isinstance(found, Vif):
            return
        raise CniError(
            ErrorCode.TRY_AGAIN_LATER,
            f"pod {call.pod}: port {vif.port} is {found}, not ACTIVE, after {call.active_timeout:g} s",
            f"plugged into {bridge}; the node's OVS agent binds it and Neutron reports it ACTIVE, "
            "which kuberaven writes into the pod's VIF",
        )

    async def _subport_active(self, call: Invocation, vif: Vif) -> Vif:
        """The nested pod's VIF once its subport is ACTIVE; TRY_AGAIN_LATER naming the trunk past activeTimeout
        (ML2/OVN makes a subport ACTIVE with its trunk's parent: a subport that is not says the parent is not)."""
        found = await self._port_active(call, vif)
        if isinstance(found, Vif):
            return found
        raise CniError(
            ErrorCode.TRY_AGAIN_LATER,
            f"pod {call.pod}: subport {vif.port} of trunk {vif.trunk} is {found}, not ACTIVE, "
            f"after {call.active_timeout:g} s",
            f"a subport is ACTIVE once its trunk {vif.trunk} and the trunk's parent port (the VM's NIC, "
            f"MAC {vif.parent_mac}) are; kuberaven writes the subport's status into the pod's VIF",
        )

    async def _port_active(self, call: Invocation, vif: Vif) -> Vif | str:
        """The pod's VIF once its port is ACTIVE (up to activeTimeout), else the port's last status."""
        found = await self.pods.wait(
            call.pod, call.pod_uid, lambda now: now.port == vif.port and now.active, call.active_timeout
        )
        if isinstance(found, Vif) and found.port == vif.port and found.active:
            return found
        return found.status if isinstance(found, Vif) and found.port == vif.port else f"unknown ({found})"

    async def status(self) -> None:
        """STATUS: success when ADD can be served: the pods' watch synced and current, the node's OVS answering."""
        if not self.ready():
            raise CniError(ErrorCode.NOT_AVAILABLE, "the agent's watch of this node's pods is not synced")
        if links.uses_ovs(self.node) and not await self._blocking(links.ovs_answers, self.node):
            where = self.node.ovsdb or links.DEFAULT_OVSDB
            raise CniError(
                ErrorCode.LIMITED_CONNECTIVITY, f"the node's Open vSwitch database ({where}) does not answer"
            )

    async def gc(self, call: Invocation) -> None:
        """GC: unwire every krv… host end and OVS port that is no valid attachment and has no call in flight."""
        names = await self._blocking(links.host_ends, self.node, self.node.bridge_for(call))
        serving = await self._blocking(links.serving, self.node)
        failed = []
        for host in stale(names, call.valid_attachments, busy=self._locks, serving=serving):
            try:
                async with self._attachment(host):
                    await self._blocking(links.unwire_host, host, self.node)
                log.info("GC: removed %s", host)
            except CniError as error:
                failed.append(f"{host}: {error.msg}")
        if failed:
            raise CniError(ErrorCode.IO_FAILURE, f"GC could not remove {len(failed)} attachments", "; ".join(failed))

    @contextlib.asynccontextmanager
    async def _attachment(self, host: str) -> AsyncIterator[None]:
        """One call at a time for one attachment; the lock lives while calls for it are in flight."""
        lock = self._locks.setdefault(host, asyncio.Lock())
        self._users[host] = self._users.get(host, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[host] -= 1
            if not self._users[host]:
                del self._users[host], self._locks[host]

    async def _blocking(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the agent's threads (links.py's subprocesses block)."""
        return await self.threads(function, *args)


def _who(environ: dict[str, str]) -> str:
    args = dict(item.split("=", 1) for item in environ.get("CNI_ARGS", "").split(";") if "=" in item)
    pod = f"{args.get('K8S_POD_NAMESPACE', '')}/{args.get('K8S_POD_NAME', '')}".strip("/")
    return " ".join(x for x in (pod, environ.get("CNI_CONTAINERID", "")) if x) or "-"
