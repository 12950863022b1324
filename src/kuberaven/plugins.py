"""Plugins: other services extend kuberaven without forking it (beside model/ and provisioning/).

A plugin is a Python module, found through the entry point group
``kuberaven.plugins`` or named in KUBERAVEN_PLUGINS (comma-separated). It may
define, at module level:

* ``MODELS``: its own model classes (subclasses of ``kuberaven.model.Model``
  with ``Bookkeeping``); they can then be used with ``apply``/``get``/``delete``
  and the Python API like kuberaven's own;
* ``MIGRATIONS``: the directory of its Alembic revisions (a branch of its own
  that ``depends_on`` kuberaven's schema), run by ``kuberaven db upgrade``;
* ``POLICIES``: :class:`kuberaven.provisioning.model_policies.ModelPolicy` instances, called
  after rows of their model are created, updated or deleted;
* ``WATCHERS``: :class:`kuberaven.watch.watcher.Watcher` instances, run by
  ``kuberaven run`` on the default cluster's shared informers (one list+watch
  per resource with the inventory and the network translation).

Watchers can also be named one by one in the ``watchers`` setting
(KUBERAVEN_WATCHERS, comma-separated ``module:attribute`` import paths, each
a Watcher or a list of them), without a plugin module.

Every process loads the same plugins (the daemon, the CLI, ``connect()``), so
every one of them knows the plugin's models. Importing this module (which
``import kuberaven`` does, to set model/'s loader) loads nothing else: the
plugins, their entry points and the watch machinery are imported when first
asked for, so that a command that needs none of them starts quickly.
Loading a plugin reads its ``MODELS`` and ``MIGRATIONS``; its ``POLICIES``
and ``WATCHERS`` are read when the daemon asks for them, so a plugin whose
policies or watchers import much (the provisioning loop, a Kubernetes
client) can give them lazily, by a module ``__getattr__`` (PEP 562), and
`kuberaven get` never imports them (the example plugin does so).
"""

from __future__ import annotations

import functools
import importlib
import os

from .model import registry

# typing is not imported: `import kuberaven` is kuberaven-cni's start, and typing alone costs it ~10 ms.
TYPE_CHECKING = False  # mypy reads the block below as if True

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType
    from typing import Any

    from .watch.watcher import Watcher

# Importing this module is part of every `import kuberaven`, kuberaven-cni's start among them: it imports no
# more than the interpreter's start has (logging, dataclasses and pathlib come with the first plugin).

ENTRY_POINT_GROUP = "kuberaven.plugins"


class PluginError(Exception):
    """A configured plugin could not be loaded."""


class Plugin:
    def __init__(self, name: str, module: ModuleType, models: list[type[Any]], migrations: Path | None) -> None:
        self.name, self.module, self.models, self.migrations = name, module, models, migrations

    def __repr__(self) -> str:
        return f"Plugin({self.name!r})"

    @functools.cached_property
    def policies(self) -> list[Any]:
        return list(getattr(self.module, "POLICIES", []))

    @functools.cached_property
    def watchers(self) -> list[Watcher]:
        return _watchers_in(getattr(self.module, "WATCHERS", []), f"plugin {self.name!r}: WATCHERS")


_loaded: dict[str, Plugin] = {}


def configured_names() -> list[str]:
    names = [*_entry_point_names()]
    names += [n.strip() for n in os.environ.get("KUBERAVEN_PLUGINS", "").split(",") if n.strip()]
    return list(dict.fromkeys(names))


@functools.cache
def _entry_point_names() -> tuple[str, ...]:
    """Read once a process: each read parses every installed package's metadata (10-60 ms), and the daemon's
    start asks for the plugins several times (the registry's models and migrations, policies, watchers)."""
    from importlib.metadata import entry_points  # only when asked

    return tuple(ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP))


def load_plugins(names: list[str] | None = None) -> list[Plugin]:
    """Import every plugin (once per process); the loaded ones, in order."""
    import logging
    from pathlib import Path

    for name in configured_names() if names is None else names:
        if name in _loaded:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise PluginError(f"plugin {name!r} cannot be imported: {error}") from None
        migrations = getattr(module, "MIGRATIONS", None)
        _loaded[name] = Plugin(
            name,
            module,
            models=list(getattr(module, "MODELS", [])),
            migrations=Path(migrations) if migrations else None,
        )
        registry.register(_loaded[name].models, _loaded[name].migrations)
        logging.getLogger(__name__).info("loaded plugin %s", name)
    return list(_loaded.values())


registry.set_loader(load_plugins)  # model/ loads the plugins through this, never by importing us


def plugin_models() -> list[type[Any]]:
    return [model for plugin in load_plugins() for model in plugin.models]


def migration_locations() -> list[Path]:
    return [plugin.migrations for plugin in load_plugins() if plugin.migrations is not None]


def policies() -> list[Any]:
    return [policy for plugin in load_plugins() for policy in plugin.policies]


def plugin_watchers() -> list[Watcher]:
    return [watcher for plugin in load_plugins() for watcher in plugin.watchers]


def import_watchers(paths: list[str]) -> list[Watcher]:
    """The watchers named by ``module:attribute`` import paths (the ``watchers`` setting)."""
    found: list[Watcher] = []
    for path in paths:
        module_name, _, attribute = path.partition(":")
        if not module_name or not attribute:
            raise PluginError(f"watcher {path!r}: not a module:attribute import path")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise PluginError(f"watcher {path!r}: cannot import {module_name}: {error}") from None
        if not hasattr(module, attribute):
            raise PluginError(f"watcher {path!r}: {module_name} has no {attribute!r}")
        found += _watchers_in(getattr(module, attribute), f"watcher {path!r}")
    return found


def _watchers_in(value: Any, what: str) -> list[Watcher]:
    """A Watcher or a list of them, else PluginError naming ``what``."""
    from .watch.watcher import Watcher  # the watch machinery, only once a plugin or the settings name watchers

    watchers = [value] if isinstance(value, Watcher) else list(value) if isinstance(value, list | tuple) else None
    if watchers is None or not all(isinstance(w, Watcher) for w in watchers):
        raise PluginError(f"{what}: expected a kuberaven.watch.watcher.Watcher or a list of them, not {value!r}")
    return watchers
