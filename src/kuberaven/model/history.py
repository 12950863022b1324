"""The model's history (model/): a history table per model table, filled by database triggers.

    any writer (inventory, provisioning, apply, REST, Python) ──UPDATE / DELETE──► model table
        ──AFTER UPDATE (a change) / AFTER DELETE trigger──► <table>_history: the OLD row,
                                                            valid_from, valid_until, ended_by
    asof.py ──► the model at a time, one object's versions         runtime/history.py ──► prune()

The database is the one writer of history: no Python runs on the write
path, and no writer of the model knows of it. A row's current version is
the row itself; it holds from its last history row's ``valid_until`` (or its
``created``). Versions hold on ``[valid_from, valid_until)``, in the
database's clock (UTC). An UPDATE that changes only kuberaven's bookkeeping
(``NOT_A_CHANGE``: enacted, backend_status, resource_version, ...) is no new
version.

``history_horizon.since``: versions are complete from that time on (the
upgrade that added history, a restart of recording, the pruning cutoff);
a question about an earlier time is refused rather than answered wrongly.

A migration that adds a column to a tracked table adds it to its history
table and calls ``install_triggers`` again (the triggers name the columns);
SQLite's batch mode, which rebuilds a table, drops its triggers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import Model, UTCDateTime, table_of, utcnow
from .tables import USER_MODELS

SUFFIX = "_history"
VALID_FROM = "valid_from"
VALID_UNTIL = "valid_until"
ENDED_BY = "ended_by"  # what ended a version: UPDATED or DELETED
HISTORY_ID = "history_id"
UPDATED = "updated"
DELETED = "deleted"
HORIZON_ID = 1  # the one row of history_horizon
# Columns whose change alone makes no new version: kuberaven's bookkeeping of its own work, and the
# resourceVersion that moves with every change Kubernetes makes (the observed columns say what changed).
NOT_A_CHANGE = frozenset(
    {
        "updated",
        "enacted",
        "policed",
        "backend_status",
        "backend_code",
        "backend_handle",
        "policy_status",
        "policy_code",
        "resource_version",
        "need_event",
        "last_event_sent",
    }
)
# Columns whose values history never keeps (NULL in the history table): a Secret's values, so that a
# rotated secret does not linger for the retention. Its keys are kept (``keys``).
NEVER_KEPT: dict[str, frozenset[str]] = {"kubernetes_secret": frozenset({"data"})}


def _tracked() -> tuple[sa.Table, ...]:
    seen: dict[str, sa.Table] = {}
    for model in USER_MODELS:
        table = table_of(model)
        seen.setdefault(table.name, table)
    return tuple(seen.values())


# Every table of the models users address (the mirrored ones among them), in dependency order.
TRACKED: tuple[sa.Table, ...] = _tracked()


def history_table(source: sa.Table) -> sa.Table:
    """``<table>_history``: every column of ``source`` (no constraints: a version outlives the rows it named)."""
    name = source.name + SUFFIX
    return sa.Table(
        name,
        Model.metadata,
        sa.Column(HISTORY_ID, sa.Integer, primary_key=True),
        *(sa.Column(column.name, column.type, nullable=True) for column in source.columns),
        sa.Column(VALID_FROM, UTCDateTime, nullable=False),
        sa.Column(VALID_UNTIL, UTCDateTime, nullable=False),
        sa.Column(ENDED_BY, sa.String(8), nullable=False),
        sa.Index(f"ix_{name}_id_valid_until", "id", VALID_UNTIL),
        sa.Index(f"ix_{name}_valid_until", VALID_UNTIL),
    )


HISTORY: dict[str, sa.Table] = {table.name: history_table(table) for table in TRACKED}

HORIZON = sa.Table(
    "history_horizon",
    Model.metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("since", UTCDateTime, nullable=False),
)


# --- the triggers -----------------------------------------------------------------


def _q(name: str) -> str:
    return f'"{name}"'


def trigger_statements(dialect: str, table: str, columns: Sequence[str], json_columns: Iterable[str]) -> list[str]:
    """The DDL that makes ``table``'s UPDATEs and DELETEs copy the OLD row into its history table.

    ``columns``: the table's columns as they are in the database (a migration passes those of its time).
    """
    history = table + SUFFIX
    names = ", ".join(_q(c) for c in [*columns, VALID_FROM, VALID_UNTIL, ENDED_BY])
    blank = NEVER_KEPT.get(table, frozenset())
    old = ", ".join("NULL" if c in blank else f"OLD.{_q(c)}" for c in columns)
    changes = [c for c in columns if c not in NOT_A_CHANGE and c != "id"]
    last_until = f"(SELECT max({VALID_UNTIL}) FROM {_q(history)} WHERE id = OLD.id)"
    if dialect == "sqlite":
        # The format SQLAlchemy stores datetimes in on SQLite (microseconds), so that text compares as time.
        now = "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"
        since = f"min(max(coalesce(OLD.created, {now}), coalesce({last_until}, '')), {now})"
        differs = " OR ".join(f"OLD.{_q(c)} IS NOT NEW.{_q(c)}" for c in changes)

        def insert(ended_by: str) -> str:
            return f"INSERT INTO {_q(history)} ({names}) VALUES ({old}, {since}, {now}, '{ended_by}');"

        return [
            f"CREATE TRIGGER IF NOT EXISTS {_q(history + '_update')} AFTER UPDATE OF "
            f"{', '.join(_q(c) for c in changes)} ON {_q(table)} FOR EACH ROW WHEN {differs} "
            f"BEGIN {insert(UPDATED)} END",
            f"CREATE TRIGGER IF NOT EXISTS {_q(history + '_delete')} AFTER DELETE ON {_q(table)} FOR EACH ROW "
            f"BEGIN {insert(DELETED)} END",
        ]
    if dialect != "postgresql":
        raise ValueError(f"history: no triggers for {dialect!r} (sqlite or postgresql)")
    json = set(json_columns)  # PostgreSQL's json has no equality: compared as text

    def value(side: str, column: str) -> str:
        return f"{side}.{_q(column)}::text" if column in json else f"{side}.{_q(column)}"

    differs = " OR ".join(f"{value('OLD', c)} IS DISTINCT FROM {value('NEW', c)}" for c in changes)
    function = _q(history + "_copy")
    return [
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"DECLARE now_utc timestamp := clock_timestamp() AT TIME ZONE 'UTC'; "
        f"BEGIN INSERT INTO {_q(history)} ({names}) VALUES ({old}, "
        f"LEAST(GREATEST(OLD.created, {last_until}), now_utc), now_utc, "
        f"CASE TG_OP WHEN 'DELETE' THEN '{DELETED}' ELSE '{UPDATED}' END); RETURN NULL; END $$",
        f"DROP TRIGGER IF EXISTS {_q(history + '_update')} ON {_q(table)}",
        f"CREATE TRIGGER {_q(history + '_update')} AFTER UPDATE OF {', '.join(_q(c) for c in changes)} "
        f"ON {_q(table)} FOR EACH ROW WHEN ({differs}) EXECUTE FUNCTION {function}()",
        f"DROP TRIGGER IF EXISTS {_q(history + '_delete')} ON {_q(table)}",
        f"CREATE TRIGGER {_q(history + '_delete')} AFTER DELETE ON {_q(table)} FOR EACH ROW "
        f"EXECUTE FUNCTION {function}()",
    ]


def drop_statements(dialect: str, table: str) -> list[str]:
    history = table + SUFFIX
    if dialect == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {_q(history + suffix)}" for suffix in ("_update", "_delete")]
    return [
        f"DROP TRIGGER IF EXISTS {_q(history + '_update')} ON {_q(table)}",
        f"DROP TRIGGER IF EXISTS {_q(history + '_delete')} ON {_q(table)}",
        f"DROP FUNCTION IF EXISTS {_q(history + '_copy')}()",
    ]


def install_triggers(db: Connection, table: sa.Table) -> None:
    """(Re)create ``table``'s history triggers for the columns the models give it."""
    json_columns = [c.name for c in table.columns if isinstance(c.type, sa.JSON)]
    for statement in trigger_statements(db.dialect.name, table.name, [c.name for c in table.columns], json_columns):
        db.exec_driver_sql(statement)


def recording(db: Connection) -> bool:
    """Whether every tracked table's triggers are in place."""
    names = {t.name + SUFFIX + s for t in TRACKED for s in ("_update", "_delete")}
    if db.dialect.name == "sqlite":
        query = sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    else:
        query = sa.text("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
    return names <= set(db.execute(query).scalars())


def set_recording(db: Connection, on: bool, now: dt.datetime | None = None) -> bool:
    """Start or stop recording history; whether that changed anything.

    Starting again after a stop moves the horizon to now: what changed meanwhile was not recorded.
    """
    if recording(db) == on:
        return False
    for table in TRACKED:
        if on:
            install_triggers(db, table)
        else:
            for statement in drop_statements(db.dialect.name, table.name):
                db.exec_driver_sql(statement)
    if on:
        set_horizon(db, now or utcnow(), only_later=False)
    return True


# --- the horizon and pruning --------------------------------------------------------


def horizon(db: Connection) -> dt.datetime | None:
    """Since when versions are complete (None: no history recorded yet)."""
    return db.execute(sa.select(HORIZON.c.since).where(HORIZON.c.id == HORIZON_ID)).scalar()


def set_horizon(db: Connection, since: dt.datetime, *, only_later: bool = True) -> None:
    current = horizon(db)
    if current is None:
        db.execute(sa.insert(HORIZON).values(id=HORIZON_ID, since=since))
    elif not only_later or since > current:
        db.execute(sa.update(HORIZON).where(HORIZON.c.id == HORIZON_ID).values(since=since))


def prune(engine: sa.Engine, cutoff: dt.datetime, batch: int) -> int:
    """Delete the versions that ended before ``cutoff``, ``batch`` rows per transaction; how many went.

    The horizon moves first, so no question about the pruned time is answered meanwhile.
    """
    with engine.begin() as db:
        set_horizon(db, cutoff)
    removed = 0
    for table in HISTORY.values():
        while True:
            chosen = sa.select(table.c[HISTORY_ID]).where(table.c[VALID_UNTIL] < cutoff).limit(batch)
            with engine.begin() as db:
                count = db.execute(sa.delete(table).where(table.c[HISTORY_ID].in_(chosen.scalar_subquery()))).rowcount
            removed += count
            if count < batch:
                break
    return removed
