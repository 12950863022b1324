"""Settings: every name docs/configuration.md documents reaches the component option it names, as a flag, a
KUBERAVEN_* variable and a config-file key, through ``kuberaven run`` itself (the daemon replaced by a recorder);
tests/integration/test_settings_arrive.py follows each from there into the component that acts on it."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kuberaven import cli, daemon
from kuberaven.events.cloudevents import ContentMode, EventFormat
from kuberaven.events.schema import EventKey
from kuberaven.settings import SCHEMA, ConfigError, Settings, load_settings, setting_names, variable
from tests.unit.test_layers import MODULES, imports

DOCS = Path(__file__).parents[2] / "docs" / "configuration.md"
ENV_ONLY = "KUBERAVEN_PLUGINS"  # read by plugins.py (the model commands too), not a setting of `run`

# name: (the value as written, what the component's option then holds, where the component reads it)
Case = tuple[str, Any, Callable[[Settings], Any]]
CASES: dict[str, Case] = {
    "kubeconfig": ("/etc/k/config", "/etc/k/config", lambda s: s.kubeconfig),
    "context": ("other", "other", lambda s: s.context),
    "db": ("sqlite:///other.db", "sqlite:///other.db", lambda s: s.db),
    "kafka": ("broker.internal:9092", "broker.internal:9092", lambda s: s.events.kafka),
    "topic": ("pods", "pods", lambda s: s.events.topic),
    "kafka_partitions": ("5", 5, lambda s: s.events.kafka_partitions),
    "kafka_replication_factor": ("2", 2, lambda s: s.events.kafka_replication_factor),
    "event_key": ("name", EventKey.NAME, lambda s: s.events.event_key),
    "event_format": ("cloudevents", EventFormat.CLOUDEVENTS, lambda s: s.events.event_format),
    "event_cloudevents_mode": ("structured", ContentMode.STRUCTURED, lambda s: s.events.event_cloudevents_mode),
    "kafka_unreachable_after": ("7.5", 7.5, lambda s: s.events.kafka_unreachable_after),
    "outbox_retention": ("3600", 3600.0, lambda s: s.events.outbox_retention),
    "history_enabled": ("false", False, lambda s: s.history.enabled),
    "history_retention": ("86400", 86400.0, lambda s: s.history.retention),
    "history_prune_interval": ("30", 30.0, lambda s: s.history.prune_interval),
    "listen": ("127.0.0.1:9999", "127.0.0.1:9999", lambda s: s.listen),
    "token_file": ("{tmp}/token", "{tmp}/token", lambda s: s.token_file),
    "token": ("s3cret", "s3cret", lambda s: s.token),
    "allowed_hosts": ("a.example, b.example", ["a.example", "b.example"], lambda s: s.allowed_hosts),
    "log_format": ("json", "json", lambda s: s.log_format),
    "metrics_sample_every": ("5", 5.0, lambda s: s.metrics_sample_every),
    "progress_interval": ("2.5", 2.5, lambda s: s.progress_interval),
    "watch_not_ready_after": ("4.5", 4.5, lambda s: s.watch_not_ready_after),
    "reach_timeout": ("40", 40.0, lambda s: s.reach_timeout),
    "leader_elect": ("true", True, lambda s: s.clusters.leader_elect),
    "lease_namespace": ("kr", "kr", lambda s: s.clusters.lease_namespace),
    "lease_name": ("kr-x", "kr-x", lambda s: s.clusters.lease_name),
    "lease_duration": ("30", 30.0, lambda s: s.clusters.lease_duration),
    "renew_deadline": ("12", 12.0, lambda s: s.clusters.renew_deadline),
    "retry_period": ("1", 1.0, lambda s: s.clusters.retry_period),
    "cluster_poll": ("0.5", 0.5, lambda s: s.clusters.cluster_poll),
    # One setting for every queue: the watch engine's and provisioning's.
    "concurrency": ("3", (3, 3), lambda s: (s.watching.concurrency, s.provisioning.concurrency)),
    "shutdown_timeout": ("4", 4.0, lambda s: s.watching.shutdown_timeout),
    "supervisor_backoff_initial": ("0.2", 0.2, lambda s: s.supervisor.backoff_initial),
    "supervisor_backoff_max": ("9", 9.0, lambda s: s.supervisor.backoff_max),
    "supervisor_healthy_after": ("30", 30.0, lambda s: s.supervisor.healthy_after),
    "supervisor_max_crashes": ("3", 3, lambda s: s.supervisor.max_crashes),
    "supervisor_crash_window": ("100", 100.0, lambda s: s.supervisor.crash_window),
    "batch_size": ("50", 50, lambda s: s.inventory.batch_size),
    "batch_window": ("0.1", 0.1, lambda s: s.inventory.batch_window),
    "inventory_secrets": ("false", False, lambda s: s.inventory.inventory_secrets),
    "sync": ("false", False, lambda s: s.sync),
    "sync_poll": ("0.2", 0.2, lambda s: s.provisioning.sync_poll),
    "resync_period": ("60", 60.0, lambda s: s.provisioning.resync_period),
    "watchers": ("a.b:C", ["a.b:C"], lambda s: s.watchers),
    "network": ("false", False, lambda s: s.network),
    "network_backend": ("openstack", "openstack", lambda s: s.backend.backend),
    "network_cloud": ("mycloud", "mycloud", lambda s: s.backend.cloud),
    "network_openstack_project": ("shop", "shop", lambda s: s.backend.openstack_project),
    "network_lb_provider": ("ovn", "ovn", lambda s: s.backend.lb_provider),
    "network_ovn_nb_connection": ("tcp:192.0.2.7:6641", "tcp:192.0.2.7:6641", lambda s: s.backend.ovn_nb_connection),
    "network_subnet_mode": ("namespace", "namespace", lambda s: s.translation.subnet_mode),
    "network_pod_cidr": ("10.200.0.0/16", "10.200.0.0/16", lambda s: s.translation.pod_cidr),
    "network_namespace_pool": ("10.96.0.0/12", "10.96.0.0/12", lambda s: s.translation.namespace_pool),
    "network_namespace_prefix": ("26", 26, lambda s: s.translation.namespace_prefix),
    "network_service_cidr": ("10.1.0.0/24", "10.1.0.0/24", lambda s: s.translation.service_cidr),
    "network_external_cidr": ("172.30.0.0/24", "172.30.0.0/24", lambda s: s.translation.external_cidr),
    "network_external_network": ("public", "public", lambda s: s.translation.external_network),
    "network_include_system_namespaces": ("true", True, lambda s: s.translation.include_system_namespaces),
    "network_cni": ("kuberaven", "kuberaven", lambda s: s.translation.cni),
    "network_policies": ("false", False, lambda s: s.translation.policies),
    "network_load_balancer_class": (
        "kuberaven.io/openstack",
        "kuberaven.io/openstack",
        lambda s: s.translation.load_balancer_class,
    ),
    "network_service_proxy_name": ("other-proxy", "other-proxy", lambda s: s.translation.service_proxy_name),
    "network_pool_min": ("2", 2, lambda s: s.translation.pool_min),
    "network_pool_max": ("90", 90, lambda s: s.translation.pool_max),
    "network_pool_batch": ("25", 25, lambda s: s.translation.pool_batch),
    "network_pool_idle": ("30", 30.0, lambda s: s.translation.pool_idle),
    "network_pool_prewarm_limit": ("450", 450, lambda s: s.translation.pool_prewarm_limit),
}


def documented() -> dict[str, str | None]:
    """Every setting in the tables of docs/configuration.md: name -> its flag as written there (None: none)."""
    found: dict[str, str | None] = {}
    header: list[str] = []
    for line in DOCS.read_text().splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not header:
            header = [cell.split(" ")[0] for cell in cells]
            continue
        if set("".join(cells)) <= set("-"):
            continue
        row = dict(zip(header, cells, strict=False))
        flag = re.findall(r"`(-[^`]+)`", row.get("flag", ""))
        for name in re.findall(r"`([a-z_]+)`", row["setting"].split("(env")[0]):
            found[name] = flag[0] if flag else None
    return found


def test_the_docs_name_every_setting_and_nothing_else() -> None:
    names = documented()
    assert len(names) > 40, "the tables were read"
    assert set(names) == setting_names() == set(CASES)
    assert ENV_ONLY in DOCS.read_text()


@pytest.fixture
def run_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Settings]:
    """``kuberaven run`` with these arguments and environment; the Settings it would hand the daemon."""
    for key in [k for k in os.environ if k.upper().startswith("KUBERAVEN_")]:
        monkeypatch.delenv(key)
    (tmp_path / "token").write_text("from-file\n")
    seen: list[Settings] = []

    async def recorded(settings: Settings) -> int:
        seen.append(settings)
        return 0

    monkeypatch.setattr(daemon, "run_daemon", recorded)
    monkeypatch.setattr(cli, "_cluster_configured", lambda _settings: True)  # no local control plane
    monkeypatch.setattr(cli, "_check_watchers", lambda _settings: None)  # no import of the sample watcher
    monkeypatch.setattr(cli, "_configure_logging", lambda *_: None)  # pytest's logging stays as it is

    def run(*args: str, env: dict[str, str] | None = None) -> Settings:
        result = CliRunner().invoke(cli.app, ["run", *args], env=env)
        assert result.exit_code == 0, result.output
        return seen.pop()

    return run


def _sample(name: str, tmp_path: Path) -> tuple[str, Any, Callable[[Settings], Any]]:
    raw, expected, where = CASES[name]
    if isinstance(expected, str):
        expected = expected.format(tmp=tmp_path)
    return raw.format(tmp=tmp_path), expected, where


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_documented_variable_reaches_its_option(
    name: str, run_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    raw, expected, where = _sample(name, tmp_path)
    default = where(run_settings())
    assert default != expected, "the sample differs from the default, or the test could not fail"
    assert where(run_settings(env={variable(name): raw})) == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_documented_file_key_reaches_its_option(
    name: str, run_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    raw, expected, where = _sample(name, tmp_path)
    config = tmp_path / "kuberaven.yaml"
    config.write_text(f"{name}: {raw}\n")
    assert where(run_settings("--config", str(config))) == expected


@pytest.mark.parametrize("name", sorted(n for n, flag in documented().items() if flag))
def test_a_documented_flag_reaches_its_option(name: str, run_settings: Callable[..., Settings], tmp_path: Path) -> None:
    raw, expected, where = _sample(name, tmp_path)
    flag = documented()[name]
    assert flag is not None
    on, _, off = flag.partition("/")
    args = ([on] if expected else [off]) if isinstance(expected, bool) else [flag, raw]
    assert where(run_settings(*args)) == expected


def test_a_flag_outranks_the_environment_which_outranks_the_file(
    run_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    config = tmp_path / "kuberaven.yaml"
    config.write_text("topic: from-file\nlease_name: from-file\nkafka_partitions: 7\n")
    env = {"KUBERAVEN_TOPIC": "from-env", "KUBERAVEN_LEASE_NAME": "from-env"}
    settings = run_settings("--config", str(config), "--topic", "from-flag", env=env)
    assert (settings.events.topic, settings.clusters.lease_name) == ("from-flag", "from-env")
    assert settings.events.kafka_partitions == 7


def test_a_bad_value_is_named_by_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERAVEN_SUPERVISOR_MAX_CRASHES", "0")
    with pytest.raises(ConfigError, match="supervisor_max_crashes: Input should be greater than or equal to 1"):
        load_settings()
    monkeypatch.delenv("KUBERAVEN_SUPERVISOR_MAX_CRASHES")
    once = r"^invalid configuration: concurrency: Input should be a valid integer[^;]*$"
    with pytest.raises(ConfigError, match=once):
        load_settings(concurrency="many")  # two groups read it: named once
    with pytest.raises(ConfigError, match="lease timing needs retry_period < renew_deadline < lease_duration"):
        load_settings(renew_deadline=20)  # the rule of ClusterOptions' LeaseTimings, checked where they live
    with pytest.raises(ConfigError, match="network_cni: Input should be 'kuberaven' or 'other'"):
        load_settings(network_cni="calico")
    for bad, says in (("0", "greater than 0"), ("soon", "a valid number")):
        monkeypatch.setenv("KUBERAVEN_WATCH_NOT_READY_AFTER", bad)
        with pytest.raises(ConfigError, match=f"watch_not_ready_after: Input should be {says}.*WATCH_NOT_READY_AFTER"):
            load_settings()


def test_an_unknown_file_key_is_refused_and_group_names_are_not_keys(tmp_path: Path) -> None:
    for key in ("colour", "clusters", "identity", "stop_timeout"):
        config = tmp_path / "k.yaml"
        config.write_text(f"{key}: 1\n")
        with pytest.raises(ConfigError, match=f"unknown setting '{key}'"):
            load_settings(config)


def test_a_name_two_groups_read_has_one_default() -> None:
    defaults = Settings()
    for name, places in SCHEMA.routes.items():
        values = {
            repr(getattr(getattr(defaults, group), field) if group else getattr(defaults, field))
            for group, field in places
        }
        assert len(values) == 1, f"{name} has defaults {values}"


def test_the_defaults_are_the_components_own() -> None:
    """Settings() adds nothing of its own to a group: each is its component's options as the component makes them."""
    defaults = Settings()
    assert len(SCHEMA.group_types) > 5, "the groups were found"
    for name, options in SCHEMA.group_types.items():
        own = options()
        assert dataclasses.replace(getattr(defaults, name), **_unstable(own)) == own, name


def _unstable(options: Any) -> dict[str, Any]:
    return {"identity": options.identity} if hasattr(options, "identity") else {}  # host-pid: the same process


def test_only_the_entry_points_read_the_settings() -> None:
    """Components define their options; settings.py composes them: nothing under it imports settings."""
    readers = {m for m in MODULES for target, _ in imports(m, False) if target == "kuberaven.settings"}
    assert readers <= {"kuberaven.cli", "kuberaven.daemon", "kuberaven.model_cli"}, readers
