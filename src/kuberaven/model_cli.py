"""Model commands (entry points into model/ and events/): db, get, apply, delete, events.

Every command takes ``--db URL`` (default KUBERAVEN_DB, else the database of
the `kuberaven run` on the local cluster, else the per-user one: localstate.py;
stderr says which when it is not the running daemon's); ``-o json`` prints
machine-readable output only, on stdout.
Errors print one line naming the problem and exit 1, with nothing stored.
Each command imports the model, SQLAlchemy and Rich when it runs (cli.py's
docstring says why); ``-o json`` never loads Rich.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from .model import Database, Model
    from .model.versions import Version

TABLE_OR_JSON = "table | json"


class Group(click.Group):
    """Commands listed in --help in the order they were added (click sorts them by name); plain help, no Rich."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


db_option = click.option("--db", help="database URL (KUBERAVEN_DB)")
output_option = click.option("-o", "--output", default="table", show_default=True, help=TABLE_OR_JSON)
at_option = click.option(
    "--at", help="the rows as they stood then: ISO 8601 (UTC if no offset), or -30s, -10m, -2h, -1d ago"
)

db_app = Group("db", no_args_is_help=True, help="The database schema")

KIND_HELP = "model kind, for example KubernetesServiceInstance"

COLUMNS: dict[str, list[str]] = {
    "default": ["id", "name", "xos_managed", "backend_code", "backend_status"],
    "KubernetesServiceInstance": [
        "id",
        "trust_domain",
        "name",
        "phase",
        "pod_ip",
        "node",
        "restart_count",
        "image",
        "slice",
        "xos_managed",
        "backend_status",
    ],
    "TrustDomain": ["id", "owner", "name", "xos_managed", "backend_status"],
    "Principal": ["id", "trust_domain", "name", "xos_managed", "backend_status"],
    "Slice": ["id", "trust_domain", "name", "controller_kind", "site", "xos_managed", "backend_status"],
    "Image": ["id", "name", "tag", "digest", "type"],
    "KubernetesConfigMap": ["id", "trust_domain", "name", "keys", "xos_managed", "backend_status"],
    "KubernetesSecret": ["id", "trust_domain", "name", "keys", "xos_managed", "backend_status"],
    "Service": ["id", "trust_domain", "name", "type", "xos_managed", "backend_status"],
    "ServicePort": ["id", "service", "name", "internal_port", "external_port", "protocol"],
}


def fail(message: str) -> click.exceptions.Exit:
    click.echo(f"error: {message}", err=True)
    return click.exceptions.Exit(1)


def _model(kind: str) -> type[Model]:
    from .model import ModelError
    from .model.documents import model_for

    try:
        return model_for(kind)
    except ModelError as error:
        raise fail(str(error)) from None


def started() -> None:
    """The command has loaded its code (and opened its database): what that made lives as long as the process.

    cli.main() turns the garbage collector off until then: the imports and the models' mapping make about a
    million objects, and the twenty young collections a `get` ran over them found nothing to free (50-60 ms,
    6 % of its CPU). Frozen, no later collection walks them; the collector is back on for the command's work.
    """
    gc.freeze()
    gc.enable()


@contextmanager
def open_database(url: str | None) -> Iterator[Database]:
    import sqlalchemy as sa

    from .localstate import choose_database
    from .model import Database, ModelError

    chosen, notice = choose_database(url)
    if notice is not None:
        click.echo(notice, err=True)
    try:
        database = Database(chosen)
    except ModelError as error:
        raise fail(str(error)) from None
    try:
        database.prepare()
        started()
        yield database
    except ModelError as error:
        raise fail(str(error)) from None
    except sa.exc.OperationalError as error:
        raise fail(f"database {database.url.render_as_string()}: {error.orig}") from None
    finally:
        database.dispose()


@db_app.command("upgrade")
@db_option
def db_upgrade(db: str | None) -> None:
    """Create or upgrade the schema to the newest revision, then bootstrap the default rows."""
    with open_database(db) as database:
        click.echo(f"database {database.url.render_as_string()} is at the newest schema")


@click.command()
@click.argument("kind", help=KIND_HELP)
@click.argument("name", required=False, help="one row by (qualified) name")
@output_option
@at_option
@db_option
def get(kind: str, name: str | None, output: str, at: str | None, db: str | None) -> None:
    """List rows of a kind (references by name; secret values are never shown); with --at, as they stood then."""
    from .model.documents import as_reference, resolve, to_document

    model = _model(kind)
    title = model.__name__
    with open_database(db) as database, database.session() as session:
        if at is None:
            rows = [resolve(session, model, name)] if name else _every_row(session, model)
        else:
            from .model.asof import Snapshot, checked_time, resolve_at  # the past only: history's tables

            snapshot = Snapshot(session.connection(), checked_time(session.connection(), at))
            rows = [resolve_at(snapshot, model, as_reference(name))] if name else snapshot.query(model)[1]
            title += f" at {snapshot.at.isoformat()}"
        documents = [to_document(row) for row in rows]
    if output == "json":
        print(json.dumps(documents, indent=2, default=str))
        return
    columns = COLUMNS.get(model.__name__, COLUMNS["default"])
    cells = [[_cell(document.get(c)) for c in columns] for document in documents]
    print_table(f"{title} ({len(documents)})", columns, cells)


def _every_row(session: Session, model: type[Model]) -> list[Model]:
    """Every row of ``model``, by id. Whether its table holds any row is asked first, in SQL alone: the ORM, whose
    first query configures every mapper (45-70 ms, a tenth of a `get`), is used only when there are rows to map
    (the very first command on a new database lists an empty table). A table shared by several models (a
    Service's kinds) with rows of other kinds only goes on to the ORM's query, which finds none."""
    import sqlalchemy as sa

    from .model.base import table_of

    if session.connection().scalar(sa.select(sa.literal(1)).select_from(table_of(model)).limit(1)) is None:
        return []
    return list(session.scalars(sa.select(model).order_by(model.id)))


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A Rich table on stdout (Rich is loaded only for tables: ``-o json`` does without it)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*row)
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@click.command()
@click.argument("kind", help=KIND_HELP)
@click.argument("name", help="name or qualified name (namespace/name); deleted objects too")
@output_option
@db_option
def history(kind: str, name: str, output: str, db: str | None) -> None:
    """Every version of one object, oldest first, with what changed (deleted objects included)."""
    from .model.versions import versions

    model = _model(kind)
    with open_database(db) as database, database.session() as session:
        found = versions(session.connection(), model, name)
    if output == "json":
        print(json.dumps([v.as_document() for v in found], indent=2, default=str))
        return
    summary = [c for c in COLUMNS.get(model.__name__, COLUMNS["default"]) if c not in ("id", "trust_domain", "name")]
    rows = []
    for version in found:
        until = version.valid_until.isoformat() if version.valid_until else "now"
        rows.append([version.valid_from.isoformat(), until, version.started_by, _what(version, summary)])
        if version.ended_by == "deleted" and version.valid_until is not None:
            rows.append([version.valid_until.isoformat(), "", "deleted", ""])
    print_table(f"{model.__name__} {name} ({len(found)} versions)", ["from", "until", "event", "what"], rows)


def _what(version: Version, summary: list[str]) -> str:
    """A created version's main fields; an update's changes, ``field: before → after``."""
    from .model.versions import CREATED

    if version.started_by == CREATED:
        return " ".join(f"{c}={_cell(version.document.get(c))}" for c in summary if version.document.get(c) is not None)
    return "; ".join(f"{k}: {_cell(old)} → {_cell(new)}" for k, (old, new) in version.changes.items())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


@click.command()
@click.option(
    "-f",
    "--filename",
    "file",
    type=click.Path(path_type=Path),
    required=True,
    help="YAML file of model objects ('-' for stdin)",
)
@db_option
def apply(file: Path, db: str | None) -> None:
    """Create or update every object in FILE in one transaction; any error stores nothing."""
    from .model.applying import apply_documents
    from .model.documents import to_document
    from .model.parsing import DocumentError, parse_documents

    source = "<stdin>" if str(file) == "-" else str(file)
    try:
        text = sys.stdin.read() if source == "<stdin>" else file.read_text()
    except OSError as error:
        raise fail(f"{source}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise fail(
            f"{source}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start})"
        ) from None
    try:
        documents = parse_documents(text, source)
    except DocumentError as error:
        raise fail(str(error)) from None
    if not documents:
        raise fail(f"{source}: no model objects in the file")
    with open_database(db) as database:
        try:
            with database.session() as session:
                results = [(action, to_document(row)) for action, row in apply_documents(session, documents, source)]
        except DocumentError as error:
            raise fail(f"{error} (nothing was stored)") from None
    for action, document in results:
        click.echo(f"{document['kind']} {document.get('name', document['id'])} {action}")


@click.command()
@click.argument("kind", help="model kind")
@click.argument("name", help="name, qualified name (namespace/name) or id")
@click.option("--cascade", is_flag=True, help="also delete the rows that go with it (managed ones in Kubernetes too)")
@click.option("--dry-run", is_flag=True, help="print what would be deleted; delete nothing")
@db_option
def delete(kind: str, name: str, cascade: bool, dry_run: bool, db: str | None) -> None:
    """Delete one row. A row that would take others with it (a Site its slices and pods) needs --cascade;
    a row others still refer to is refused. Only managed rows' objects are deleted in Kubernetes."""
    from .model.deletes import delete_reference

    model = _model(kind)
    with open_database(db) as database, database.session() as session:
        plan = delete_reference(session, model, name, cascade=cascade, dry_run=dry_run)
    for row in plan.rows:
        click.echo(f"{row} {'would be deleted' if dry_run else 'deleted'}")


@click.command()
@click.option("--follow", "-f", is_flag=True, help="keep printing new events")
@output_option
@click.option("--since", default=0, show_default=True, help="only events after this sequence number")
@click.option("--limit", default=0, show_default=True, help="at most this many past events (0: all)")
@db_option
def events(follow: bool, output: str, since: int, limit: int, db: str | None) -> None:
    """Print the pod event log (the outbox), oldest first."""
    from .events.log import events_after, newest_seq

    with open_database(db) as database:
        last = since
        if limit and not follow:
            last = max(last, newest_seq(database) - limit)
        try:
            while True:
                batch = events_after(database, last, 1000)
                for event in batch:
                    _print_event(event, output)
                    last = event["seq"]
                if not follow and len(batch) < 1000:
                    return
                if not batch:
                    time.sleep(0.5)
        except KeyboardInterrupt:
            return


def _print_event(event: dict[str, Any], output: str) -> None:
    from .events.schema import event_key

    if output == "json":
        print(json.dumps(event), flush=True)
        return
    ips = ",".join(a for i in event.get("netinterfaces", []) for a in i.get("addresses", []))
    sent = "sent" if event["sent"] else "pending"
    key = event_key(event["namespace"], event["name"])
    print(
        f"{event['seq']:>8} {event.get('time', '')} {event['status']:<9} {key:<50} "
        f"{event.get('phase') or '':<10} {ips:<16} {sent}",
        flush=True,
    )


MODEL_COMMANDS = (get, history, apply, delete, events)
