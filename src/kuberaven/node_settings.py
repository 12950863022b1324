"""`kuberaven node`'s settings (entry point of the node agent): flags, KUBERAVEN_NODE_* variables, a config file.

Read by setting_schema.py, the daemon's own machinery: precedence flag,
then environment, then the YAML file given by ``--config``, then the
defaults, which node/options.py's NodeOptions and NodeSettings below write
once. A setting's flag is ``--<name>``, its config-file key ``<name>`` and
its variable ``KUBERAVEN_NODE_<NAME>`` (``--park-for``, ``park_for``,
``KUBERAVEN_NODE_PARK_FOR``). NODE_NAME, the downward API's, gives
``name`` too (below a flag, above KUBERAVEN_NODE_NAME). This module imports
none of the daemon: the agent on every node stays small.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from .node.options import NodeOptions
from .setting_schema import DEFAULT_LOG_FORMAT, ConfigError, LogFormat, Schema, group, unknown_variable

ENV_PREFIX = "KUBERAVEN_NODE_"


@dataclasses.dataclass(frozen=True)
class NodeSettings:
    agent: NodeOptions = dataclasses.field(metadata=group())
    kubeconfig: str | None = None  # None: KUBECONFIG, ~/.kube/config or in-cluster
    log_format: LogFormat = DEFAULT_LOG_FORMAT


NODE = Schema(NodeSettings, ENV_PREFIX)


def load_node_settings(config: Path | None = None, **flags: Any) -> NodeSettings:
    """The agent's settings from flags (not None), KUBERAVEN_NODE_*, ``config``, then the defaults;
    ConfigError names each bad value's setting and where it was given."""
    unknown = unknown_variable(os.environ, ENV_PREFIX, NODE.variables())
    if unknown is not None:
        raise ConfigError(unknown)
    settings: NodeSettings = NODE.load(config, flags)
    return settings
