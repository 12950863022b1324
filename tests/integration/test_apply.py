"""Applying many documents at once (model/applying.py): flushed by chunks, yet each refusal names its line."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from kuberaven.model import Database, Slice, TrustDomain
from kuberaven.model.applying import CHUNK, apply_documents
from kuberaven.model.documents import DocumentError, parse_documents


def count(database: Database, model: type) -> int:
    with database.session() as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(model)) or 0)


def test_a_large_file_with_references_to_its_own_rows_applies_across_chunks(database: Database) -> None:
    n = CHUNK + 7  # rows referred to from the next chunk, by plain and by qualified name
    text = "".join(f"- kind: TrustDomain\n  name: team-{i}\n  owner: kubernetes\n" for i in range(n))
    text += "".join(
        f"- kind: Slice\n  name: web\n  trust_domain: {'kubernetes/' if i % 2 else ''}team-{i}\n  site: mysite\n"
        for i in range(n)
    )
    domains, slices = count(database, TrustDomain), count(database, Slice)
    with database.session() as session:
        applied = apply_documents(session, parse_documents(text, "big.yaml"), "big.yaml")
        session.commit()
    assert [action for action, _ in applied] == ["created"] * (2 * n)
    assert (count(database, TrustDomain), count(database, Slice)) == (domains + n, slices + n)
    with database.session() as session:
        again = apply_documents(session, parse_documents(text, "big.yaml"), "big.yaml")
    assert {action for action, _ in again} == {"unchanged"}


def test_a_refusal_of_the_database_in_a_chunk_names_its_document_and_stores_nothing(database: Database) -> None:
    # A Service with no trust domain and a cluster share the names of cluster-scoped services:
    # only the database's unique index sees the clash, when the chunk is flushed.
    text = "".join(f"- kind: TrustDomain\n  name: fine-{i}\n  owner: kubernetes\n" for i in range(10))
    text += "- kind: Service\n  name: clash\n"  # line 31
    text += "- kind: KubernetesService\n  name: clash\n"  # line 33
    domains = count(database, TrustDomain)
    with database.session() as session, pytest.raises(DocumentError) as refused:
        apply_documents(session, parse_documents(text, "clash.yaml"), "clash.yaml")
    assert str(refused.value).startswith("clash.yaml:33:") and "already exists" in str(refused.value)
    assert count(database, TrustDomain) == domains  # the session was not committed: nothing stays
