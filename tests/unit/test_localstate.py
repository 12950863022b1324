"""One database and one cluster wherever the user stands (localstate.py): which database a command uses."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kuberaven.localstate import (
    DAEMON_FILE,
    choose_database,
    env_exports,
    forget_daemon,
    local_env_dir,
    record_daemon,
    running_daemon,
)
from kuberaven.model.database import default_url


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("KUBERAVEN_DB", raising=False)
    local_env_dir().mkdir(parents=True)
    return tmp_path / "data"


def test_the_default_is_per_user_not_per_directory(data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = default_url()
    monkeypatch.chdir(data_home.parent)
    assert default_url() == first == f"sqlite:///{data_home}/kuberaven/kuberaven.db"
    assert (data_home / "kuberaven").is_dir()
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(data_home.parent / "home"))
    assert default_url() == f"sqlite:///{data_home.parent}/home/.local/share/kuberaven/kuberaven.db"


def test_with_no_daemon_the_default_is_used_and_said(data_home: Path) -> None:
    url, notice = choose_database(None)
    assert url == default_url()
    assert notice == f"database: {url} (the default; no local `kuberaven run` is going)"


def test_a_named_database_with_no_daemon_needs_no_comment(data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_database("sqlite:////tmp/x.db") == ("sqlite:////tmp/x.db", None)
    monkeypatch.setenv("KUBERAVEN_DB", "sqlite:////tmp/y.db")
    assert choose_database(None) == ("sqlite:////tmp/y.db", None)
    assert choose_database("sqlite:////tmp/x.db") == ("sqlite:////tmp/x.db", None)  # --db wins


def test_the_running_daemons_database_is_the_default(data_home: Path) -> None:
    record_daemon(local_env_dir(), "postgresql://k:secret@db/k", "127.0.0.1:8080")
    assert oct((local_env_dir() / DAEMON_FILE).stat().st_mode & 0o777) == "0o600"  # it may hold a password
    assert choose_database(None) == ("postgresql://k:secret@db/k", None)
    url, notice = choose_database("sqlite:////tmp/other.db")
    assert url == "sqlite:////tmp/other.db"
    assert notice == (
        f"database: sqlite:////tmp/other.db, not the one the running `kuberaven run` (pid {os.getpid()}) uses: "
        "postgresql://k:***@db/k"
    )
    forget_daemon(local_env_dir())
    assert running_daemon() is None


def test_a_dead_daemons_record_is_ignored_and_another_daemons_is_not_removed(data_home: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    (local_env_dir() / DAEMON_FILE).write_text(f'{{"pid": {gone.pid}, "db": "sqlite:////x.db", "listen": "a:1"}}')
    assert running_daemon() is None
    assert choose_database(None)[0] == default_url()
    forget_daemon(local_env_dir())  # not ours: left alone
    assert (local_env_dir() / DAEMON_FILE).exists()
    (local_env_dir() / DAEMON_FILE).write_text("not json")
    assert running_daemon() is None


def test_env_exports_are_evaluable_and_keep_only_kubeconfig() -> None:
    env = {"kubeconfig": "/tmp/a dir/kubeconfig", "kafka_bootstrap": "127.0.0.1:9092", "database_url": None}
    text = env_exports(env)
    assert text.splitlines() == ["export KUBECONFIG='/tmp/a dir/kubeconfig'", "# Kafka-protocol broker: 127.0.0.1:9092"]
    shown = subprocess.run(
        ["sh", "-c", 'eval "$1"; printf %s "$KUBECONFIG"', "sh", text], capture_output=True, text=True, check=True
    )
    assert shown.stdout == "/tmp/a dir/kubeconfig"
