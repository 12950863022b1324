"""inventory/rows.py and pods.py's parameters of the batched statements, as plain data and compiled SQL."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from kuberaven.inventory.pods import JSON_OBSERVED, encoded
from kuberaven.inventory.rows import NOW, SI, found_insert, json_value
from kuberaven.model.base import UTCDateTime

DIALECTS = {"sqlite": sqlite.dialect(), "postgresql": postgresql.psycopg.dialect()}


def test_the_json_columns_of_a_pod_are_the_observed_ones_sqlalchemy_would_encode() -> None:
    assert set(JSON_OBSERVED) == {"pod_ips", "containers", "labels"}


@pytest.mark.parametrize(
    ("observed", "expected"),
    [
        ({"uid": "u", "phase": "Running"}, {"uid": "u", "phase": "Running"}),
        ({"labels": {"a": 'ü "q"'}}, {"labels_json": '{"a":"ü \\"q\\""}'}),
        ({"pod_ips": [], "labels": None}, {"pod_ips_json": "[]", "labels_json": "null"}),
        ({"containers": [{"name": "c", "ready": False}]}, {"containers_json": '[{"name":"c","ready":false}]'}),
    ],
)
def test_encoded_gives_json_columns_as_text_and_the_others_as_they_are(
    observed: dict[str, Any], expected: dict[str, Any]
) -> None:
    params = encoded(observed)
    assert params == expected
    for column in JSON_OBSERVED:
        if column in observed:
            assert json.loads(params[f"{column}_json"]) == observed[column]


def test_encoded_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(TypeError):
        encoded({"labels": {"a": object()}})


def test_a_json_value_is_cast_to_json_on_postgresql_and_stored_as_text_on_sqlite() -> None:
    statement = sa.insert(SI).values(labels=json_value("postgresql", "labels"))
    assert "CAST(%(labels_json)s::VARCHAR AS JSON)" in str(statement.compile(dialect=DIALECTS["postgresql"]))
    assert "CAST" not in str(
        sa.insert(SI).values(labels=json_value("sqlite", "labels")).compile(dialect=DIALECTS["sqlite"])
    )


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_found_insert_carries_its_constants_in_the_sql_and_one_timestamp(dialect: str) -> None:
    statement = found_insert(SI, dialect)
    assert found_insert(SI, dialect) is statement, "built once"
    compiled = statement.compile(dialect=DIALECTS[dialect])
    sql = str(compiled)
    for flag in ("xos_managed", "deleted", "backend_need_delete", "no_sync", "no_policy"):
        assert flag in sql
    assert ("false" if dialect == "postgresql" else "0") in sql
    assert list(compiled.params).count(NOW) == 1
    now_type = compiled.binds[NOW].type
    assert isinstance(now_type, UTCDateTime if dialect == "postgresql" else sa.String)


def test_the_batch_timestamp_on_sqlite_is_the_text_utcdatetime_stores() -> None:
    from kuberaven.inventory.rows import stamp

    class Db:
        dialect = DIALECTS["sqlite"]

    now = dt.datetime(2026, 11, 24, 23, 0, 1, 250, tzinfo=dt.UTC)
    assert stamp(Db(), now) == "2026-11-24 23:00:01.000250"  # type: ignore[arg-type]  # only .dialect is read
    Db.dialect = DIALECTS["postgresql"]
    assert stamp(Db(), now) is now  # type: ignore[arg-type]  # PostgreSQL's driver takes the datetime


def test_the_batch_timestamp_keeps_whole_seconds_microseconds() -> None:
    from kuberaven.inventory.rows import stamp

    class Db:
        dialect = DIALECTS["sqlite"]

    # The text a column of UTCDateTime stores, to the microsecond, even when they are 0 (the text is compared).
    whole = dt.datetime(2026, 11, 24, 23, 0, 1, tzinfo=dt.UTC)
    assert stamp(Db(), whole) == "2026-11-24 23:00:01.000000"  # type: ignore[arg-type]  # only .dialect is read
