"""Configuration (entry point of every flow): flags, KUBERAVEN_* environment, a config file, defaults.

Precedence: command-line flag, then environment (``KUBERAVEN_DB`` …), then
the YAML config file (``--config``, keys as the field names below), then the
defaults below.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .events.schema import EventKey
from .model.database import default_url
from .network.backend import NetworkOptions

ENV_PREFIX = "KUBERAVEN_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    kubeconfig: str | None = None
    context: str | None = None
    # None given: the per-user database (model.database.default_url), the same wherever the command runs.
    db: str = Field(default_factory=default_url)
    kafka: str | None = None
    topic: str = "xos.kubernetes.pod-details"
    # The HTTP server: probes, metrics, REST API and UI. Off loopback it needs a token.
    listen: str = "127.0.0.1:8080"
    token: str | None = None
    token_file: str | None = None
    # Without a token the API answers only requests whose Host is a loopback name or one of these
    # (comma-separated in the environment): a web page cannot reach it through DNS rebinding.
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    log_format: Literal["text", "json"] = "text"
    # Seconds between progress lines while the initial lists run (large clusters).
    progress_interval: float = Field(5.0, gt=0)
    network_backend: Literal["embedded", "openstack"] = "embedded"
    # Replicas share the clusters (raven/clusters.py): each cluster is owned through the Lease
    # <lease_name>-cluster-<row> in lease_namespace of that cluster; each replica holds
    # <lease_name>-replica-<identity> in the default cluster. Off: this process owns every cluster.
    leader_elect: bool = False
    lease_namespace: str = "default"
    lease_name: str = "kuberaven"
    lease_duration: float = Field(15.0, gt=0)
    renew_deadline: float = Field(10.0, gt=0)
    retry_period: float = Field(2.0, gt=0)
    # Seconds between reads of the KubernetesService rows (clusters added, changed or deleted).
    cluster_poll: float = Field(5.0, gt=0)
    concurrency: int = 16
    shutdown_timeout: float = 10.0
    # Inventory: events per database transaction, and how long a batch waits to fill.
    batch_size: int = 500
    batch_window: float = 0.005
    # Mirror Secrets (keys only). Off: the inventory neither lists nor watches them, and the
    # kuberaven-inventory-secrets ClusterRoleBinding can go (docs/operations.md).
    inventory_secrets: bool = True
    # Events: partitions of a topic kuberaven creates; how long sent events stay in the log.
    kafka_partitions: int = 3
    # Replicas of that topic; none: min(3, brokers in the cluster).
    kafka_replication_factor: int | None = Field(None, ge=1)
    # The Kafka key of a pod event: "namespace/name", or "name" as the original.
    event_key: EventKey = EventKey.NAMESPACED
    outbox_retention: float = 7 * 24 * 3600.0
    # Seconds the Kafka broker may be unreachable before /readyz says not ready (events wait in the outbox).
    kafka_unreachable_after: float = Field(30.0, gt=0)
    # Supervision (raven/supervisor.py): a crashed component restarts after a backoff (initial,
    # doubling to max, reset after healthy_after seconds of running); max_crashes within
    # crash_window seconds end the daemon with exit code 1.
    supervisor_backoff_initial: float = Field(1.0, gt=0)
    supervisor_backoff_max: float = Field(60.0, gt=0)
    supervisor_healthy_after: float = Field(60.0, gt=0)
    supervisor_max_crashes: int = Field(5, ge=1)
    supervisor_crash_window: float = Field(600.0, gt=0)
    # Provisioning: apply managed rows; how often to look for dirty rows (SQLite) and re-apply all.
    sync: bool = True
    sync_poll: float = 0.5
    resync_period: float = 120.0
    # Network translation (network/): on by default, with the embedded backend unless
    # --network-backend openstack (credentials: network_cloud, a clouds.yaml entry, or OS_*).
    network: bool = True
    network_cloud: str | None = None
    # The OpenStack project its resources are made in (a KubernetesService row's openstack_project
    # wins); None: the credentials' own.
    network_openstack_project: str | None = None
    # Defaults are NetworkOptions' own, so that the library and the daemon agree.
    network_subnet_mode: Literal["cluster", "namespace"] = NetworkOptions.subnet_mode
    network_pod_cidr: str = NetworkOptions.pod_cidr
    network_namespace_pool: str = NetworkOptions.namespace_pool
    network_namespace_prefix: int = NetworkOptions.namespace_prefix
    network_service_cidr: str = NetworkOptions.service_cidr
    network_external_cidr: str = NetworkOptions.external_cidr
    network_external_network: str | None = NetworkOptions.external_network
    network_include_system_namespaces: bool = NetworkOptions.include_system_namespaces
    # "kuberaven": kuberaven-cni wires pods (ports before pods, VIF annotation); "other": another CNI.
    network_cni: Literal["kuberaven", "other"] = "other"
    # NetworkPolicies ──► security groups on pods' ports (docs/network.md#networkpolicy).
    network_policies: bool = NetworkOptions.policies
    # Plugins (model policies, models) are the kuberaven.plugins entry points plus the
    # modules named in KUBERAVEN_PLUGINS (comma-separated), read by plugins.py.
    # Watchers of any resource, by module:attribute import path (comma-separated in the environment).
    watchers: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("watchers", "allowed_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return [item.strip() for item in value.split(",") if item.strip()] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _lease_timing(self) -> Settings:
        # client-go's rule: a holder gives up before its Lease expires, and retries within that time.
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("lease timing needs retry_period < renew_deadline < lease_duration")
        return self


class ConfigError(Exception):
    """The configuration is unusable; the message names the file, key or value."""


# KUBERAVEN_* variables that are not settings, read elsewhere: plugins.py, testing/ (the Kubernetes
# build cache, PostgreSQL's binaries), the Makefile's Debian set-up, the CNI plugin, the UI test.
NOT_SETTINGS = frozenset({
    "KUBERAVEN_PLUGINS", "KUBERAVEN_K8S_CACHE", "KUBERAVEN_PG_BIN", "KUBERAVEN_NEED_SOURCE", "KUBERAVEN_CNI_RUN",
    "KUBERAVEN_TEST_ARTIFACTS",
})  # fmt: skip


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
    unknown = unknown_variable(os.environ, list(Settings.model_fields))
    if unknown is not None:
        raise ConfigError(unknown)
    from_file = _read_config(config) if config else {}
    prefix = Settings.model_config.get("env_prefix", "")
    # The environment outranks the file: drop the file's keys that the environment sets.
    layered = {k: v for k, v in from_file.items() if f"{prefix}{k}".upper() not in os.environ}
    layered.update({k: v for k, v in flags.items() if v is not None})
    try:
        return Settings(**layered)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise ConfigError(f"invalid configuration: {problems}") from None


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
    unknown = sorted(set(loaded) - set(Settings.model_fields))
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting {unknown[0]!r} (see docs/configuration.md)")
    return loaded
