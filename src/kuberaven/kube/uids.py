"""Compact uids (kube/, used where one uid is kept per object): a canonical UUID as its 128-bit int.

    reflector.py's ObjectVersion.uid_key ─┐
    network/reconcilers/pods.py's ported ─┴─► compact_uid(uid): int (canonical UUID) | str (anything else)
    network/translator.py's garbage collection compares the two kinds of key

An API server's uids are canonical UUIDs (lower case, hyphenated): as an int
one takes 48 bytes instead of an 88-byte string (docs/benchmarks.md).
Anything else is kept as given, so that uid_text gives back exactly the uid
and equal uids have equal keys whichever holder made them.
"""

from __future__ import annotations

import uuid


def compact_uid(uid: str) -> int | str:
    """A canonical UUID as its 128-bit int, anything else as given."""
    try:
        number = uuid.UUID(uid).int
    except ValueError:
        return uid
    return number if str(uuid.UUID(int=number)) == uid else uid


def uid_text(compact: int | str) -> str:
    """The uid compact_uid was given."""
    return compact if isinstance(compact, str) else str(uuid.UUID(int=compact))
