"""The lint settings in pyproject.toml cover what `make lint` is meant to check (a new benchmark included)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]


def mypy_settings() -> dict[str, Any]:
    settings: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return settings


def test_mypy_checks_the_tests_and_benchmarks_with_every_function_annotated() -> None:
    mypy = mypy_settings()
    assert set(mypy["files"]) == {"src", "tests", "bench"}
    assert mypy["disallow_untyped_defs"] and mypy["check_untyped_defs"]


def test_every_benchmark_module_is_held_to_the_tests_rules() -> None:
    # bench/'s scripts are top-level modules to mypy (no package), so the override names each one.
    for_tests = [o for o in mypy_settings()["overrides"] if "tests.*" in o["module"]]
    assert len(for_tests) == 1, "one override for tests and benchmarks"
    assert for_tests[0]["warn_unused_ignores"]
    modules = set(for_tests[0]["module"])
    benchmarks = {path.stem for path in (ROOT / "bench").glob("*.py")}
    assert benchmarks, "bench/ holds the benchmarks"
    assert benchmarks <= modules, f"add {sorted(benchmarks - modules)} to the override in pyproject.toml"
    assert modules - {"tests.*"} <= benchmarks, f"{sorted(modules - {'tests.*'} - benchmarks)} are gone from bench/"
