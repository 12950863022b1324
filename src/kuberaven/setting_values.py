"""A setting's raw value into its declared type (settings.py's pure core, beside the entry points).

A value comes as a flag gave it, as a ``KUBERAVEN_*`` variable's string or as
the YAML config file's scalar or list; the components' options dataclasses
declare what each field takes. ``coerce`` converts one value to one
annotation or raises ``Invalid`` with a message saying what was expected
(the wording pydantic uses, which the settings were read with before).

The annotations are the few the options use: ``str``, ``int``, ``float``,
``bool``, ``Path``, ``X | None``, ``Literal[...]``, an ``enum.Enum``, ``list[str]``
(a comma-separated string in the environment) and ``Annotated[T, Gt(..)]``
with annotated_types' bounds. Any other annotation is a programming error
(TypeError), found by tests/unit/test_setting_values.py for every setting.

No pydantic here: the settings need none of it, and pydantic-settings with
the Settings model's schema cost ``kuberaven run`` 2 MiB and 30 modules more
(docs/benchmarks.md, "Fixed cost and the CLI").
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import annotated_types

# pydantic's lax booleans: what a flag, a variable or a YAML string may say.
TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})
FALSE_WORDS = frozenset({"0", "off", "f", "false", "n", "no"})


class Invalid(ValueError):
    """The value does not fit the setting's type; the message says what was expected."""


def coerce(value: Any, annotation: Any) -> Any:
    """``value`` as ``annotation`` says, or Invalid."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        converted = coerce(value, base)
        for bound in metadata:
            _check_bound(converted, bound)
        return converted
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(value, typing.get_args(annotation))
    if origin is typing.Literal:
        return _one_of(value, typing.get_args(annotation), lambda choice: choice)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return _coerce_list(value, item)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        members = list(annotation)
        return _one_of(value, [m.value for m in members], lambda choice: annotation(choice))
    scalar = SCALARS.get(annotation)
    if scalar is None:
        raise TypeError(f"a setting of type {annotation!r} cannot be read (setting_values.py knows none such)")
    return scalar(value)


def _coerce_union(value: Any, members: tuple[Any, ...]) -> Any:
    if value is None and type(None) in members:
        return None
    others = [m for m in members if m is not type(None)]
    problem: Invalid | None = None
    for member in others:
        try:
            return coerce(value, member)
        except Invalid as error:
            problem = problem or error
    assert problem is not None, members
    raise problem


def _one_of(value: Any, choices: Any, make: Callable[[Any], Any]) -> Any:
    for choice in choices:
        if type(value) is not bool and value == choice:  # True == 1: a boolean is no choice's value
            return make(choice)
    quoted = [repr(c) for c in choices]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    raise Invalid(f"Input should be {listed}")


def _coerce_list(value: Any, item: Any) -> list[Any]:
    if isinstance(value, str):  # the environment's form: comma-separated
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple):
        raise Invalid("Input should be a valid list")
    return [coerce(element, item) for element in value]


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise Invalid("Input should be a valid string")


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise Invalid("Input should be a valid integer, got a number with a fractional part")
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise Invalid("Input should be a valid integer, unable to parse string as an integer") from None
    raise Invalid("Input should be a valid integer")


def _to_float(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise Invalid("Input should be a valid number, unable to parse string as a number") from None
    raise Invalid("Input should be a valid number")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise Invalid("Input should be a valid boolean, unable to interpret input")


def _to_path(value: Any) -> Path:
    return Path(_to_str(value))


SCALARS: dict[Any, Callable[[Any], Any]] = {
    str: _to_str,
    int: _to_int,
    float: _to_float,
    bool: _to_bool,
    Path: _to_path,
}

# annotated_types' bounds: (attribute, holds, the words of the message)
BOUNDS: dict[type, tuple[str, Callable[[Any, Any], bool], str]] = {
    annotated_types.Gt: ("gt", lambda v, b: v > b, "greater than"),
    annotated_types.Ge: ("ge", lambda v, b: v >= b, "greater than or equal to"),
    annotated_types.Lt: ("lt", lambda v, b: v < b, "less than"),
    annotated_types.Le: ("le", lambda v, b: v <= b, "less than or equal to"),
}


def _check_bound(value: Any, bound: Any) -> None:
    known = BOUNDS.get(type(bound))
    if known is None:
        raise TypeError(f"a setting bound {bound!r} cannot be checked (setting_values.py knows none such)")
    attribute, holds, words = known
    limit = getattr(bound, attribute)
    if not holds(value, limit):
        raise Invalid(f"Input should be {words} {limit}")
