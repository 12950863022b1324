"""History's pure rules: the times users write (model/times.py), what changed between versions
(model/versions.py), and the triggers' DDL (model/history.py) — plain data, no database."""

from __future__ import annotations

import datetime as dt

import pytest

from kuberaven.model.errors import ValidationError
from kuberaven.model.history import NOT_A_CHANGE, trigger_statements
from kuberaven.model.times import parse_time
from kuberaven.model.versions import changes

NOW = dt.datetime(2026, 11, 24, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("-30s", NOW - dt.timedelta(seconds=30)),
        ("-10m", NOW - dt.timedelta(minutes=10)),
        ("-2h", NOW - dt.timedelta(hours=2)),
        ("-1d", NOW - dt.timedelta(days=1)),
        ("-1w", NOW - dt.timedelta(weeks=1)),
        ("-1h30m", NOW - dt.timedelta(minutes=90)),
        ("2026-11-24T10:00:00Z", dt.datetime(2026, 11, 24, 10, tzinfo=dt.UTC)),
        ("2026-11-24T11:00:00+01:00", dt.datetime(2026, 11, 24, 10, tzinfo=dt.UTC)),
        ("2026-11-24 10:00", dt.datetime(2026, 11, 24, 10, tzinfo=dt.UTC)),  # no offset: UTC
        ("  -5m ", NOW - dt.timedelta(minutes=5)),
        (dt.datetime(2026, 11, 24, 11, tzinfo=dt.UTC), dt.datetime(2026, 11, 24, 11, tzinfo=dt.UTC)),
    ],
)
def test_a_time_as_written_is_the_utc_time_it_means(text: str | dt.datetime, expected: dt.datetime) -> None:
    assert parse_time(text, NOW) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "a time is required"),
        ("yesterday", "'yesterday' is not a time: give ISO 8601"),
        ("-10", "'-10' is not a time"),
        ("-10x", "'-10x' is not a time"),
        ("10m", "'10m' is not a time"),
        ("+10m", "'+10m' is not a time"),
        ("2026-13-01", "'2026-13-01' is not a time"),
        ("2026-11-24T13:00:00Z", "is in the future (now is 2026-11-24T12:00:00+00:00)"),
        ("-999999999d", "further back than any time"),
        (dt.datetime(2026, 11, 24, 11), "has no time zone"),
    ],
)
def test_a_bad_time_is_refused_naming_the_problem(text: str | dt.datetime, problem: str) -> None:
    with pytest.raises(ValidationError, match=r"^at: ") as raised:
        parse_time(text, NOW)
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ({"phase": "Pending"}, {"phase": "Running"}, {"phase": ["Pending", "Running"]}),
        ({"pod_ip": None}, {"pod_ip": "10.0.0.1"}, {"pod_ip": [None, "10.0.0.1"]}),
        ({"labels": {"a": "1"}}, {"labels": {"a": "2"}}, {"labels": [{"a": "1"}, {"a": "2"}]}),
        ({"phase": "Running"}, {"phase": "Running"}, {}),
        # kuberaven's bookkeeping and the resourceVersion are no change of the object's
        ({"resource_version": "1", "enacted": "x", "id": 1}, {"resource_version": "2", "enacted": "y", "id": 2}, {}),
        ({}, {"node": "n1", "kind": "KubernetesServiceInstance"}, {"node": [None, "n1"]}),
        # a Secret's values are never kept in history: no change to report
        ({"data": None, "keys": ["a"]}, {"kind": "KubernetesSecret", "data": {"a": "hidden"}, "keys": ["a"]}, {}),
    ],
)
def test_what_changed_between_two_versions(before: dict, after: dict, expected: dict) -> None:
    assert changes(before, after) == expected


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_triggers_copy_every_column_and_fire_only_on_a_change(dialect: str) -> None:
    columns = ["id", "name", "created", "labels", "resource_version", "enacted"]
    update, delete = [s for s in trigger_statements(dialect, "t", columns, ["labels"]) if "CREATE TRIGGER" in s]
    for statement in (update, delete):
        assert '"t_history"' in statement or "t_history_copy" in statement
    fired_by = update.split(" ON ")[0]
    assert '"name"' in fired_by and '"labels"' in fired_by
    assert not any(f'"{c}"' in fired_by for c in NOT_A_CHANGE | {"id"})
    assert "AFTER DELETE" in delete
    if dialect == "postgresql":  # json has no equality operator there
        assert 'OLD."labels"::text IS DISTINCT FROM NEW."labels"::text' in update
    secret = trigger_statements(dialect, "kubernetes_secret", ["id", "data", "keys"], ["data", "keys"])
    copied = next(s for s in secret if "INSERT INTO" in s).split("VALUES")[1].split(";")[0]  # a secret's values: NULL
    assert 'OLD."data"' not in copied and 'OLD."keys"' in copied and "NULL" in copied
    with pytest.raises(ValueError, match="no triggers for 'mysql'"):
        trigger_statements("mysql", "t", columns, [])
