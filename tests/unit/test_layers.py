"""Layers point down, and no import cycle (read from the source's AST, nothing imported).

Cycles count every import, also those inside functions: a lazy import that
closes a circle (model/base.py importing model/database.py inside a method)
still ties the two modules together.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2] / "src"
ARCHITECTURE = Path(__file__).parents[2] / "docs" / "architecture.md"
PACKAGE = "kuberaven"
# What each folder may import besides itself: docs/architecture.md's "Folders and layers" table.
# The watch machinery and the process runtime never import each other; only the process's own
# modules (cli, daemon, settings, plugins) join everything.
BASE = {"kube", "model", "metrics", "component_status"}
MAY_IMPORT: dict[str, set[str]] = {
    "kube": {"metrics"},
    "model": {"metrics"},
    "watch": BASE,
    "runtime": BASE,
    "events": BASE,
    "provisioning": BASE | {"watch"},
    "inventory": BASE | {"watch", "events", "provisioning"},
    "network": BASE | {"watch"},
    "cni": BASE | {"network"},
    "node": BASE | {"watch", "network", "cni"},
    "testing": BASE | {"watch", "network", "cni"},
    "web": BASE | {"events", "network", "runtime"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(module: str, module_level_only: bool) -> Iterator[tuple[str, int]]:
    """(imported kuberaven module, line) for every import in ``module``; ``from X import y`` names X.y when a module."""
    tree = ast.parse(MODULES[module].read_text())
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            if target.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                yield (f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target), node.lineno


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_walk_sees_the_modules() -> None:
    assert {"kuberaven.model.database", "kuberaven.kube.client", "kuberaven.daemon"} <= set(MODULES)
    assert any(t == "kuberaven.metrics" for t, _ in imports("kuberaven.kube.reflector", True))


def test_every_folder_is_in_the_table() -> None:
    folders = {layer(m) for m, path in MODULES.items() if path.parent != ROOT / PACKAGE}
    assert folders == set(MAY_IMPORT)


def documented_layers() -> dict[str, set[str]]:
    """docs/architecture.md's "Folders and layers" table: folder -> the folders and modules it may import."""
    rows = re.findall(r"^\| (`[^|]*`) \| [^|]* \| ([^|]*) \|$", ARCHITECTURE.read_text(), re.MULTILINE)
    table: dict[str, set[str]] = {}
    for folders, allowed in rows:
        names = {re.sub(r"/$|\.py$", "", name) for name in re.findall(r"`([^`]+)`", allowed)}
        for folder in re.findall(r"`([a-z_]+)/`", folders):
            table[folder] = names
    return table


def test_the_architecture_doc_states_the_layers_this_test_checks() -> None:
    assert documented_layers() == MAY_IMPORT


@pytest.mark.parametrize("module", [m for m in MODULES if layer(m) in MAY_IMPORT])
def test_a_folder_imports_only_the_layers_below_it(module: str) -> None:
    allowed = MAY_IMPORT[layer(module)] | {layer(module)}
    upward = [
        f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}"
        for target, line in imports(module, module_level_only=False)
        if layer(target) not in allowed
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle() -> None:
    graph = {m: {t for t, _ in imports(m, module_level_only=False) if t in MODULES and t != m} for m in MODULES}
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_network_package_docstring_lists_its_modules() -> None:
    """network/__init__.py's table of contents: one line per module and subpackage, each starting with its name."""
    package = ROOT / PACKAGE / "network"
    present = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    present |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()}
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    listed = {line.split()[0] for line in docstring.splitlines()[2:] if line.strip()}
    assert listed == present
