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
import difflib
import functools
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from annotated_types import Gt

from .events.options import RelayOptions
from .inventory.component import InventoryOptions
from .kube.reflector import NOT_READY_AFTER
from .model.database import default_url
from .network.backend import NetworkOptions
from .network.backends import BackendOptions
from .provisioning.loop import SyncOptions
from .runtime.clusters import ClusterOptions
from .runtime.history import HistoryOptions
from .runtime.supervisor import SupervisorOptions
from .setting_values import Invalid, coerce
from .watch.engine import EngineOptions

ENV_PREFIX = "KUBERAVEN_"
GROUP = "kuberaven.settings.group"  # the field metadata key of a component's options


@dataclasses.dataclass(frozen=True)
class Group:
    """Marks a Settings field as a component's options: each field of them is the setting ``prefix + name``.

    ``internal``: fields that stay the component's own tuning (tests and benchmarks set them), not settings.
    """

    prefix: str = ""
    internal: tuple[str, ...] = ()


def _group(prefix: str = "", internal: tuple[str, ...] = ()) -> dict[str, Group]:
    """The metadata of a Settings field that holds a component's options."""
    return {GROUP: Group(prefix, internal)}


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
    log_format: Literal["text", "json"] = "text"
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


# A setting's places: (group, field) for each group that declares it; group None: a field of Settings itself.
Route = tuple[str | None, str]


@functools.cache
def group_types() -> dict[str, type[Any]]:
    """Each Settings field that is a component's options: its name and the options' dataclass."""
    hints = typing.get_type_hints(Settings)
    return {f.name: hints[f.name] for f in dataclasses.fields(Settings) if GROUP in f.metadata}


@functools.cache
def _routes() -> dict[str, tuple[Route, ...]]:
    routes: dict[str, list[Route]] = {}
    for field in dataclasses.fields(Settings):
        group: Group | None = field.metadata.get(GROUP)
        if group is None:
            routes.setdefault(field.name, []).append((None, field.name))
            continue
        for option in dataclasses.fields(group_types()[field.name]):
            if option.name not in group.internal:
                routes.setdefault(group.prefix + option.name, []).append((field.name, option.name))
    return {name: tuple(places) for name, places in routes.items()}


@functools.cache
def _field_types(group: str | None) -> dict[str, Any]:
    """The declared types of Settings' own fields (group None) or of one group's options."""
    return typing.get_type_hints(Settings if group is None else group_types()[group], include_extras=True)


def setting_names() -> frozenset[str]:
    """Every setting's one name: the flag (with dashes), ``KUBERAVEN_<NAME>`` and the config-file key."""
    return frozenset(_routes())


def _environment() -> dict[str, str]:
    """``KUBERAVEN_<NAME>`` for every setting name (case-insensitive)."""
    environ = {key.upper(): value for key, value in os.environ.items()}
    return {name: environ[variable(name)] for name in _routes() if variable(name) in environ}


def variable(name: str) -> str:
    """The environment variable of a setting."""
    return f"{ENV_PREFIX}{name}".upper()


class ConfigError(Exception):
    """The configuration is unusable; the message names the file, key or value."""


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
    """A line naming the first KUBERAVEN_* variable that is neither a setting nor in NOT_SETTINGS (and the
    closest known name), or None: a misspelt setting would otherwise be ignored without a word."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in settings} | NOT_SETTINGS
    for variable in sorted(environ):
        if variable.upper().startswith(ENV_PREFIX) and variable.upper() not in known:
            close = difflib.get_close_matches(variable.upper(), sorted(known), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "see docs/configuration.md"
            return f"unknown environment variable {variable}; {hint}"
    return None


def load_settings(config: Path | None = None, **flags: Any) -> Settings:
    """Settings from flags (not None), the environment, then ``config`` (YAML mapping), then defaults."""
    unknown = unknown_variable(os.environ, sorted(setting_names()))
    if unknown is not None:
        raise ConfigError(unknown)
    # name: (value, where it was given); a later layer outranks an earlier one.
    given: dict[str, tuple[Any, str]] = {}
    if config:
        given.update({name: (value, f"config file {config}") for name, value in _read_config(config).items()})
    given.update({name: (value, variable(name)) for name, value in _environment().items()})
    for name, value in flags.items():
        if name not in _routes():
            raise ConfigError(f"unknown setting {name!r} (see docs/configuration.md)")
        if value is not None:
            given[name] = (value, f"--{name.replace('_', '-')}")
    return _settings(given)


def _settings(given: Mapping[str, tuple[Any, str]]) -> Settings:
    """Each given value converted into every place that reads it, the groups made: every problem named once."""
    values: dict[str | None, dict[str, Any]] = {}
    problems: list[str] = []
    failed: set[str | None] = set()
    for name, places in _routes().items():  # in the declared order: the problems too
        if name not in given:
            continue
        raw, source = given[name]
        for group, field in places:
            try:
                values.setdefault(group, {})[field] = coerce(raw, _field_types(group)[field])
            except Invalid as error:
                failed.add(group)
                text = f"{name}: {error} (from {source})"
                if text not in problems:
                    problems.append(text)
    groups: dict[str, Any] = {}
    for group, options in group_types().items():
        if group in failed:
            continue
        try:
            groups[group] = options(**values.get(group, {}))
        except ValueError as error:  # the group's own check (__post_init__), across its fields: its words alone
            problems.append(str(error))
    if problems:
        raise ConfigError(f"invalid configuration: {'; '.join(problems)}")
    return Settings(**values.get(None, {}), **groups)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ConfigError(f"config file {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path}: invalid YAML: {error}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: must be a mapping of setting: value")
    unknown = sorted(set(loaded) - setting_names())
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting {unknown[0]!r} (see docs/configuration.md)")
    return loaded
