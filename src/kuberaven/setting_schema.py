"""How a command's settings are read (the entry points' shared machinery): flags, variables, a config file.

A command's settings are one dataclass, its *root*: ``kuberaven run``'s is
settings.py's Settings, ``kuberaven node``'s node_settings.py's. A field of
the root is a setting, or a component's options marked as a Group, whose
fields are settings named ``prefix + field``. Each setting has one flat
name: the flag (with dashes), the config-file key and, upper-cased after the
root's prefix, the environment variable (``KUBERAVEN_DB``,
``KUBERAVEN_NODE_PARK_FOR``). Defaults and checks are the dataclasses' own,
written once; a value is converted to its declared type by
setting_values.py, and a bad one is named by its setting and where it was
given. Light on purpose: the node agent reads its settings with this and
imports none of the daemon.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from .setting_values import Invalid, coerce

LogFormat = Literal["text", "json"]  # how a command logs: kuberaven run's and kuberaven node's
DEFAULT_LOG_FORMAT: LogFormat = "text"
GROUP = "kuberaven.settings.group"  # the field metadata key of a component's options
# A setting's places: (group, field) for each group that declares it; group None: a field of the root itself.
Route = tuple[str | None, str]


class ConfigError(Exception):
    """The configuration is unusable; the message names the file, key or value."""


@dataclasses.dataclass(frozen=True)
class Group:
    """Marks a root's field as a component's options: each field of them is the setting ``prefix + name``.

    ``internal``: fields that stay the component's own tuning (tests and benchmarks set them), not settings.
    """

    prefix: str = ""
    internal: tuple[str, ...] = ()


def group(prefix: str = "", internal: tuple[str, ...] = ()) -> dict[str, Group]:
    """The metadata of a root's field that holds a component's options."""
    return {GROUP: Group(prefix, internal)}


@dataclasses.dataclass(frozen=True, eq=False)
class Schema:
    """One command's settings: its root dataclass and the prefix of its environment variables."""

    root: type[Any]
    env_prefix: str

    @functools.cached_property
    def group_types(self) -> dict[str, type[Any]]:
        """Each root field that is a component's options: its name and the options' dataclass."""
        hints = typing.get_type_hints(self.root)
        return {f.name: hints[f.name] for f in dataclasses.fields(self.root) if GROUP in f.metadata}

    @functools.cached_property
    def routes(self) -> dict[str, tuple[Route, ...]]:
        """Each setting's name and the places it sets (a name more than one group declares sets each)."""
        routes: dict[str, list[Route]] = {}
        for field in dataclasses.fields(self.root):
            marked: Group | None = field.metadata.get(GROUP)
            if marked is None:
                routes.setdefault(field.name, []).append((None, field.name))
                continue
            for option in dataclasses.fields(self.group_types[field.name]):
                if option.name not in marked.internal:
                    routes.setdefault(marked.prefix + option.name, []).append((field.name, option.name))
        return {name: tuple(places) for name, places in routes.items()}

    @functools.cached_property
    def _hints(self) -> dict[str | None, dict[str, Any]]:
        """The declared types (with their bounds) of the root's own fields (None) and of each group's options."""
        hints: dict[str | None, dict[str, Any]] = {None: typing.get_type_hints(self.root, include_extras=True)}
        for name, options in self.group_types.items():
            hints[name] = typing.get_type_hints(options, include_extras=True)
        return hints

    def field_types(self, group: str | None) -> dict[str, Any]:
        """The declared types of the root's own fields (group None) or of one group's options."""
        return self._hints[group]

    def names(self) -> frozenset[str]:
        """Every setting's one name: the flag (with dashes), the variable's tail and the config-file key."""
        return frozenset(self.routes)

    def variable(self, name: str) -> str:
        """The environment variable of a setting."""
        return f"{self.env_prefix}{name}".upper()

    def variables(self) -> frozenset[str]:
        return frozenset(self.variable(name) for name in self.routes)

    def load(self, config: Path | None, flags: Mapping[str, Any]) -> Any:
        """The root from flags (not None), the environment, then ``config`` (YAML mapping), then defaults."""
        # name: (value, where it was given); a later layer outranks an earlier one.
        given: dict[str, tuple[Any, str]] = {}
        if config:
            given.update({name: (value, f"config file {config}") for name, value in self._read(config).items()})
        environ = {key.upper(): value for key, value in os.environ.items()}
        given.update(
            {n: (environ[self.variable(n)], self.variable(n)) for n in self.routes if self.variable(n) in environ}
        )
        for name, value in flags.items():
            if name not in self.routes:
                raise ConfigError(f"unknown setting {name!r} (see docs/configuration.md)")
            if value is not None:
                given[name] = (value, f"--{name.replace('_', '-')}")
        return self._build(given)

    def _build(self, given: Mapping[str, tuple[Any, str]]) -> Any:
        """Each given value converted into every place that reads it, the groups made: every problem named once."""
        values: dict[str | None, dict[str, Any]] = {}
        problems: list[str] = []
        failed: set[str | None] = set()
        for name, places in self.routes.items():  # in the declared order: the problems too
            if name not in given:
                continue
            raw, source = given[name]
            for place, field in places:
                try:
                    values.setdefault(place, {})[field] = coerce(raw, self.field_types(place)[field])
                except Invalid as error:
                    failed.add(place)
                    text = f"{name}: {error} (from {source})"
                    if text not in problems:
                        problems.append(text)
        groups = {
            name: self._made(options, values.get(name, {}), problems)
            for name, options in self.group_types.items()
            if name not in failed
        }
        root = None if problems else self._made(self.root, {**values.get(None, {}), **groups}, problems)
        if problems:
            raise ConfigError(f"invalid configuration: {'; '.join(problems)}")
        return root

    @staticmethod
    def _made(options: type[Any], values: dict[str, Any], problems: list[str]) -> Any:
        """``options(**values)``, or None with the dataclass's own check (``__post_init__``) among ``problems``."""
        try:
            return options(**values)
        except ValueError as error:  # a check across fields: its words alone
            problems.append(str(error))
            return None

    def _read(self, path: Path) -> dict[str, Any]:
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
        unknown = sorted(set(loaded) - self.names())
        if unknown:
            raise ConfigError(f"config file {path}: unknown setting {unknown[0]!r} (see docs/configuration.md)")
        return loaded


def unknown_variable(environ: Mapping[str, str], prefix: str, known: Iterable[str]) -> str | None:
    """A line naming the first variable under ``prefix`` that is not in ``known`` (and the closest known
    name), or None: a misspelt setting would otherwise be ignored without a word."""
    known = frozenset(known)
    for name in sorted(environ):
        if name.upper().startswith(prefix) and name.upper() not in known:
            close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "see docs/configuration.md"
            return f"unknown environment variable {name}; {hint}"
    return None
