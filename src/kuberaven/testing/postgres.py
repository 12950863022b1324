"""A throw-away PostgreSQL server (testing/): tests run every database test on it too.

Debian's ``postgresql`` package; initdb and the server refuse to run as root,
so as root they run as the ``postgres`` user through ``setpriv`` (which
execs, so the server stays our child and gets PDEATHSIG after the switch).
Loopback only, its own socket directory, fsync off: up in about a second.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .free_ports import free_port
from .processes import Process, wait_for


class PostgresError(RuntimeError):
    pass


def postgres_bin() -> Path:
    """The newest installed server's bin directory (KUBERAVEN_PG_BIN overrides)."""
    configured = os.environ.get("KUBERAVEN_PG_BIN")
    if configured:
        return Path(configured)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise PostgresError("PostgreSQL is not installed (Debian package 'postgresql'; `make deps` installs it)")
    return Path(found[-1]).parent


class PostgresServer:
    """``directory`` (default: a new one in the temporary directory) must be reachable by the postgres user."""

    def __init__(self, directory: Path | None = None) -> None:
        self.owns_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="kuberaven-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self.process: Process | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, database: str) -> str:
        return self.url.rsplit("/", 1)[0] + f"/{database}"

    def _as_owner(self, args: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return args
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--pdeathsig=SIGKILL", *args]

    def start(self) -> None:
        bin_dir = postgres_bin()
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
            self.directory.chmod(0o755)
        initdb = self._as_owner([str(bin_dir / "initdb"), "-A", "trust", "-U", "postgres", "-D", str(self.data)])
        result = subprocess.run(initdb, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PostgresError(f"initdb failed: {result.stderr.strip() or result.stdout.strip()}")
        args = [
            str(bin_dir / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"unix_socket_directories={self.directory}",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=200",
        ]
        self.process = Process("postgres", self._as_owner(args), self.directory)
        self.process.start()
        wait_for(self._accepts, 30, "PostgreSQL to accept connections", process=self.process)

    def _accepts(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url, connect_timeout=1).close()
            return True
        except psycopg.OperationalError:
            return False

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
        if self.owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
