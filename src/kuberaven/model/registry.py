"""What plugins add to the model (model/): their models and migrations, registered from above.

    plugins.py ──(load_plugins: register(models, migrations); set_loader)──► this registry
    documents.py (kinds of apply/get/delete), Database.upgrade() (migrations) ◄── read it

model/ sits below plugins.py and never imports it: plugins.py fills this
registry when it loads a plugin, and sets the loader that ``load()`` calls
so that the Python API (``connect()``) still finds the configured plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

# typing is not imported: `import kuberaven` is kuberaven-cni's start, and typing alone costs it ~10 ms.
TYPE_CHECKING = False  # mypy reads the block below as if True

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

_models: list[type[Any]] = []
_migrations: list[Path] = []
_loader: Callable[[], object] | None = None


def register(models: Iterable[type[Any]] = (), migrations: Path | None = None) -> None:
    _models.extend(m for m in models if m not in _models)
    if migrations is not None and migrations not in _migrations:
        _migrations.append(migrations)


def set_loader(loader: Callable[[], object]) -> None:
    """How to load the configured plugins (plugins.py), run by the first load()."""
    global _loader
    _loader = loader


def load() -> None:
    """Load the configured plugins, once per process: finding them reads every installed package's
    metadata (entry points), far too slow to repeat for each document of an apply."""
    global _loader
    loader, _loader = _loader, None
    if loader is not None:
        try:
            loader()
        except BaseException:
            _loader = loader  # not loaded: the next call tries again (and raises again)
            raise


def plugin_models() -> list[type[Any]]:
    load()
    return list(_models)


def migration_locations() -> list[Path]:
    load()
    return list(_migrations)
