"""Every setting of ``kuberaven run`` arrives at the object that acts on it, as the daemon builds its components.

tests/unit/test_settings.py proves that a flag, a variable and a file key each set the option they name in
Settings; this proves the daemon hands that option on. daemon.run_daemon runs for real against the local
control plane and a fresh SQLite database up to the point where its components would start: the supervisor
it made is taken there, and the default cluster's components are built by the cluster manager's own factory.
Each setting is then read from the component that uses it (the translation's engine, the inventory, the relay
…), with every sample set at once so that no value can be a default that happens to match.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kuberaven import daemon
from kuberaven.events.component import RelayComponent
from kuberaven.inventory.component import Inventory
from kuberaven.kube.reflector import WatchEvent
from kuberaven.model.bootstrap import DEFAULT_CLUSTER
from kuberaven.network.translator import NetworkTranslator
from kuberaven.provisioning.loop import SyncLoop
from kuberaven.runtime.clusters import ClusterManager
from kuberaven.runtime.history import HistoryKeeper
from kuberaven.runtime.supervisor import Supervisor
from kuberaven.settings import Settings, load_settings, setting_names
from kuberaven.testing.env import TestEnv
from kuberaven.watch.engine import Engine
from kuberaven.watch.informers import InformerFactory
from kuberaven.watch.watcher import Watcher, WatchTarget
from kuberaven.web.server import WebServer
from tests.unit.test_settings import CASES

T = TypeVar("T")


async def _ignore(_event: WatchEvent) -> None:
    return None


WATCHER = Watcher(WatchTarget("v1", "ConfigMap"), _ignore, name="settings-sample")
WATCHER_PATH = f"{__name__}:WATCHER"


@dataclass
class Built:
    """What run_daemon made: its supervisor's components and the default cluster's set."""

    supervisor: Supervisor
    progress_interval: float
    cluster: list[Any]

    def top(self, kind: type[T]) -> T:
        return _one(_components(self.supervisor), kind)

    def of(self, kind: type[T]) -> T:
        return _one(self.cluster, kind)

    @property
    def translator(self) -> NetworkTranslator:
        return self.of(NetworkTranslator)

    @property
    def watchers(self) -> Engine:
        return self.of(Engine)


def _components(supervisor: Supervisor) -> list[Any]:
    return [child.component for child in supervisor._children]


def _one(components: Any, kind: type[T]) -> T:
    found = [c for c in components if isinstance(c, kind)]
    assert len(found) == 1, (kind, components)
    return found[0]


# name: (the sample as written, where the built daemon holds it, what it then is)
ARRIVES: dict[str, tuple[str, Callable[[Built], Any], Any]] = {
    "db": ("sqlite:///{tmp}/sample.db", lambda b: str(b.top(HistoryKeeper).database.url), "sqlite:///{tmp}/sample.db"),
    "listen": ("127.0.0.1:9999", lambda b: (b.top(WebServer).host, b.top(WebServer).port), ("127.0.0.1", 9999)),
    "progress_interval": ("2.5", lambda b: b.progress_interval, 2.5),
    "watch_not_ready_after": ("4.5", lambda b: b.of(InformerFactory).options.not_ready_after, 4.5),
    "watchers": (WATCHER_PATH, lambda b: WATCHER in [w for f in b.watchers.informers for w in f.watchers], True),
    "concurrency": (
        "3",
        lambda b: (
            b.watchers.options.concurrency,
            b.translator.engine.options.concurrency,
            b.translator.runtime.blocking.workers,
            b.of(SyncLoop).options.concurrency,
        ),
        (3, 3, 3, 3),
    ),
    "shutdown_timeout": (
        "4",
        lambda b: (b.watchers.options.shutdown_timeout, b.translator.engine.options.shutdown_timeout),
        (4.0, 4.0),
    ),
    "network_policies": ("false", lambda b: b.translator.policies, None),
}
# Settings read from one component's options object, all of them: (the group, the component's options).
HOLDERS: dict[str, Callable[[Built], Any]] = {
    "events": lambda b: b.top(RelayComponent).relay.options,
    "history": lambda b: b.top(HistoryKeeper).options,
    "supervisor": lambda b: b.supervisor.options,
    "inventory": lambda b: b.of(Inventory).options,
    "provisioning": lambda b: b.of(SyncLoop).options,
    "translation": lambda b: b.translator.options,
}
# What the cluster manager acts on: its supervisors' options and, with leader election, the lease's.
MANAGER = {
    "supervisor_backoff_initial": lambda m: m.supervisor_options.backoff_initial,
    "leader_elect": lambda m: m.election is not None,
    "lease_namespace": lambda m: m.election.lease_namespace,
    "lease_name": lambda m: m.election.lease_name,
    "lease_duration": lambda m: m.election.lease_duration,
    "renew_deadline": lambda m: m.election.renew_deadline,
    "retry_period": lambda m: m.election.retry_period,
    "cluster_poll": lambda m: m.poll,
}
# Not proven here, and why: the test needs them as they are (where the cluster is; components on), or they
# act before any component is built (logging, the API server's first answer) or in the web app made on the
# first request, or they need a real cloud (the openstack backend connects when it is made).
NOT_HERE = {
    "kubeconfig": "the test's own cluster",
    "context": "the test's own cluster",
    "sync": "on: its components are the ones checked",
    "network": "on: its components are the ones checked",
    "log_format": "set by the command before run_daemon",
    "reach_timeout": "a wait before any component",
    "metrics_sample_every": "the Health tab's sampler, a thread beside the supervised components",
    "token": "the web app, made on the first request",
    "token_file": "read by the command into token",
    "allowed_hosts": "the web app, made on the first request",
    "network_backend": "openstack connects to a cloud when made",
    "network_cloud": "openstack connects to a cloud when made",
    "network_openstack_project": "openstack connects to a cloud when made",
    "network_lb_provider": "openstack connects to a cloud when made",
    "network_ovn_nb_connection": "openstack connects to a cloud when made",
}


def _group_of(name: str) -> tuple[str, str] | None:
    from kuberaven.settings import SCHEMA

    places = [place for place in SCHEMA.routes[name] if place[0] in HOLDERS]
    return (places[0][0], places[0][1]) if places else None  # type: ignore[return-value]


def _samples(tmp_path: Path) -> dict[str, Any]:
    raw = {name: CASES[name][0] for name in setting_names() if name not in NOT_HERE}
    raw.update({name: sample for name, (sample, _, _) in ARRIVES.items()})
    return {name: value.format(tmp=tmp_path) for name, value in raw.items()}


async def _build(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Built:
    """run_daemon up to its components' start; the default cluster's set built as the cluster manager builds it."""
    built: list[Built] = []

    async def taken(supervisor: Supervisor, _stopping: asyncio.Event, progress_interval: float) -> int:
        manager = _one(_components(supervisor), ClusterManager)
        row = next(r for r in manager.read_rows() if r.name == DEFAULT_CLUSTER)
        client = manager.connect(row)
        try:
            components = manager.build(row, client)
            assert inspect.isawaitable(components)  # the daemon's factory is cluster_components, a coroutine
            built.append(Built(supervisor, progress_interval, list(await components)))
        finally:
            await client.close()
        return 0

    monkeypatch.setattr(daemon, "_run_components", taken)
    assert await daemon.run_daemon(settings) == 0
    return built[0]


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("KUBERAVEN_")]:
        monkeypatch.delenv(key)


@pytest.mark.usefixtures("clean_environment")
async def test_every_setting_arrives_at_the_component_that_uses_it(
    testenv: TestEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = _samples(tmp_path)
    kubeconfig = str(testenv.control_plane.kubeconfig)
    settings = load_settings(kubeconfig=kubeconfig, **samples)
    defaults = load_settings(kubeconfig=kubeconfig, db=samples["db"])
    built = await _build(settings, monkeypatch)
    manager = built.top(ClusterManager)
    unproven = set(setting_names()) - set(NOT_HERE)
    for name, (_, where, expected) in ARRIVES.items():
        expected = expected.format(tmp=tmp_path) if isinstance(expected, str) else expected
        assert where(built) == expected, name
        unproven.discard(name)
    for name, where in MANAGER.items():
        assert where(manager) == _value(settings, name) != _value(defaults, name), name
        unproven.discard(name)
    assert len(unproven) > 30, "the components' option groups hold the rest"
    for name in sorted(unproven):
        place = _group_of(name)
        assert place is not None, f"{name}: no component checked holds it"
        group, field = place
        held = getattr(HOLDERS[group](built), field)
        assert held == getattr(getattr(settings, group), field) != getattr(getattr(defaults, group), field), name


def _value(settings: Settings, name: str) -> Any:
    from kuberaven.settings import SCHEMA

    group, field = SCHEMA.routes[name][0]
    return getattr(getattr(settings, group), field) if group else getattr(settings, field)
