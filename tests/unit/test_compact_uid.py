"""Compact uids (kube/uids.py: `ported`, the reflector's uid keys): exact round trips, smaller than the string."""

from __future__ import annotations

import sys

import pytest

from kuberaven.kube.uids import compact_uid, uid_text

CANONICAL = "0f0e0d0c-1111-4222-8333-444455556666"


@pytest.mark.parametrize(
    ("uid", "packed"),
    [
        (CANONICAL, True),
        ("00000000-0000-0000-0000-000000000000", True),
        ("ffffffff-ffff-ffff-ffff-ffffffffffff", True),
        (CANONICAL.upper(), False),  # the same UUID, but not as given: kept as the string
        (CANONICAL.replace("-", ""), False),
        ("{" + CANONICAL + "}", False),
        ("urn:uuid:" + CANONICAL, False),
        ("not-a-uuid", False),
        ("", False),
    ],
)
def test_a_uid_comes_back_exactly_as_given(uid: str, packed: bool) -> None:
    compact = compact_uid(uid)
    assert isinstance(compact, int) is packed
    assert uid_text(compact) == uid


def test_a_compact_uid_is_smaller_than_the_string_and_equal_uids_are_equal() -> None:
    assert sys.getsizeof(compact_uid(CANONICAL)) < sys.getsizeof(CANONICAL) / 1.5
    assert compact_uid(CANONICAL) == compact_uid("".join(CANONICAL))  # another string, the same uid
    assert compact_uid(CANONICAL) != compact_uid(CANONICAL.replace("6", "7"))
