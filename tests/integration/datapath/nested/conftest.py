"""Nested pods' tests: a data path of their own, with VMs (`testenv up --openstack --nested 2`), so that the
rest of the data path's tests do not pay for the VMs' pools (each namespace would queue two more refills)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.datapath import LEAN_POOLS, DataPath, environment

NESTED_VMS = 2  # nested nodes: VMs whose pods are subports of their trunks (test_nested.py)


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    """tests/datapath.py's environment() with NESTED_VMS VMs; the parent package's fixtures use it here."""
    with environment(nested=NESTED_VMS, pools=LEAN_POOLS) as made:
        yield made
