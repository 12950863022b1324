"""Decode-time projection (kube/, inside the Reflector): only the fields consumers declared.

    LIST page / WATCH frame (bytes) ──msgspec, typed by Projection──► slim dict ──► informer

client-go's ``SetTransform`` runs after a whole object was decoded; here the
transform *is* the decoder: msgspec decodes into nested TypedDicts built from
the declared field paths and never allocates what is not in them (a pod's
managed fields, env, volumes). A 4 KB pod decodes faster and into a tenth of
the memory, and whole objects never exist in the process.

Paths are dotted, with ``[]`` for "each element of a list":
``metadata.labels``, ``spec.containers[].image``, ``status.podIPs[].ip``.
A path's last name keeps its whole value. The reflector always adds what it
needs itself (:data:`IDENTITY`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any, TypedDict

import msgspec

# What every object must carry: the reflector keys, diffs and resumes with these.
IDENTITY = ("apiVersion", "kind", "metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion")
LIST_SUFFIX = "[]"
_names = itertools.count()

# A tree of declared paths: name → subtree, or None to keep the whole value.
Tree = dict[str, "Tree | None"]


class Projection:
    """The union of declared field paths, as msgspec decoders for list pages and watch frames."""

    def __init__(self, paths: Iterable[str] | None) -> None:
        """``paths=None`` keeps whole objects (a consumer that wants everything)."""
        self.paths: frozenset[str] | None = None if paths is None else frozenset((*IDENTITY, *paths))
        self.tree: Tree | None = None if self.paths is None else _tree(self.paths)
        item: Any = dict[str, Any] if self.tree is None else _typed(self.tree)
        # Built at run time from the declared paths, so the functional form (not class syntax).
        page = TypedDict("page", {"metadata": dict[str, Any], "items": list[item] | None}, total=False)  # type: ignore[misc]  # noqa: UP013
        frame = TypedDict("frame", {"type": str, "object": item})  # type: ignore[misc]  # noqa: UP013
        self.page = msgspec.json.Decoder(page)
        self.frame = msgspec.json.Decoder(frame)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` (decoded by a wider projection) cut down to these paths: what one consumer of many keeps."""
        return obj if self.tree is None else _cut(obj, self.tree)

    def narrower_than(self, other: Projection) -> bool:
        """Whether objects decoded by ``other`` carry fields this one does not keep (then apply() cuts them)."""
        return self.paths is not None and (other.paths is None or self.paths < other.paths)

    def union(self, other: Projection) -> Projection:
        if self.paths is None or other.paths is None:
            return Projection(None)
        return Projection(self.paths | other.paths)


def _tree(paths: Iterable[str]) -> Tree:
    tree: Tree = {}
    for path in sorted(paths, key=len):
        node: Tree | None = tree
        parts = path.split(".")
        for index, part in enumerate(parts):
            if node is None:
                break  # an ancestor is kept whole already
            last = index == len(parts) - 1
            if last:
                node[part] = None
            else:
                node = node.setdefault(part, {})
    return tree


def _cut(value: Any, tree: Tree) -> Any:
    if isinstance(value, list):
        return [_cut(item, tree) for item in value]
    if not isinstance(value, dict):
        return value
    kept = {}
    for part, sub in tree.items():
        name = part.removesuffix(LIST_SUFFIX)
        if name in value:
            kept[name] = value[name] if sub is None or value[name] is None else _cut(value[name], sub)
    return kept


def _typed(tree: Tree) -> Any:
    """Nested TypedDicts (total=False: any field may be absent); unknown fields are skipped unallocated."""
    fields: dict[str, Any] = {}
    for part, sub in tree.items():
        name, is_list = (part[: -len(LIST_SUFFIX)], True) if part.endswith(LIST_SUFFIX) else (part, False)
        # null is valid JSON for any field (e.g. "labels": null); absent fields are simply missing.
        value: Any = Any if sub is None else _typed(sub) | None
        fields[name] = list[value] | None if is_list else value
    return TypedDict(f"Projected{next(_names)}", fields, total=False)  # type: ignore[misc, operator]
