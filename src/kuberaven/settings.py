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
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from annotated_types import Gt
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .events.options import RelayOptions
from .inventory.component import InventoryOptions
from .model.database import default_url
from .network.backend import NetworkOptions
from .network.backends import BackendOptions
from .provisioning.loop import SyncOptions
from .runtime.clusters import ClusterOptions
from .runtime.history import HistoryOptions
from .runtime.supervisor import SupervisorOptions
from .watch.engine import EngineOptions

ENV_PREFIX = "KUBERAVEN_"


@dataclasses.dataclass(frozen=True)
class Group:
    """Marks a Settings field as a component's options: each field of them is the setting ``prefix + name``.

    ``internal``: fields that stay the component's own tuning (tests and benchmarks set them), not settings.
    """

    prefix: str = ""
    internal: tuple[str, ...] = ()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    kubeconfig: str | None = None
    context: str | None = None
    # None given: the per-user database (model.database.default_url), the same wherever the command runs.
    db: str = Field(default_factory=default_url)
    # The HTTP server: probes, metrics, REST API and UI. Off loopback it needs a token.
    listen: str = "127.0.0.1:8080"
    token: str | None = None
    token_file: str | None = None
    # Without a token the API answers only requests whose Host is a loopback name or one of these
    # (comma-separated in the environment): a web page cannot reach it through DNS rebinding.
    allowed_hosts: list[str] = Field(default_factory=list)
    log_format: Literal["text", "json"] = "text"
    # Seconds between progress lines while the initial lists run (large clusters).
    progress_interval: Annotated[float, Gt(0)] = 5.0
    # Which components run: provisioning (apply managed rows) and the network translation (network/).
    sync: bool = True
    network: bool = True
    # Plugins (model policies, models) are the kuberaven.plugins entry points plus the
    # modules named in KUBERAVEN_PLUGINS (comma-separated), read by plugins.py.
    # Watchers of any resource, by module:attribute import path (comma-separated in the environment).
    watchers: list[str] = Field(default_factory=list)

    # The components' options. Replicas share the clusters by Leases (runtime/clusters.py).
    clusters: Annotated[ClusterOptions, Group(internal=("identity",))] = Field(default_factory=ClusterOptions)
    # A crashed component restarts after a backoff (runtime/supervisor.py); too many crashes end the daemon.
    supervisor: Annotated[SupervisorOptions, Group("supervisor_", internal=("stop_timeout",))] = Field(
        default_factory=SupervisorOptions
    )
    # The watch engine of the registered watchers; its concurrency is every queue's.
    watching: Annotated[
        EngineOptions, Group(internal=("retry_initial", "retry_max", "position_interval", "reflector"))
    ] = Field(default_factory=EngineOptions)
    inventory: Annotated[
        InventoryOptions, Group(internal=("max_queued", "retry_initial", "retry_max", "reflector"))
    ] = Field(default_factory=InventoryOptions)
    provisioning: Annotated[SyncOptions, Group(internal=("notify_fallback", "backoff_initial", "backoff_max"))] = Field(
        default_factory=SyncOptions
    )
    events: Annotated[RelayOptions, Group(internal=("batch", "max_in_flight", "idle_poll"))] = Field(
        default_factory=RelayOptions
    )
    # The model's history (versions kept by database triggers) and its pruning.
    history: Annotated[HistoryOptions, Group("history_", internal=("prune_batch",))] = Field(
        default_factory=HistoryOptions
    )
    translation: Annotated[NetworkOptions, Group("network_")] = Field(default_factory=NetworkOptions)
    backend: Annotated[BackendOptions, Group("network_")] = Field(default_factory=BackendOptions)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _FlatEnvironment(settings_cls)

    @field_validator("watchers", "allowed_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return [item.strip() for item in value.split(",") if item.strip()] if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        """Flat setting names (flags, environment, file) into their groups; anything else is left to pydantic."""
        if not isinstance(data, dict):
            return data
        routes = _routes()
        nested = {key: value for key, value in data.items() if key not in routes}  # groups given whole, unknowns
        for key, value in data.items():
            for group, field in routes.get(key, ()):
                if group is None:
                    nested[field] = value
                else:
                    nested[group] = {**_as_mapping(nested.get(group)), field: value}
        return nested


# A setting's places: (group, field) for each group that declares it; group None: a field of Settings itself.
Route = tuple[str | None, str]


def _group_of(info: FieldInfo) -> Group | None:
    return next((m for m in info.metadata if isinstance(m, Group)), None)


@functools.cache
def _routes() -> dict[str, tuple[Route, ...]]:
    routes: dict[str, list[Route]] = {}
    for name, info in Settings.model_fields.items():
        group = _group_of(info)
        if group is None:
            routes.setdefault(name, []).append((None, name))
            continue
        assert dataclasses.is_dataclass(info.annotation), name
        for option in dataclasses.fields(info.annotation):
            if option.name not in group.internal:
                routes.setdefault(group.prefix + option.name, []).append((name, option.name))
    return {name: tuple(places) for name, places in routes.items()}


def setting_names() -> frozenset[str]:
    """Every setting's one name: the flag (with dashes), ``KUBERAVEN_<NAME>`` and the config-file key."""
    return frozenset(_routes())


def _as_mapping(value: Any) -> dict[str, Any]:
    """A group given whole (a dataclass or a mapping) as a mapping that flat names may add to."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return dict(value) if isinstance(value, dict) else {}


class _FlatEnvironment(PydanticBaseSettingsSource):
    """``KUBERAVEN_<NAME>`` for every setting name (case-insensitive); Settings nests them into their groups."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the flat names itself

    def __call__(self) -> dict[str, Any]:
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
    from_file = _read_config(config) if config else {}
    # The environment outranks the file: drop the file's keys that the environment sets.
    layered = {k: v for k, v in from_file.items() if variable(k) not in {e.upper() for e in os.environ}}
    layered.update({k: v for k, v in flags.items() if v is not None})
    try:
        return Settings(**layered)
    except ValidationError as error:
        raise ConfigError(f"invalid configuration: {describe(error)}") from None


def describe(error: ValidationError) -> str:
    """Each problem once, by the setting's flat name (a group's own check by its message alone)."""
    flat = {place: name for name, places in _routes().items() for place in places}
    problems: list[str] = []
    for problem in error.errors():
        loc = tuple(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if len(loc) >= 2 and (loc[0], loc[1]) in flat:
            text = f"{flat[loc[0], loc[1]]}: {message}"
        elif len(loc) == 1 and loc[0] in _routes():
            text = f"{loc[0]}: {message}"
        else:
            text = f"{'.'.join(loc)}: {message}" if loc and loc[0] not in Settings.model_fields else message
        if text not in problems:
            problems.append(text)
    return "; ".join(problems)


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
