"""The pools' and binding tests' data path: no VMs, and pools of 5 to 15 ports (tests/datapath.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.datapath import POOL_TESTS_POOLS, DataPath, environment


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    with environment(nested=0, pools=POOL_TESTS_POOLS) as made:
        yield made
