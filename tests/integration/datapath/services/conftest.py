"""The Services' and traffic tests' data path: no VMs, and pools of a port or two (tests/datapath.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.datapath import SERVICE_TESTS_POOLS, DataPath, environment


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    with environment(nested=0, pools=SERVICE_TESTS_POOLS) as made:
        yield made
