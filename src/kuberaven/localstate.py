"""Where a user's local kuberaven lives (entry points: cli.py, model_cli.py), the same wherever they stand.

    <data dir>/kuberaven.db        the default database (model.database.default_url)
    <data dir>/testenv/            the local cluster `kuberaven run` starts when no cluster is configured
    <data dir>/testenv/daemon.json the `kuberaven run` using it: pid, database, listen address

The data dir is $XDG_DATA_HOME/kuberaven, else ~/.local/share/kuberaven. `get`, `apply`, … use the
running daemon's database when no --db or KUBERAVEN_DB names one, and say which database they used
when it is not that daemon's; `kuberaven testenv env` prints the shell environment for the cluster.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from .model.database import URL_ENV, default_url, user_data_dir

LOCAL_ENV = "testenv"
DAEMON_FILE = "daemon.json"


def local_env_dir() -> Path:
    """The local cluster's state directory (env.json, kubeconfig, logs), one per user."""
    return user_data_dir() / LOCAL_ENV


@dataclass(frozen=True)
class RunningDaemon:
    """A `kuberaven run` on the local cluster, as it recorded itself."""

    pid: int
    db: str
    listen: str


def record_daemon(env_dir: Path, db: str, listen: str) -> None:
    """Say that this process runs on the local cluster of ``env_dir`` with database ``db`` (owner-only file)."""
    path = env_dir / DAEMON_FILE
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the URL may hold a password
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(RunningDaemon(os.getpid(), db, listen)), out)
    temporary.rename(path)


def forget_daemon(env_dir: Path) -> None:
    """Remove the record if it is this process's (a second daemon's record is not ours to remove)."""
    found = _read_record(env_dir / DAEMON_FILE)
    if found is not None and found.pid == os.getpid():
        (env_dir / DAEMON_FILE).unlink(missing_ok=True)


def running_daemon(env_dir: Path | None = None) -> RunningDaemon | None:
    """The `kuberaven run` on the local cluster, if one is running."""
    from .testing.processes import pid_alive  # testing/ is loaded only when asked for (tests/unit/test_startup.py)

    found = _read_record((env_dir or local_env_dir()) / DAEMON_FILE)
    return found if found is not None and pid_alive(found.pid) else None


def _read_record(path: Path) -> RunningDaemon | None:
    try:
        data = json.loads(path.read_text())
        return RunningDaemon(int(data["pid"]), str(data["db"]), str(data["listen"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def choose_database(named: str | None) -> tuple[str, str | None]:
    """(database URL, a line for stderr or None): --db, else KUBERAVEN_DB, else the running daemon's, else
    the per-user default. The line says which database was used when a daemon runs on another one, or
    when the default was taken with no daemon running (a database named on purpose needs no comment)."""
    daemon = running_daemon()
    explicit = named or os.environ.get(URL_ENV)
    url = explicit or (daemon.db if daemon else None) or default_url()
    if daemon is not None and not _same(url, daemon.db):
        return url, (
            f"database: {shown(url)}, not the one the running `kuberaven run` (pid {daemon.pid}) "
            f"uses: {shown(daemon.db)}"
        )
    if daemon is None and not explicit:
        return url, f"database: {shown(url)} (the default; no local `kuberaven run` is going)"
    return url, None


def shown(url: str) -> str:
    """The URL without its password."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def _same(first: str, second: str) -> bool:
    try:
        return sa.make_url(first) == sa.make_url(second)
    except sa.exc.ArgumentError:
        return first == second


def env_exports(env: dict[str, Any]) -> str:
    """Shell lines for `eval "$(kuberaven testenv env)"`: KUBECONFIG for kubectl; the rest as comments,
    since a variable such as KUBERAVEN_KAFKA would outlive this cluster in the shell."""
    lines = [f"export KUBECONFIG={shlex.quote(str(env['kubeconfig']))}"]
    if env.get("kafka_bootstrap"):
        lines.append(f"# Kafka-protocol broker: {env['kafka_bootstrap']}")
    if env.get("database_url"):
        lines.append(f"# PostgreSQL: {shown(env['database_url'])}")
    return "\n".join(lines)
