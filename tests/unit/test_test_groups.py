"""The suite's own assumption: `make test`'s `--dist loadgroup` runs a group's tests in one worker.

The OVN data path's tests share one environment per worker (tests/conftest.py's `datapath`), and the
CNI's tests the host's links: if xdist stopped honouring ``xdist_group`` (it did, silently, with
pytest 9.2), each worker would start its own environment and the host-network tests would race.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("together")

@pytest.mark.parametrize("n", range(6))
def test_where(n):
    with open("workers.txt", "a") as record:
        record.write(os.environ["PYTEST_XDIST_WORKER"] + " ")
"""

UNGROUPED = """
def test_elsewhere():
    pass
"""


def test_a_groups_tests_run_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(GROUPED)
    (tmp_path / "test_b.py").write_text(GROUPED)
    (tmp_path / "test_c.py").write_text(UNGROUPED)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers = set((tmp_path / "workers.txt").read_text().split())
    assert len(workers) == 1, f"the group ran on {sorted(workers)}: --dist loadgroup does not group"
