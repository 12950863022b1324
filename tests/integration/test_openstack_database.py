"""The local OpenStack's MariaDB (kuberaven.testing.openstack, openstack_schema): two environments that start at
once on an empty schema cache both get a whole database, built once; and a running one keeps its temporary
tables, socket, pid file and data to its own directory.

The build is the real one (mariadb-install-db, neutron-db-manage and octavia-db-manage on a real MariaDB):
14 s to 48 s for the two builds, up to 85 s for the whole test, measured on a loaded 2-core machine.
tests/unit/test_openstack_schema.py drives the lock and the publishing with a stand-in build, fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE, STDOUT

import pytest

from kuberaven.testing.openstack import LocalOpenStack
from kuberaven.testing.openstack_schema import BUILDING_PREFIX, cache_key
from kuberaven.testing.processes import Process, wait_for
from tests.conftest import OPENSTACK_GROUP
from tests.helpers import waiting_for_a_lock

BUILD_TIMEOUT = 600  # seconds for two environments' databases on a loaded machine
READY_TIMEOUT = 120
# One environment's database, in a process of its own: LocalOpenStack.prepare_database() as start() runs it.
PREPARE = "import sys; from pathlib import Path; from kuberaven.testing.openstack import LocalOpenStack; " + (
    "LocalOpenStack(Path(sys.argv[1])).prepare_database()"
)
# Neutron's and Octavia's migrations each leave their head revision here.
HEADS = "SELECT COUNT(*) FROM neutron.alembic_version; SELECT COUNT(*) FROM octavia.alembic_version"
TABLES = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema IN ('neutron', 'octavia')"
MIN_TABLES = 200  # Zed's Neutron and Octavia make about 230


def mariadb(socket: Path, query: str) -> list[str]:
    done = subprocess.run(
        ["mariadb", "--no-defaults", f"--socket={socket}", "-N", "-e", query],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


@pytest.fixture
def served() -> Iterator[list[Process]]:
    """MariaDB servers the test starts, stopped after it."""
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()


def serve(datadir: Path, directory: Path, served: list[Process]) -> Path:
    """A MariaDB of the test's own on ``datadir`` (no network): its socket once it answers."""
    socket = directory / "check.sock"
    process = Process(
        "check-mariadb",
        [
            "mariadbd",
            "--no-defaults",
            f"--datadir={datadir}",
            f"--socket={socket}",
            f"--tmpdir={directory}",
            f"--pid-file={directory}/check.pid",
            "--skip-networking",
            "--skip-grant-tables",
            *(["--user=root"] if os.geteuid() == 0 else []),
        ],
        directory,
    )
    process.start()
    served.append(process)
    wait_for(lambda: mariadb(socket, "SELECT 1") == ["1"], READY_TIMEOUT, "MariaDB on the copy", process=process)
    return socket


def test_two_environments_on_an_empty_cache_build_one_whole_entry_and_both_use_it(
    tmp_path: Path, served: list[Process]
) -> None:
    key = cache_key()
    assert key is not None, "dpkg-query gave no versions to key the cache on"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    directories = [tmp_path / "env-a", tmp_path / "env-b"]
    started = time.monotonic()
    processes = [
        subprocess.Popen([sys.executable, "-c", PREPARE, str(d)], env=env, stdout=PIPE, stderr=STDOUT, text=True)
        for d in directories
    ]
    try:
        # One builds while the other waits for the cache's lock: they ran at once.
        wait_for(
            lambda: any(waiting_for_a_lock(p.pid) or p.poll() is not None for p in processes),
            READY_TIMEOUT,
            "a process waiting for the other's build",
        )
        assert all(p.poll() is None for p in processes), [p.communicate()[0] for p in processes]
        outputs = [p.communicate(timeout=BUILD_TIMEOUT)[0] for p in processes]
    finally:
        for process in processes:
            process.kill()
    assert [p.returncode for p in processes] == [0, 0], outputs
    print(f"two environments' databases from an empty cache: {time.monotonic() - started:.0f} s")
    cache = tmp_path / "cache" / "kuberaven" / "openstack-db"
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == [key]  # no build directory left
    assert not any(p.name.startswith(BUILDING_PREFIX) for p in cache.iterdir())
    # Only the builder ran a MariaDB (its log); the other copied the entry.
    assert sorted((d / "mariadb.log").exists() for d in directories) == [False, True]
    for directory in directories:
        socket = serve(directory / "mysql", directory, served)
        assert all(int(heads) >= 1 for heads in mariadb(socket, HEADS))  # Neutron has two: expand, contract
        assert int(mariadb(socket, TABLES)[0]) >= MIN_TABLES


@pytest.mark.xdist_group(OPENSTACK_GROUP)  # its group's one local OpenStack (tests/conftest.py)
def test_the_running_mariadb_keeps_its_files_in_its_own_directory(openstack: LocalOpenStack) -> None:
    """Nothing in /tmp or /run that another server (another environment's, the system's) may touch, and no TCP
    port (one picked free ahead can be taken before the server binds it): Neutron and Octavia use its socket."""
    socket = openstack.directory / "mysql.sock"
    where = mariadb(socket, "SELECT @@tmpdir, @@socket, @@pid_file, @@datadir")
    assert len(where) == 4
    for path in where:
        assert Path(path).is_relative_to(openstack.directory), where
    assert mariadb(socket, "SELECT @@skip_networking") == ["1"]
