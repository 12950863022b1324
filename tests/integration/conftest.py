"""Fixtures of the integration tests beyond the session's shared ones (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven.testing.broker import Broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A Kafka-protocol broker of the test's own, for tests that stop it or must not share its topics' state."""
    server = Broker(tmp_path / "broker")
    server.start()
    try:
        yield server
    finally:
        server.stop()
