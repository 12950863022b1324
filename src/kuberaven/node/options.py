"""The node agent's options (node/): what `kuberaven node` is told, each default written here once.

node_settings.py reads them from flags, ``KUBERAVEN_NODE_*`` variables and
a config file (setting_schema.py); each field is the setting of its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from annotated_types import Ge

from ..cni.links import DEFAULT_OVS_BRIDGE, DEFAULT_PARK_FOR
from ..cni.protocol import DEFAULT_SOCKET
from .readiness import Readiness

DEFAULT_WORKERS = 16  # threads running ip / ovs-vsctl: pods wired at once
DEFAULT_STOP_TIMEOUT = 10.0  # seconds calls in flight get on SIGTERM


@dataclass(frozen=True)
class NodeOptions:
    """The agent's settings; ``name`` is required (the DaemonSet gives NODE_NAME from the downward API)."""

    name: str = ""  # the Kubernetes node it serves
    socket: Path = Path(DEFAULT_SOCKET)  # where kuberaven-cni calls it
    readiness: Readiness = Readiness.AUTO
    ovsdb: str | None = None  # the node's Open_vSwitch database; None: ovs-vsctl's own
    ovs_bridge: str = DEFAULT_OVS_BRIDGE
    netns: str | None = None  # the netns of host ends, bridges and OVS; None: the agent's own
    workers: Annotated[int, Ge(1)] = DEFAULT_WORKERS
    park_for: Annotated[float, Ge(0)] = DEFAULT_PARK_FOR  # seconds a gone pod's pair waits for its port's next pod
    stop_timeout: Annotated[float, Ge(0)] = DEFAULT_STOP_TIMEOUT

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name: the node's name is required (--node, NODE_NAME or KUBERAVEN_NODE_NAME)")
