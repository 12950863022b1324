"""tests/conftest.py's hooks: a test skipped for want of root or of a package `make deps` installs fails the run
under --require-all (what `make test` passes), and a run without it says loudly, at its end, what did not run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = """
import pytest

def test_needs_root():
    pytest.skip("the OVN data path needs root (network namespaces, Open vSwitch)")

@pytest.mark.skipif(True, reason="Debian packages openvswitch-switch, ovn-central absent")
def test_needs_a_package():
    pass

def test_skipped_for_another_reason():
    pytest.skip("not this backend")

def test_runs():
    pass
"""


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A pytest run of TESTS in a directory of its own whose conftest.py is tests/conftest.py's hooks."""
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_addoption, pytest_runtest_makereport, pytest_terminal_summary\n"
    )
    (tmp_path / "test_sample.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir", str(tmp_path)]
    command += ["--basetemp", str(tmp_path / "basetemp"), "-rfE", *args, str(tmp_path)]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_without_require_all_the_skips_pass_and_are_named_at_the_end(tmp_path: Path) -> None:
    run = _pytest(tmp_path)
    assert run.returncode == 0, run.stdout
    assert "TESTS NOT RUN: this machine lacks what they need" in run.stdout
    summary = run.stdout.split("TESTS NOT RUN")[-1]
    assert "1 not run: the OVN data path needs root" in summary
    assert "1 not run: Debian packages openvswitch-switch, ovn-central absent" in summary
    assert "not this backend" not in summary, "a skip for another reason is not the machine's"
    assert "1 passed, 3 skipped" in run.stdout


def test_with_require_all_a_missing_prerequisite_fails_the_run(tmp_path: Path) -> None:
    run = _pytest(tmp_path, "--require-all")
    assert run.returncode == 1, run.stdout
    assert "FAILED test_sample.py::test_needs_root" in run.stdout
    assert "ERROR test_sample.py::test_needs_a_package" in run.stdout  # a skipif mark: in the setup
    assert "1 failed, 1 passed, 1 skipped, 1 error" in run.stdout
