"""The local OpenStack's cached database directory (kuberaven.testing.openstack_schema): stored whole, found
by key, kept when two processes store at once; migrations run together and each failure is named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kuberaven.testing import openstack_schema
from kuberaven.testing.openstack_schema import cache_key, cached, restore, run_together, store


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "kuberaven" / "openstack-db"


def datadir(root: Path, content: str) -> Path:
    (root / "mysql" / "neutron").mkdir(parents=True)
    (root / "mysql" / "ibdata1").write_text(content)
    (root / "mysql" / "neutron" / "db.opt").write_text("default-character-set=utf8mb4\n")
    return root / "mysql"


def test_a_stored_directory_is_found_by_its_key_and_restored_whole(tmp_path: Path, cache_home: Path) -> None:
    assert cached("k1") is None
    store("k1", datadir(tmp_path / "made", "tables"))
    entry = cached("k1")
    assert entry == cache_home / "k1"
    restore(entry, tmp_path / "env" / "mysql")
    assert (tmp_path / "env" / "mysql" / "ibdata1").read_text() == "tables"
    assert (tmp_path / "env" / "mysql" / "neutron" / "db.opt").is_file()
    assert cached("k2") is None  # another key: other packages, nothing found
    assert [p.name for p in cache_home.iterdir()] == ["k1"]  # no partial copy left behind


def test_a_second_store_of_a_key_keeps_the_first(tmp_path: Path, cache_home: Path) -> None:
    store("k", datadir(tmp_path / "first", "first"))
    store("k", datadir(tmp_path / "second", "second"))
    assert (cache_home / "k" / "ibdata1").read_text() == "first"
    assert [p.name for p in cache_home.iterdir()] == ["k"]


def test_without_a_key_nothing_is_cached(tmp_path: Path, cache_home: Path) -> None:
    store(None, datadir(tmp_path / "made", "tables"))
    assert cached(None) is None
    assert not cache_home.exists()


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
