"""Fixtures of the unit tests that need a real server of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven.model import Database
from tests.ovn_nb import nb_server


@pytest.fixture
def nb(tmp_path: Path) -> Iterator[str]:
    """A real OVN NB ovsdb-server (alone) on a unix socket: its connection string."""
    with nb_server(tmp_path) as remote:
        yield remote


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    """A fresh SQLite database with the model's tables (the port pools' tests: network/pools.py)."""
    made = Database(f"sqlite:///{tmp_path}/k.db")
    made.prepare()
    yield made
    made.dispose()
