"""Loading a plugin reads its MODELS and MIGRATIONS only; POLICIES and WATCHERS when asked (plugins.py)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven import plugins
from kuberaven.plugins import PluginError, load_plugins

PLUGIN = """
READ = []


def __getattr__(name):
    if name not in ("POLICIES", "WATCHERS"):
        raise AttributeError(name)
    READ.append(name)
    return {"POLICIES": ["a policy"], "WATCHERS": "not a watcher"}[name]
"""


@pytest.fixture
def lazy_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A plugin whose POLICIES and WATCHERS note when they are read (its WATCHERS is not a list of watchers)."""
    name = f"lazy_plugin_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    plugins._loaded.pop(name, None)
    sys.modules.pop(name, None)


def test_loading_a_plugin_reads_neither_its_policies_nor_its_watchers(lazy_plugin: str) -> None:
    (plugin,) = [p for p in load_plugins([lazy_plugin]) if p.name == lazy_plugin]
    assert sys.modules[lazy_plugin].READ == []
    assert plugin.policies == ["a policy"]
    assert sys.modules[lazy_plugin].READ == ["POLICIES"]


def test_a_plugins_bad_watchers_are_named_when_the_daemon_asks_for_them(lazy_plugin: str) -> None:
    (plugin,) = [p for p in load_plugins([lazy_plugin]) if p.name == lazy_plugin]
    with pytest.raises(PluginError, match=f"plugin '{lazy_plugin}': WATCHERS: expected a kuberaven.watch.watcher"):
        plugin.watchers  # noqa: B018 (reading it is the test)
