"""The local OpenStack's cached database directory (kuberaven.testing.openstack_schema): an entry is built by
one process while the others wait and reuse it, published whole or not at all, found by key; migrations run
together and each failure is named. The build here is a cheap stand-in; test_openstack_schema_build.py (an
integration test) runs the real one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven.testing import openstack_schema
from kuberaven.testing.openstack_schema import BUILDING_PREFIX, cache_key, entry, restore, run_together
from tests.helpers import waiting_for_a_lock

WAIT = 30.0  # seconds for a process to reach the state a test waits for
# A process building an entry with a stand-in build: it writes half the data directory, notes its pid in
# built.log, then (with "hold") waits for a file "release" before it writes the rest; it prints the entry it got.
BUILDER = """
import os, sys, time
from pathlib import Path
from kuberaven.testing.openstack_schema import entry
work = Path(sys.argv[1])
def build(datadir):
    (datadir / "neutron").mkdir(parents=True)
    (datadir / "ibdata1").write_text("tables")
    with open(work / "built.log", "a") as log:
        log.write(f"{os.getpid()}\\n")
    while sys.argv[2] == "hold" and not (work / "release").exists():
        time.sleep(0.01)
    (datadir / "neutron" / "db.opt").write_text("default-character-set=utf8mb4")
print(entry("k", build))
"""


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "kuberaven" / "openstack-db"


def fake_build(content: str, calls: list[Path] | None = None):  # type: ignore[no-untyped-def]
    def build(datadir: Path) -> None:
        if calls is not None:
            calls.append(datadir)
        (datadir / "neutron").mkdir(parents=True)
        (datadir / "ibdata1").write_text(content)
        (datadir / "neutron" / "db.opt").write_text("default-character-set=utf8mb4\n")

    return build


def directories(cache_home: Path) -> list[str]:
    """The cache's directories: entries (named after a key) and builds (BUILDING_PREFIX)."""
    return sorted(p.name for p in cache_home.iterdir() if p.is_dir())


@pytest.fixture
def builders(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """The test's builder processes, killed if the test ends before they do."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def start_builder(tmp_path: Path, builders: list[subprocess.Popen[str]], hold: bool) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", BUILDER, str(tmp_path), "hold" if hold else "go"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    builders.append(process)
    return process


def built_by(tmp_path: Path) -> list[int]:
    log = tmp_path / "built.log"
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def until(condition, what: str, process: subprocess.Popen[str]) -> None:  # type: ignore[no-untyped-def]
    """Until ``condition()`` holds, while ``process`` (that makes it hold) runs."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert process.poll() is None, f"{what}: the process ended: {process.communicate()}"
        assert time.monotonic() < deadline, f"not within {WAIT:.0f} s: {what}"
        time.sleep(0.01)


def test_an_entry_is_built_once_and_found_by_its_key_and_restored_whole(tmp_path: Path, cache_home: Path) -> None:
    calls: list[Path] = []
    made = entry("k1", fake_build("tables", calls))
    assert made == cache_home / "k1"
    assert entry("k1", fake_build("other", calls)) == made  # found: not built again
    assert len(calls) == 1 and calls[0].parent.name.startswith(BUILDING_PREFIX)  # built beside, not in place
    restore(made, tmp_path / "env" / "mysql")
    assert (tmp_path / "env" / "mysql" / "ibdata1").read_text() == "tables"
    assert (tmp_path / "env" / "mysql" / "neutron" / "db.opt").is_file()
    entry("k2", fake_build("newer packages", calls))  # another key: other packages, its own entry
    assert directories(cache_home) == ["k1", "k2"]  # no build directory left behind
    assert (cache_home / "k1" / "ibdata1").read_text() == "tables"


def test_a_failed_build_publishes_nothing_and_the_next_one_builds(cache_home: Path) -> None:
    def failing(datadir: Path) -> None:
        (datadir / "neutron").mkdir(parents=True)
        raise RuntimeError("neutron-db-manage failed")

    with pytest.raises(RuntimeError, match="neutron-db-manage failed"):
        entry("k", failing)
    assert directories(cache_home) == []
    assert (entry("k", fake_build("tables")) / "ibdata1").read_text() == "tables"


def test_two_processes_at_once_build_one_entry_and_both_use_it(
    tmp_path: Path, cache_home: Path, builders: list[subprocess.Popen[str]]
) -> None:
    first = start_builder(tmp_path, builders, hold=True)
    until(lambda: built_by(tmp_path) == [first.pid], "the first process builds", first)
    second = start_builder(tmp_path, builders, hold=True)
    until(lambda: waiting_for_a_lock(second.pid), "the second process waits for the first's build", second)
    (tmp_path / "release").touch()
    outputs = [p.communicate(timeout=WAIT) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    assert [out.strip() for out, _ in outputs] == [str(cache_home / "k")] * 2
    assert built_by(tmp_path) == [first.pid]  # the second reused the first's entry
    assert directories(cache_home) == ["k"]
    assert (cache_home / "k" / "ibdata1").read_text() == "tables"
    assert (cache_home / "k" / "neutron" / "db.opt").is_file()


def test_a_builder_that_dies_leaves_no_entry_and_the_next_one_builds_and_cleans_up(
    tmp_path: Path, cache_home: Path, builders: list[subprocess.Popen[str]]
) -> None:
    dying = start_builder(tmp_path, builders, hold=True)
    until(lambda: built_by(tmp_path) == [dying.pid], "the first process builds", dying)
    dying.send_signal(signal.SIGKILL)
    dying.wait(WAIT)
    left = directories(cache_home)  # nothing under the key: a half-built entry is never found
    assert len(left) == 1 and left[0].startswith(BUILDING_PREFIX)
    assert entry("k", fake_build("tables")) == cache_home / "k"  # the lock died with its holder
    assert directories(cache_home) == ["k"]  # the abandoned build directory removed
    assert (cache_home / "k" / "ibdata1").read_text() == "tables"


def test_the_key_is_the_packages_versions_or_none_without_dpkg(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("dpkg-query") is not None:
        key = cache_key()
        assert key is not None and len(key) == 16 and key == cache_key()
        monkeypatch.setattr(openstack_schema, "CACHE_FORMAT", "another")
        assert cache_key() != key
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cache_key() is None


def test_commands_run_together_and_each_failure_is_named(tmp_path: Path) -> None:
    marks = [tmp_path / "a", tmp_path / "b"]
    run_together([(f"touch {m.name}", ["touch", str(m)]) for m in marks])
    assert all(m.exists() for m in marks)
    with pytest.raises(RuntimeError) as raised:
        run_together(
            [
                ("neutron-db-manage", ["sh", "-c", "echo no such table; exit 3"]),
                ("fine", ["true"]),
                ("octavia-db-manage", ["sh", "-c", "echo locked; exit 1"]),
            ]
        )
    message = str(raised.value)
    assert "neutron-db-manage failed: no such table" in message
    assert "octavia-db-manage failed: locked" in message
    assert "fine" not in message
