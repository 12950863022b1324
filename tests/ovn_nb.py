"""A real OVN northbound ovsdb-server, alone (no northd, no Neutron), for the unit tests of what kuberaven writes
there (tests/unit/test_ovn_affinity.py, test_source_filters.py): the ``nb`` fixture of tests/unit/conftest.py.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

NB_SCHEMA = "/usr/share/ovn/ovn-nb.ovsschema"


@contextlib.contextmanager
def nb_server(tmp_path: Path) -> Iterator[str]:
    """A real OVN NB ovsdb-server (alone) on a unix socket: its connection string."""
    if shutil.which("ovsdb-server") is None or not Path(NB_SCHEMA).exists():
        pytest.skip("ovsdb-server or OVN's NB schema is not installed (Debian: ovn-central)")
    database, sock = tmp_path / "nb.db", tmp_path / "nb.sock"
    subprocess.run(["ovsdb-tool", "create", str(database), NB_SCHEMA], check=True)
    server = subprocess.Popen(
        ["ovsdb-server", f"--remote=punix:{sock}", f"--unixctl={tmp_path / 'ctl'}", str(database)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not _accepts(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        yield f"unix:{sock}"
    finally:
        server.kill()
        server.wait()


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


def nbctl(remote: str, *args: str) -> str:
    done = subprocess.run(["ovn-nbctl", f"--db={remote}", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()
