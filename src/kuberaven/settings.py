"""Configuration (entry point of every flow): flags, KUBERAVEN_* environment, a config file, defaults.

Precedence: command-line flag, then environment (``KUBERAVEN_DB`` …), then
the YAML config file (``--config``), then the defaults.

Settings are nested groups, one per component (``settings.clusters``,
``settings.inventory``, ``settings.provisioning`` …), and each group IS that
component's own options dataclass: its defaults and checks are written once,
there, and the daemon hands the group to the component as it is. Outside,
every setting has one flat name, the same as flag, ``KUBERAVEN_<NAME>``
variable and config-file key: the group's prefix plus the option's field
name (``network_`` + ``pod_cidr``). A name more than one group declares
(``concurrency``) sets each of them. Layering: components define their
options and know nothing of this module; this module composes them.

Values are converted to the declared types by setting_values.py (plain
dataclasses, no pydantic: the daemon's start-up and idle memory); a
bad value is named by its setting and where it was given.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Gt

from .events.options import RelayOptions
from .inventory.component import InventoryOptions
from .kube.reflector import NOT_READY_AFTER
from .model.database import default_url
from .network.backend import NetworkOptions
from .network.backends import BackendOptions
from .node_settings import NODE
from .provisioning.loop import SyncOptions
from .runtime.clusters import ClusterOptions
from .runtime.history import HistoryOptions
from .runtime.supervisor import SupervisorOptions
from .setting_schema import DEFAULT_LOG_FORMAT, ConfigError, LogFormat, Route, Schema
from .setting_schema import group as _group
from .setting_schema import unknown_variable as _unknown_under
from .watch.engine import EngineOptions

ENV_PREFIX = "KUBERAVEN_"


@dataclasses.dataclass
class Settings:
    kubeconfig: str | None = None
    context: str | None = None
    # None given: the per-user database (model.database.default_url), the same wherever the command runs.
    db: str = dataclasses.field(default_factory=default_url)
    # The HTTP server: probes, metrics, REST API and UI. Off loopback it needs a token.
    listen: str = "127.0.0.1:8080"
    token: str | None = None
    token_file: str | None = None
    # Without a token the API answers only requests whose Host is a loopback name or one of these
    # (comma-separated in the environment): a web page cannot reach it through DNS rebinding.
    allowed_hosts: list[str] = dataclasses.field(default_factory=list)
    log_format: LogFormat = DEFAULT_LOG_FORMAT
    # Seconds between progress lines while the initial lists run (large clusters).
    progress_interval: Annotated[float, Gt(0)] = 5.0
    # Seconds `run` retries the default cluster's API server at start before it exits 1 naming it.
    reach_timeout: Annotated[float, Gt(0)] = 15.0
    # Seconds a watch may go without an open stream (reconnecting, relisting) before /readyz says not
    # ready: every reflector of the daemon's informers reads it (kube/reflector.py's not_ready_after).
    watch_not_ready_after: Annotated[float, Gt(0)] = NOT_READY_AFTER
    # Seconds between two points of the Health tab's plots (web/metric_history.py keeps 360: an hour at 10 s).
    metrics_sample_every: Annotated[float, Gt(0)] = 10.0
    # Which components run: provisioning (apply managed rows) and the network translation (network/).
    sync: bool = True
    network: bool = True
    # Plugins (model policies, models) are the kuberaven.plugins entry points plus the
    # modules named in KUBERAVEN_PLUGINS (comma-separated), read by plugins.py.
    # Watchers of any resource, by module:attribute import path (comma-separated in the environment).
    watchers: list[str] = dataclasses.field(default_factory=list)

    # The components' options. Replicas share the clusters by Leases (runtime/clusters.py).
    clusters: ClusterOptions = dataclasses.field(
        default_factory=ClusterOptions, metadata=_group(internal=("identity",))
    )
    # A crashed component restarts after a backoff (runtime/supervisor.py); too many crashes end the daemon.
    supervisor: SupervisorOptions = dataclasses.field(
        default_factory=SupervisorOptions, metadata=_group("supervisor_", internal=("stop_timeout",))
    )
    # The watch engine of the registered watchers; its concurrency is every queue's.
    watching: EngineOptions = dataclasses.field(
        default_factory=EngineOptions,
        metadata=_group(internal=("retry_initial", "retry_max", "position_interval", "reflector")),
    )
    inventory: InventoryOptions = dataclasses.field(
        default_factory=InventoryOptions,
        metadata=_group(internal=("max_queued", "retry_initial", "retry_max", "reflector")),
    )
    provisioning: SyncOptions = dataclasses.field(
        default_factory=SyncOptions, metadata=_group(internal=("notify_fallback", "backoff_initial", "backoff_max"))
    )
    events: RelayOptions = dataclasses.field(
        default_factory=RelayOptions, metadata=_group(internal=("batch", "max_in_flight", "idle_poll"))
    )
    # The model's history (versions kept by database triggers) and its pruning.
    history: HistoryOptions = dataclasses.field(
        default_factory=HistoryOptions, metadata=_group("history_", internal=("prune_batch",))
    )
    translation: NetworkOptions = dataclasses.field(default_factory=NetworkOptions, metadata=_group("network_"))
    backend: BackendOptions = dataclasses.field(default_factory=BackendOptions, metadata=_group("network_"))


SCHEMA = Schema(Settings, ENV_PREFIX)
__all__ = [
    "SCHEMA",
    "ConfigError",
    "Route",
    "Settings",
    "load_settings",
    "setting_names",
    "unknown_variable",
    "variable",
]


def setting_names() -> frozenset[str]:
    """Every setting's one name: the flag (with dashes), ``KUBERAVEN_<NAME>`` and the config-file key."""
    return SCHEMA.names()


def variable(name: str) -> str:
    """The environment variable of a setting."""
    return SCHEMA.variable(name)


# KUBERAVEN_* variables that are not settings, read elsewhere: plugins.py, testing/ (the Kubernetes
# build cache, PostgreSQL's binaries), the Makefile's Debian set-up, the CNI plugin, the UI test.
NOT_SETTINGS = frozenset(
    {
        "KUBERAVEN_PLUGINS",
        "KUBERAVEN_K8S_CACHE",
        "KUBERAVEN_PG_BIN",
        "KUBERAVEN_NEED_SOURCE",
        "KUBERAVEN_CNI_RUN",
        "KUBERAVEN_TEST_ARTIFACTS",
        "KUBERAVEN_VM_ACCEL",  # testing/vm.py: tcg or kvm for the testenv's VM nodes
    }
)


def unknown_variable(environ: Mapping[str, str], settings: Sequence[str]) -> str | None:
    """A line naming the first KUBERAVEN_* variable that is neither a setting (the daemon's or the node
    agent's: one environment may hold both) nor in NOT_SETTINGS (and the closest known name), or None."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in settings} | NOT_SETTINGS | NODE.variables()
    return _unknown_under(environ, ENV_PREFIX, known)


def load_settings(config: Path | None = None, **flags: Any) -> Settings:
    """Settings from flags (not None), the environment, then ``config`` (YAML mapping), then defaults."""
    unknown = unknown_variable(os.environ, sorted(setting_names()))
    if unknown is not None:
        raise ConfigError(unknown)
    settings: Settings = SCHEMA.load(config, flags)
    return settings
