"""When an OVS-plugged pod is ready (node/): the node's own Open vSwitch says so, or Neutron does.

    ADD (OVS binding), once the port is plugged ──► mode:
        ovn-installed ──► `ovs-vsctl wait-until Interface <host end> external_ids:ovn-installed=true`
                          (an asyncio subprocess: ovs-vsctl waits on the database's own notifications)
                          ovn-controller sets it once the port's flows are installed on this chassis
        port-active   ──► the pod's VIF says ACTIVE (the pods reconciler writes the status network/activation.py
                          reads from Neutron into it, the agent's informer brings it): the node has no OVN
                          (ML2/OVS with Neutron's agent)
        auto          ──► ovn-installed where the Open_vSwitch table's external_ids has ovn-remote (ovn-controller
                          is configured on this node), else port-active; decided at the first OVS ADD
                          whose database answered the question

Bridge binding (the embedded backend) needs no wait: the pod is ready once wired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from enum import StrEnum

from ..cni import links
from ..cni.links import Node

log = logging.getLogger(__name__)
OVN_INSTALLED = "external_ids:ovn-installed=true"


class Readiness(StrEnum):
    AUTO = "auto"
    OVN_INSTALLED = "ovn-installed"
    PORT_ACTIVE = "port-active"


async def resolve(mode: Readiness, node: Node) -> Readiness:
    """The mode to use: ``mode`` itself, or for AUTO what the node's Open vSwitch says."""
    if mode != Readiness.AUTO:
        return mode
    remote = await asyncio.to_thread(links.ovn_remote, node)
    found = Readiness.OVN_INSTALLED if remote else Readiness.PORT_ACTIVE
    log.info("readiness auto: %s (Open_vSwitch external_ids:ovn-remote %s)", found, remote or "not set")
    return found


async def ovn_installed(node: Node, host: str, timeout: float) -> str | None:
    """None once ovn-controller has marked ``host``'s Interface ovn-installed, within ``timeout`` seconds; else
    what stopped the wait."""
    command = links.vsctl_command(node, "wait-until", "Interface", host, OVN_INSTALLED)
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        return f"{host} is not ovn-installed after {timeout:g} s"
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if process.returncode != 0:
        return f"{' '.join(command)}: exit {process.returncode}: {err.decode().strip()}"
    return None
