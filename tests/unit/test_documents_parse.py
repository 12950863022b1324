"""Parsing a file of documents (model/documents.py): nothing merged silently, errors name FILE:LINE."""

from __future__ import annotations

import pytest

from kuberaven.model.parsing import DocumentError, parse_documents


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("- kind: Slice\n  name: a\n  name: b\n", 3, "name"),
        ("kind: Site\nname: s\n---\nkind: Slice\nname: w\nkind: Site\n", 6, "kind"),
        ("- kind: KubernetesConfigMap\n  name: c\n  data:\n    k: 1\n    k: 2\n", 5, "k"),
    ],
)
def test_a_key_given_twice_in_one_mapping_is_refused_naming_the_line(text: str, line: int, key: str) -> None:
    with pytest.raises(DocumentError) as raised:
        parse_documents(text, "f.yaml")
    assert raised.value.line == line
    assert str(raised.value).startswith(f"f.yaml:{line}: key {key!r} given twice (first at line ")


def test_equal_values_under_different_keys_and_merges_are_not_duplicates() -> None:
    text = "- &base {kind: Slice, name: a}\n- <<: *base\n  name: b\n- {kind: Site, name: a}\n"
    assert [d.document for d in parse_documents(text)] == [
        {"kind": "Slice", "name": "a"},
        {"kind": "Slice", "name": "b"},
        {"kind": "Site", "name": "a"},
    ]
