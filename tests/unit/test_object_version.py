"""kube/reflector.py's ObjectVersion: packed when it can be given back exactly, the two strings otherwise."""

from __future__ import annotations

import sys

import pytest

from kuberaven.kube.reflector import ObjectVersion
from kuberaven.kube.uids import compact_uid

UID = "0f8fad5b-d9cb-469f-a165-70867728950e"


@pytest.mark.parametrize(
    ("uid", "resource_version"),
    [
        (UID, "123456"),  # what an API server gives: packed
        (UID, "0"),
        (UID, str(2**64 - 1)),  # the largest revision packed
        (UID, str(2**64)),  # larger: kept as given
        ("00000000-0000-0000-0000-000000000000", "7"),
        (UID.upper(), "5"),  # a UUID in upper case: packing would lower it
        (UID.replace("-", ""), "5"),  # no dashes
        ("u1", "5"),  # the tests' uids
        (UID, "05"),  # a leading zero
        (UID, "+5"),
        (UID, " 5"),
        (UID, "-5"),
        (UID, "1_000"),  # int() would take it
        (UID, "abc"),  # an opaque resourceVersion
        (UID, ""),
        ("", ""),
    ],
)
def test_uid_and_resource_version_come_back_exactly(uid: str, resource_version: str) -> None:
    version = ObjectVersion(uid, resource_version)
    assert (version.uid, version.resource_version) == (uid, resource_version)
    assert version == ObjectVersion(uid, resource_version)
    assert hash(version) == hash(ObjectVersion(uid, resource_version))
    assert repr(version) == f"ObjectVersion(uid={uid!r}, resource_version={resource_version!r})"
    # garbage collection compares these keys with compact_uid()'s of the backend's uid strings
    assert version.uid_key == compact_uid(uid)


def test_equal_only_when_both_are() -> None:
    version = ObjectVersion(UID, "5")
    assert version != ObjectVersion(UID, "6")
    assert version != ObjectVersion(UID.replace("0f8f", "1f8f"), "5")
    assert version != ObjectVersion(UID.upper(), "5")  # a different string is a different uid
    assert version != (UID, "5")
    assert {version, ObjectVersion(UID, "5"), ObjectVersion("u", "5")} == {version, ObjectVersion("u", "5")}


def test_a_packed_version_is_smaller_than_its_strings() -> None:
    # The point of packing (one per object, for as long as it exists): under 100 bytes against about 180.
    version = ObjectVersion(UID, "123456789")
    packed = sys.getsizeof(version) + sys.getsizeof(version._packed)
    assert packed < 100
    assert packed < sys.getsizeof(UID) + sys.getsizeof("123456789")
