"""Applying many documents at once (model/applying.py): flushed by chunks, yet each refusal names its line."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from kuberaven.model import Database, KubernetesServiceInstance, Slice, TrustDomain
from kuberaven.model.applying import CHUNK, apply_documents
from kuberaven.model.parsing import DocumentError, parse_documents


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
    with pytest.raises(DocumentError) as refused, database.session() as session:
        apply_documents(session, parse_documents(text, "clash.yaml"), "clash.yaml")
    assert str(refused.value).startswith("clash.yaml:33:") and "already exists" in str(refused.value)
    assert count(database, TrustDomain) == domains  # the error rolled the session back: nothing stays


def test_a_refusal_in_a_later_chunk_leaves_nothing_of_the_earlier_ones(database: Database) -> None:
    """One apply is one transaction: chunk 1's rows go too (pysqlite would commit a released savepoint)."""
    good = "".join(f"- kind: TrustDomain\n  name: early-{i}\n  owner: kubernetes\n" for i in range(CHUNK + 5))
    cases = [
        (good + "- kind: Gadget\n  name: g\n", "Gadget: unknown kind"),  # refused by the model
        (good + "- kind: Service\n  name: dup\n- kind: KubernetesService\n  name: dup\n", "already exists"),  # database
    ]
    for text, says in cases:
        domains = count(database, TrustDomain)
        with pytest.raises(DocumentError, match=says), database.session() as session:  # an error rolls back
            apply_documents(session, parse_documents(text, "late.yaml"), "late.yaml")
        assert count(database, TrustDomain) == domains


def test_references_resolve_within_one_file_whatever_the_order(database: Database) -> None:
    """The quickstart's file turned upside down: each document before the one it refers to."""
    text = (
        "- kind: KubernetesServiceInstance\n  name: web-0\n  slice: kubernetes/upside/web\n"
        "  image: registry.local:5000/library/pause:3.2\n"
        "- kind: Image\n  name: registry.local:5000/library/pause:3.2\n"
        "- kind: Slice\n  name: web\n  site: mysite\n  trust_domain: kubernetes/upside\n"
        "- kind: TrustDomain\n  name: upside\n  owner: kubernetes\n"
    )
    with database.session() as session:
        applied = apply_documents(session, parse_documents(text, "upside.yaml"), "upside.yaml")
        session.commit()
    # Reported in the file's order.
    assert [(action, type(row).__name__) for action, row in applied] == [
        ("created", "KubernetesServiceInstance"),
        ("created", "Image"),
        ("created", "Slice"),
        ("created", "TrustDomain"),
    ]
    with database.session() as session:
        query = sa.select(KubernetesServiceInstance).where(KubernetesServiceInstance.name == "web-0")
        instance = session.scalars(query).one()
        assert instance.slice is not None and instance.image is not None
        assert (instance.slice.name, instance.slice.trust_domain.name, instance.image.tag) == ("web", "upside", "3.2")
    # A reference to nothing in the file or the database is still refused, naming its line.
    missing = "- kind: Slice\n  name: lost\n  site: mysite\n  trust_domain: kubernetes/nowhere\n"
    missing += "- kind: Image\n  name: x:1\n"
    with pytest.raises(DocumentError, match=r"^missing.yaml:1: .*nowhere"), database.session() as session:
        apply_documents(session, parse_documents(missing, "missing.yaml"), "missing.yaml")
