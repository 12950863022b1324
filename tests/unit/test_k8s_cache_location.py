"""`kuberaven testenv build` and `up` with KUBERAVEN_K8S_CACHE where no directory can be (kuberaven.testing.k8s_build):
one line naming the variable and the problem, exit 2, and nothing written anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

USAGE_EXIT = 2
COMMANDS = [["build"], ["up", "--nodes", "1"]]


def run_testenv(tmp_path: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command, in a process of its own, with the cache at ``cache`` and temporary files (`up`'s
    directory when given none) under ``tmp_path``/tmp."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "KUBERAVEN_K8S_CACHE": str(cache),
        "TMPDIR": str(tmp_path / "tmp"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    env.pop("KUBEBUILDER_ASSETS", None)
    code = "import sys; from kuberaven.cli import main; sys.argv[0] = 'kuberaven'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "testenv", *args], capture_output=True, text=True, env=env, timeout=60
    )


def everything_under(root: Path) -> set[Path]:
    return set(root.rglob("*"))


@pytest.mark.parametrize("args", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_cache_that_is_a_file_is_one_line_and_exit_2_and_leaves_nothing(tmp_path: Path, args: list[str]) -> None:
    cache = tmp_path / "k8s-v1.20.2.lock"  # a name that is easy to mistake for the cache: the lock beside it
    cache.write_text("")
    before = everything_under(tmp_path) | {tmp_path / "tmp"}
    done = run_testenv(tmp_path, cache, *args)
    assert done.returncode == USAGE_EXIT, done.stderr
    assert done.stderr.splitlines() == [
        f"error: KUBERAVEN_K8S_CACHE={cache} is a file, not a directory: point KUBERAVEN_K8S_CACHE at a directory"
    ]
    assert everything_under(tmp_path) == before  # no lock file beside it, no environment directory
    assert cache.read_text() == ""


def test_a_cache_under_a_file_names_that_file(tmp_path: Path) -> None:
    blocking = tmp_path / "a-file"
    blocking.write_text("")
    before = everything_under(tmp_path) | {tmp_path / "tmp"}
    done = run_testenv(tmp_path, blocking / "k8s", "build")
    assert done.returncode == USAGE_EXIT, done.stderr
    assert done.stderr.splitlines() == [
        f"error: KUBERAVEN_K8S_CACHE={blocking / 'k8s'} lies under the file {blocking}, not a directory: "
        "point KUBERAVEN_K8S_CACHE at a directory"
    ]
    assert everything_under(tmp_path) == before
