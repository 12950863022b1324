"""A setting's raw value into its declared type (setting_values.py), and every setting's type is one it reads."""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from annotated_types import Ge, Gt, Le, Lt, MultipleOf

from kuberaven.node_settings import NODE
from kuberaven.setting_values import Invalid, coerce
from kuberaven.settings import SCHEMA, ConfigError, load_settings


class Colour(enum.StrEnum):
    RED = "red"
    DARK_BLUE = "dark/blue"


@pytest.mark.parametrize(
    ("value", "annotation", "expected"),
    [
        ("text", str, "text"),
        ("42", int, 42),
        (" 42 ", int, 42),
        (42, int, 42),
        (3.0, int, 3),
        ("7.5", float, 7.5),
        (3, float, 3.0),
        ("3600", float, 3600.0),
        (True, bool, True),
        *((word, bool, True) for word in ("true", "True", "1", "yes", "on", "t", "y")),
        *((word, bool, False) for word in ("false", "FALSE", "0", "no", "off", "f", "n")),
        (0, bool, False),
        (None, str | None, None),
        ("x", str | None, "x"),
        ("2", Annotated[int, Ge(1)] | None, 2),
        (None, Annotated[int, Ge(1)] | None, None),
        ("json", Literal["text", "json"], "json"),
        ("red", Colour, Colour.RED),
        ("dark/blue", Colour, Colour.DARK_BLUE),
        (Colour.RED, Colour, Colour.RED),
        ("a.example, b.example ,", list[str], ["a.example", "b.example"]),  # the environment's form
        (["x:Y"], list[str], ["x:Y"]),  # a YAML list
        ("", list[str], []),
        ("1", Annotated[int, Ge(1)], 1),
        ("0.5", Annotated[float, Gt(0)], 0.5),
        ("9", Annotated[int, Lt(10), Le(9)], 9),
    ],
)
def test_a_value_becomes_its_type(value: Any, annotation: Any, expected: Any) -> None:
    converted = coerce(value, annotation)
    assert converted == expected and type(converted) is type(expected)


@pytest.mark.parametrize(
    ("value", "annotation", "says"),
    [
        ("many", int, "Input should be a valid integer, unable to parse string as an integer"),
        (2.5, int, "Input should be a valid integer, got a number with a fractional part"),
        ([1], int, "Input should be a valid integer"),
        ("fast", float, "Input should be a valid number, unable to parse string as a number"),
        (None, float, "Input should be a valid number"),
        ("maybe", bool, "Input should be a valid boolean, unable to interpret input"),
        (2, bool, "Input should be a valid boolean, unable to interpret input"),
        (5, str, "Input should be a valid string"),  # a YAML number where text is meant
        (None, str, "Input should be a valid string"),
        ("calico", Literal["kuberaven", "other"], "Input should be 'kuberaven' or 'other'"),
        (True, Literal["a", "b", "c"], "Input should be 'a', 'b' or 'c'"),
        ("blue", Colour, "Input should be 'red' or 'dark/blue'"),
        (3, list[str], "Input should be a valid list"),
        ([3], list[str], "Input should be a valid string"),
        ("0", Annotated[int, Ge(1)], "Input should be greater than or equal to 1"),
        ("0", Annotated[float, Gt(0)], "Input should be greater than 0"),
        ("10", Annotated[int, Lt(10)], "Input should be less than 10"),
        ("10", Annotated[int, Le(9)], "Input should be less than or equal to 9"),
        ("0", Annotated[int, Ge(1)] | None, "Input should be greater than or equal to 1"),
        (2.5, str | int | None, "Input should be a valid string"),  # the first member's words
    ],
)
def test_a_bad_value_says_what_was_expected(value: Any, annotation: Any, says: str) -> None:
    with pytest.raises(Invalid) as raised:
        coerce(value, annotation)
    assert str(raised.value) == says


@pytest.mark.parametrize(
    "annotation", [dict[str, int], bytes, tuple[int, int], Annotated[int, MultipleOf(2)], set[str]], ids=repr
)
def test_a_type_it_does_not_know_is_a_programming_error(annotation: Any) -> None:
    with pytest.raises(TypeError, match="cannot be"):
        coerce(2, annotation)


def test_every_setting_has_a_type_it_reads() -> None:
    """Each place a setting goes to is declared with a type coerce() knows: a value of no type is refused as
    Invalid (a TypeError would say the type is unknown)."""
    places = [place for places in SCHEMA.routes.values() for place in places]
    assert len(places) > 40, "the settings were walked"
    for group, field in places:
        with pytest.raises(Invalid):
            coerce(object(), SCHEMA.field_types(group)[field])
    node = [place for places in NODE.routes.values() for place in places]
    assert len(node) > 10, "the node agent's settings were walked"
    for group, field in node:
        with pytest.raises(Invalid):
            coerce(object(), NODE.field_types(group)[field])


def test_a_bad_value_names_where_it_was_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in [k for k in os.environ if k.upper().startswith("KUBERAVEN_")]:
        monkeypatch.delenv(key)
    config = tmp_path / "k.yaml"
    config.write_text("kafka_partitions: 0\nlisten: 8080\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(config)
    assert str(raised.value) == (
        "invalid configuration: listen: Input should be a valid string (from config file "
        f"{config}); kafka_partitions: Input should be greater than or equal to 1 (from config file {config})"
    )
    monkeypatch.setenv("KUBERAVEN_KAFKA_PARTITIONS", "none")
    with pytest.raises(ConfigError, match=r"kafka_partitions: .* \(from KUBERAVEN_KAFKA_PARTITIONS\)$"):
        load_settings()
    with pytest.raises(ConfigError, match=r"unknown setting 'colour'"):
        load_settings(colour="red")
