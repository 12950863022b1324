"""YAML files of model documents (model/): text ──► located mappings, before any row is touched.

    kuberaven apply -f FILE, POST /api/v1/apply ──► parse_documents() ──► [Located(document, line)]
        ──► applying.py / documents.py make rows of them

The parser is PyYAML's safe one (libyaml's when present) made strict:
each top-level mapping remembers its line (errors name FILE:LINE), a key
given twice is refused instead of silently keeping the last, and aliases
may not expand a document beyond MAX_ALIAS_EXPANSION nodes ("billion
laughs" is refused before anything is constructed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from .errors import ModelError


@dataclass
class Located:
    document: dict[str, Any]
    line: int


# YAML aliases may repeat a node many times over ("billion laughs": 448 bytes that expand to 10^9
# nodes). Aliases may add at most this many nodes to a document beyond the ones written out.
MAX_ALIAS_EXPANSION = 100_000


# libyaml's parser when PyYAML was built with it (Debian's is): ~10x faster on large files.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _LineLoader(_SafeLoader):  # type: ignore[misc,valid-type]  # the C loader when present
    """A safe loader that remembers where each top-level document starts, and refuses alias bombs."""

    def construct_document(self, node: yaml.Node) -> Any:
        distinct, expanded = expansion(node)
        if expanded - distinct > MAX_ALIAS_EXPANSION:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"its aliases expand to {expanded:,} nodes (at most {MAX_ALIAS_EXPANSION:,} more "
                f"than the {distinct:,} written out)",
                node.start_mark,
            )
        return super().construct_document(node)


def expansion(root: yaml.Node) -> tuple[int, int]:
    """(nodes written out, nodes once every alias is expanded) of a composed document, in O(nodes written)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # iterative post-order: a deep document must not exhaust the Python stack
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return len(sizes), sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


class DuplicateKey(yaml.MarkedYAMLError):
    """A mapping gives one key twice: YAML would keep the last one silently."""


def _refuse_duplicate_keys(node: yaml.MappingNode) -> None:
    seen: dict[tuple[str, str], yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue  # "<<" merges may override on purpose
        key = (key_node.tag, key_node.value)
        if key in seen:
            first = seen[key].start_mark.line + 1
            raise DuplicateKey(
                problem=f"key {key_node.value!r} given twice (first at line {first})", problem_mark=key_node.start_mark
            )
        seen[key] = key_node


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[str, Any]:
    _refuse_duplicate_keys(node)
    mapping: dict[str, Any] = loader.construct_mapping(node, deep=True)  # type: ignore[assignment]  # keys checked later
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class DocumentError(ModelError):
    """A file of documents is invalid; ``line`` says where."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.line = line
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")


def parse_documents(text: str, source: str = "<input>") -> list[Located]:
    """YAML (one list, or several ``---`` documents) → located mappings."""
    try:
        loaded = [d for d in yaml.load_all(text, Loader=_LineLoader) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        # One line: the mark's "in <unicode string>, line N" is the FILE:LINE prefix already.
        said = "; ".join(p for p in (getattr(error, "context", None), getattr(error, "problem", None)) if p)
        message = said if isinstance(error, DuplicateKey) else f"invalid YAML: {said or str(error).splitlines()[0]}"
        raise DocumentError(source, mark.line + 1 if mark else None, message) from None
    items: list[Any] = []
    for document in loaded:
        items.extend(document if isinstance(document, list) else [document])
    located = []
    for item in items:
        if not isinstance(item, dict):
            raise DocumentError(source, None, f"each model object must be a mapping, not {item!r}")
        line = item.pop("__line__")
        _strip_lines(item)
        located.append(Located(item, line))
    return located


def _strip_lines(value: Any) -> None:
    if isinstance(value, dict):
        value.pop("__line__", None)
        for inner in value.values():
            _strip_lines(inner)
    elif isinstance(value, list):
        for inner in value:
            _strip_lines(inner)
