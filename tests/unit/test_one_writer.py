"""One record, one writer (read from the source's AST, nothing imported): only the pods reconciler writes a pod's
VIF annotation, its "Pod" translation row and its port's security groups in the backend.

The rest of the translation computes what they should be (NetworkPolicies' and source ranges' groups, the status
the cloud reports) and queues the pod: a second writer would agree with the first only by convention, and the last
one to write would win. The garbage collection (translator.py's forget_all_but) drops the rows of objects no
informer knows: it writes no pod's row, it deletes the rows of pods that are gone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from kuberaven.network.vif import VIF_ANNOTATION
from tests.unit.test_layers import MODULES

# The pods reconciler: its module and the module of its writes to pods (the VIF, Events).
POD_WRITERS = {"kuberaven.network.reconcilers.pods", "kuberaven.network.reconcilers.pod_vif"}
# TranslationStore's writes whose first argument is the kind of row, and the one that deletes a pod's row in the
# transaction that frees its pooled port.
ROW_WRITES = {"save", "update_state", "forget", "delete_rows"}
RELEASES = "release_port"
POD_KIND = "Pod"
SETS_GROUPS = "set_port_security_groups"
WRITES_ANNOTATIONS = {"annotate", "_patch_metadata"}


def _called(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def _pod_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to the string "Pod" (a kind given by name)."""
    return {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value == POD_KIND
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _is_pod(node: ast.expr, names: set[str]) -> bool:
    return (isinstance(node, ast.Constant) and node.value == POD_KIND) or (
        isinstance(node, ast.Name) and node.id in names
    )


def _mentions_vif(node: ast.Call) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id == "VIF_ANNOTATION")
        or (isinstance(n, ast.Attribute) and n.attr == "VIF_ANNOTATION")
        or (isinstance(n, ast.Constant) and n.value == VIF_ANNOTATION)
        for argument in [*node.args, *(k.value for k in node.keywords)]
        for n in ast.walk(argument)
    )


def _invocations(node: ast.Call) -> Iterator[tuple[str, list[ast.expr]]]:
    """What a call runs, with its arguments: itself, and a function it is handed to run (``blocking(f, *args)``,
    ``run_in_executor(executor, f, *args)``)."""
    yield _called(node), node.args
    for index, argument in enumerate(node.args):
        if isinstance(argument, ast.Attribute):
            yield argument.attr, node.args[index + 1 :]


def writes(module: str) -> Iterator[tuple[str, int]]:
    """(what, line) for each write of a pod's VIF, row or port groups in ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    names = _pod_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) == 5 and _is_pod(node.elts[0], names):
            yield "a Pod row (kind, uid, namespace, name, state)", node.lineno
        if not isinstance(node, ast.Call):
            continue
        for called, arguments in _invocations(node):
            if called in ROW_WRITES and arguments and _is_pod(arguments[0], names):
                yield f"{called}() of a Pod row", node.lineno
            elif called == RELEASES:
                yield f"{called}(): deletes the Pod row", node.lineno
            elif called == SETS_GROUPS:
                yield f"{called}() of a pod's port", node.lineno
        if _called(node) in WRITES_ANNOTATIONS and _mentions_vif(node):
            yield f"{_called(node)}() of the VIF annotation", node.lineno


def test_the_check_sees_the_pods_reconcilers_writes() -> None:
    found = {what.split("(")[0] for module in POD_WRITERS for what, _ in writes(module)}
    assert {"update_state", "forget", RELEASES, SETS_GROUPS, "annotate", "a Pod row "} <= found, found


def test_only_the_pods_reconciler_writes_a_pods_vif_row_and_port_groups() -> None:
    others = {module: found for module in sorted(set(MODULES) - POD_WRITERS) if (found := list(writes(module)))}
    assert others == {}, "these write what only the pods reconciler writes"


def test_the_vif_annotations_name_is_written_out_once() -> None:
    """Everyone names it by VIF_ANNOTATION (vif.py), so the check above sees every use."""
    spelled = [
        module
        for module, path in MODULES.items()
        if any(isinstance(n, ast.Constant) and n.value == VIF_ANNOTATION for n in ast.walk(ast.parse(path.read_text())))
    ]
    assert spelled == ["kuberaven.network.vif"]
