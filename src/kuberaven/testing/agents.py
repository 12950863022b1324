"""The environment's node agents (testing/): `kuberaven node` for the data path's node and for each VM.

TestEnv (env.py) ──► start_agent(node, socket, options) ──► Process, once kuberaven-cni's STATUS succeeds
cni_config(socket) ──► what a runtime on that node passes to kuberaven-cni (env.json's cni_config)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..cni.plugin import call_agent
from .processes import Process, wait_for

CNI_VERSION = "1.1.0"  # the version of the cni_config a runtime is given
AGENT_READY_WITHIN = 60.0  # seconds for a node agent's STATUS to succeed (its watch synced, OVS answering)


def cni_config(socket: Path) -> dict[str, Any]:
    """What a container runtime passes to kuberaven-cni on stdin for the agent at ``socket`` (it adds only
    CNI_*)."""
    return {"cniVersion": CNI_VERSION, "name": "kuberaven", "type": "kuberaven-cni", "socket": str(socket)}


def start_agent(name: str, node: str, kubeconfig: Path, socket: Path, options: tuple[str, ...], logs: Path) -> Process:
    """`kuberaven node --node <node>` serving ``socket`` (and ``options``: its netns, its Open vSwitch), started
    and returned once its STATUS succeeds (its watch synced; OVS answering where it has one)."""
    agent = Process(
        name,
        [
            *(sys.executable, "-m", "kuberaven", "node", "--node", node),
            *("--kubeconfig", str(kubeconfig), "--socket", str(socket), *options),
        ],
        logs,
    )
    agent.start()
    status = {"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}
    config = json.dumps(cni_config(socket))
    wait_for(
        lambda: call_agent(str(socket), status, config)[0] == 0,
        AGENT_READY_WITHIN,
        f"the node agent of {node} (kuberaven node)",
        process=agent,
    )
    return agent
