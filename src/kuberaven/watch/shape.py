"""The store's fixed-shape encoding (watch/, inside store.py): a slim object as msgpack arrays, not maps.

    Store._put(slim dict) ──encode──► bytes (kept, one per object) ──decode──► a fresh dict per read

A store keeps one encoded slim object per existing object for as long as it
exists (a pod store: one per pod of the cluster). Every object of a store has
the same declared fields (the union of its listers' projections), so the
names need not be kept with each: a dict of the projection's tree is encoded
as an array ``[present, value, value, …]``, its values in the tree's (sorted)
order and ``present`` a bit mask of the fields the dict has (an absent field
is not the same as a field that is null). Lists of such dicts (``[]`` paths)
are arrays of them; a leaf (a path's last name) keeps its whole value as it
is, maps included (labels, the kept annotations). At 30,000 pods the map keys
were about 150 of the 490 bytes a pod the store kept (docs/benchmarks.md).

What does not fit the tree (a dict where it names a list, a field it does
not name: an object read by a wider projection than the store's) is encoded
as the map it is; decode tells the two apart by the top level's type (a
slim object is a dict). So any JSON value round-trips exactly.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..kube.projection import LIST_SUFFIX, Tree

# Plain msgpack both ways: the values are JSON values, which msgpack round-trips exactly.
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode

# One field of a dict node: its name, its bit in the mask of present fields, whether it is a list of dicts, and the
# node of its dicts (None: a leaf).
Field = tuple[str, int, bool, "Node | None"]
Node = tuple[Field, ...]
MAX_FIELDS = 64  # a mask of more bits would not be one of msgpack's integers: such a tree is kept as maps


class _Irregular(Exception):
    """The value is not shaped as the tree says: encoded as the map it is."""


def node_of(tree: Tree) -> Node | None:
    """The fields of a projection tree's dict, in a fixed (sorted) order; None if a dict has too many."""
    fields: list[Field] = []
    for index, part in enumerate(sorted(tree)):
        sub, node = tree[part], None
        if sub is not None and (node := node_of(sub)) is None:
            return None
        fields.append((part.removesuffix(LIST_SUFFIX), 1 << index, part.endswith(LIST_SUFFIX), node))
    return tuple(fields) if len(fields) < MAX_FIELDS else None


class Shape:
    """Encodes and decodes the slim objects of one projection tree (None: no tree, plain maps)."""

    def __init__(self, tree: Tree | None) -> None:
        self.node = None if tree is None else node_of(tree)

    def encode(self, obj: dict[str, Any]) -> bytes:
        if self.node is not None:
            try:
                return _encode(_pack(obj, self.node))
            except _Irregular:
                pass
        return _encode(obj)

    def decode(self, blob: bytes) -> dict[str, Any]:
        value = _decode(blob)
        if isinstance(value, list):
            assert self.node is not None, "an array is only ever encoded with a node"
            return _unpack(value, self.node)
        return value  # type: ignore[no-any-return]  # a map: the slim object as it was given


def _pack(obj: Any, node: Node) -> list[Any]:
    if not isinstance(obj, dict):
        raise _Irregular
    present, values = 0, [0]
    for name, bit, is_list, sub in node:
        if name in obj:
            present |= bit
            value = obj[name]
            if sub is not None and value is not None:
                value = _pack_list(value, sub) if is_list else _pack(value, sub)
            values.append(value)
    if len(values) <= len(obj):
        raise _Irregular  # a field the tree does not name
    values[0] = present
    return values


def _pack_list(value: Any, node: Node) -> list[Any]:
    if not isinstance(value, list):
        raise _Irregular
    return [None if item is None else _pack(item, node) for item in value]


def _unpack(values: list[Any], node: Node) -> dict[str, Any]:
    present, obj, at = values[0], {}, 1
    for name, bit, is_list, sub in node:
        if present & bit:
            value = values[at]
            at += 1
            if sub is not None and value is not None:
                value = (
                    [None if item is None else _unpack(item, sub) for item in value] if is_list else _unpack(value, sub)
                )
            obj[name] = value
    return obj
