"""The measured code's .pyc files written before a start-up bench runs it (cli_bench.py, startup_bench.py).

An installed kuberaven has its bytecode: pip compiles every module when it
installs the package, and Python writes the .pyc files of a source checkout
on its first import. With PYTHONDONTWRITEBYTECODE set in the environment
(as it is in some development and CI shells) nothing writes them for an
editable checkout, and every process then compiles each of kuberaven's
modules from its source again: about 0.15 s of a daemon's start and a
tenth of its CPU time by /readyz on this machine (docs/benchmarks.md,
issue 26, sixth round), a cost no user's installation pays. The benches
compile every measured tree first (the code under test and any --before
tree alike), so that both sides start as installed code does, whatever the
shell sets.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path

import kuberaven

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"  # the example plugins the daemon loads


def compile_trees(before: str | None = None) -> None:
    """Write the .pyc files of kuberaven, the example plugins and every --before source directory."""
    trees = [Path(kuberaven.__file__).parent, EXAMPLES, *(Path(p) for p in (before or "").split(os.pathsep) if p)]
    for tree in trees:
        if tree.is_dir() and not compileall.compile_dir(tree, quiet=1):
            raise SystemExit(f"cannot compile {tree}: a module does not parse")
