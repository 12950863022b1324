"""The pools' and binding tests' data path: no VMs, pools of 5 to 15 ports (tests/datapath.py), and gone pods'
pairs parked for PARK_FOR seconds, not the agent's 60: the test of the sweep waits for it, and the others hand a
pair over within a few seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.datapath import POOL_TESTS_POOLS, DataPath, environment

PARK_FOR = 30.0


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    with environment(nested=0, pools=POOL_TESTS_POOLS, park_for=PARK_FOR) as made:
        yield made
