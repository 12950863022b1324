"""The Services' and traffic tests' data path: no VMs, and pools of a port or two (tests/datapath.py's LEAN_POOLS)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.datapath import LEAN_POOLS, DataPath, environment


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    with environment(nested=0, pools=LEAN_POOLS) as made:
        yield made
