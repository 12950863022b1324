"""Rows as documents (model/): the one code path of ``apply -f``, ``get``, ``delete`` and REST.

A document is a mapping with ``kind`` and the model's fields; references to
other rows are by name (``slice: mysite_demo1``), qualified when a name is
not unique (``trust_domain: kubernetes/default``, ``image: nginx:1.25``).
A file of documents is applied in one transaction: any error rejects the
whole file, names the line and the reason, and stores nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import RelationshipProperty, Session

from . import registry
from .base import Model, table_of, utcnow
from .checks import HOLDS_NUL, NUL, check_row, holds_nul, integer_bounds
from .cluster import Image, Slice
from .errors import AlreadyExists, DoesNotExist, MultipleObjectsReturned, ValidationError
from .images import parse_image
from .kind_hints import manifest_hint, suggest_kind
from .redaction import hidden_values, redact_resource_definition
from .tables import KIND_ALIASES, USER_MODELS
from .workloads import KubernetesResourceInstance, KubernetesSecret, KubernetesServiceInstance

# Set by kuberaven, never by a document (and each model's observed_fields, set by the inventory).
READ_ONLY = frozenset(
    {
        "id",
        "created",
        "updated",
        "enacted",
        "policed",
        "backend_status",
        "backend_code",
        "backend_handle",
        "policy_status",
        "policy_code",
        "deleted",
        "backend_need_delete",
        "leaf_model_name",
        "applied_objects",
    }
)
MAX_ID = 2**63 - 1  # no row has a larger id; SQLite cannot even compare with one
# A document's "kind" is its model; a column named kind (Image: container|vm) is "type" there.
COLUMN_ALIASES = {"kind": "type"}
# session.info keys of one apply (model/applying.py): the references it has looked up, and the rows it
# has created and not flushed yet, by natural key.
RESOLVED = "kuberaven.resolved"
PENDING = "kuberaven.pending"
EXISTING = "kuberaven.existing"  # model → (names looked up, {natural key: row}) of one chunk
FIELD_NAMES = {alias: column for column, alias in COLUMN_ALIASES.items()}


def user_models() -> list[type[Model]]:
    """kuberaven's models and the plugins' (registered by plugins.py)."""
    return [*USER_MODELS, *registry.plugin_models()]


def model_for(kind: str) -> type[Model]:
    """The model a document's ``kind`` names, case-insensitively, or the original's other name for it."""
    models = user_models()
    by_name = {m.__name__.lower(): m for m in models} | {a.lower(): m for a, m in KIND_ALIASES.items()}
    model = by_name.get(kind.lower())
    if model is None:
        names = [m.__name__ for m in models]
        hint = suggest_kind(kind, names) or f"known kinds: {', '.join(names)}"
        raise ValidationError(kind, None, f"unknown kind; {hint}")
    return model


def names_kind(kind: str, model: type[Model]) -> bool:
    """Whether ``kind`` is ``model``'s name or one of its aliases."""
    return kind.lower() == model.__name__.lower() or any(
        alias.lower() == kind.lower() and target is model for alias, target in KIND_ALIASES.items()
    )


def _relationships(model: type[Model]) -> dict[str, RelationshipProperty[Any]]:
    return {r.key: r for r in sa.inspect(model).relationships if not r.uselist}


def resolve(session: Session, model: type[Model], reference: Any) -> Model:
    """Find the one row of ``model`` that ``reference`` (a name, qualified name or id) means."""
    if isinstance(reference, Model):
        return reference
    if isinstance(reference, int) and not isinstance(reference, bool):
        row = session.get(model, reference) if 0 < reference <= MAX_ID else None
        if row is None:
            raise DoesNotExist(f"{model.__name__} with id {reference} does not exist")
        return row
    if not isinstance(reference, str) or not reference:
        raise ValidationError(model.__name__, None, f"a reference must be a name or an id, not {reference!r}")
    if NUL in reference:
        raise ValidationError(model.__name__, None, f"the reference {reference!r} {HOLDS_NUL}")
    resolved = session.info.get(RESOLVED)
    if resolved is None:
        return _resolve_name(session, model, reference)
    key = (model, reference)  # within one apply each reference is looked up once
    if key not in resolved:
        if session.info.get(PENDING):
            session.flush()  # the row meant may be one this apply created: the database must see it
            session.info[PENDING].clear()
        resolved[key] = _resolve_name(session, model, reference)
    return resolved[key]  # type: ignore[no-any-return]


def _resolve_name(session: Session, model: type[Model], reference: str) -> Model:
    criteria = _reference_criteria(session, model, reference)
    rows = list(session.scalars(sa.select(model).where(*criteria).limit(11)))
    if not rows:
        raise DoesNotExist(f"{model.__name__} {reference!r} does not exist")
    if len(rows) > 1:
        # A name that is some row's whole qualified name means that row: cluster "kubernetes",
        # not the Service kubernetes/default/kubernetes the inventory found in it.
        exact = [r for r in rows if qualified_name(r) == reference]
        if len(exact) == 1:
            return exact[0]
        names = ", ".join(qualified_name(r) for r in rows[:10])
        raise MultipleObjectsReturned(f"{model.__name__} {reference!r} is ambiguous; say one of: {names}")
    return rows[0]


def _reference_criteria(session: Session, model: type[Model], reference: str) -> list[Any]:
    if model is Image:
        image = parse_image(reference)
        return [Image.name == image.name, Image.tag == image.tag, Image.digest == image.digest]
    key = model.natural_key
    scope_field = key[0] if len(key) == 2 and key[0] in _relationships(model) else None
    scope, _, name = reference.rpartition("/") if scope_field else ("", "", reference)
    criteria = [getattr(model, key[-1]) == name]
    if scope_field and scope:
        target = _relationships(model)[scope_field].mapper.class_
        criteria.append(getattr(model, f"{scope_field}_id") == resolve(session, target, scope).id)
    return criteria


def qualified_name(row: Model) -> str:
    """The reference that names ``row`` unambiguously."""
    if isinstance(row, Image):
        return row.reference
    key = type(row).natural_key
    parts = []
    for field in key:
        value = getattr(row, field, None)
        parts.append(qualified_name(value) if isinstance(value, Model) else str(value if value is not None else ""))
    return "/".join(p for p in parts if p)


def apply_document(session: Session, document: dict[str, Any]) -> tuple[str, Model]:
    """Create or update one document's row (not flushed); (action, row)."""
    kind = document.pop("kind", None)
    if not isinstance(kind, str):
        raise ValidationError("document", "kind", "is required (for example kind: TrustDomain)")
    if "apiVersion" in document and "metadata" in document:
        raise ValidationError(kind, None, manifest_hint(kind, str(document["apiVersion"])))
    model = model_for(kind)
    values = _values(session, model, document)
    row = _existing(session, model, values)
    if row is not None:
        return _update_row(session, row, values), row
    return "created", _create(session, model, values)


def create_document(session: Session, model: type[Model], fields: dict[str, Any]) -> Model:
    """Create one row (REST POST); a row with the same name is AlreadyExists, not updated."""
    values = _values(session, model, fields)
    existing = _existing(session, model, values)
    if existing is not None:
        raise AlreadyExists(f"{model.__name__} {qualified_name(existing)!r} already exists (id {existing.id})")
    return _create(session, model, values)


def _create(session: Session, model: type[Model], values: dict[str, Any]) -> Model:
    row = model(**values)
    session.add(row)
    _checked(session, row)
    pending = session.info.get(PENDING)
    if pending is not None:
        pending[(model, _natural_key(model, values))] = row
        session.info[RESOLVED][(model, qualified_name(row))] = row
    return row


def update_document(session: Session, row: Model, fields: dict[str, Any]) -> str:
    """Change some fields of one row (REST PATCH); returns "updated" or "unchanged"."""
    return _update_row(session, row, _values(session, type(row), fields))


def _update_row(session: Session, row: Model, values: dict[str, Any]) -> str:
    # Compared after assignment: the model normalises some values (JSON-encoded data, kubectl_state's case).
    before = {name: getattr(row, name) for name in values}
    for name, value in values.items():
        setattr(row, name, value)
    if all(getattr(row, name) == old for name, old in before.items()):
        return "unchanged"
    _checked(session, row)
    return "updated"


def _checked(session: Session, row: Model) -> None:
    check_row(session, row)
    row.updated = utcnow()  # type: ignore[attr-defined]  # every model mixes in Bookkeeping


def _values(session: Session, model: type[Model], document: dict[str, Any]) -> dict[str, Any]:
    relationships = _relationships(model)
    columns = {c.key: c for c in table_of(model).columns}
    values: dict[str, Any] = {}
    for alias, value in document.items():
        if holds_nul(alias) or holds_nul(value):  # before a name in it is looked up
            raise ValidationError(model.__name__, repr(alias) if holds_nul(alias) else str(alias), HOLDS_NUL)
        field = model.aliases.get(alias) or FIELD_NAMES.get(alias, alias)
        if field in READ_ONLY:
            raise ValidationError(model.__name__, field, "is set by kuberaven and cannot be given")
        if field in model.observed_fields:
            raise ValidationError(model.__name__, field, "is observed from Kubernetes by the inventory; not given")
        if field in values:
            raise ValidationError(model.__name__, field, "is given twice, under two of its names: give one")
        if field in relationships:
            target = relationships[field].mapper.class_
            values[field] = None if value is None else resolve(session, target, value)
        elif field in columns and not columns[field].foreign_keys:
            values[field] = value
        else:
            raise ValidationError(model.__name__, field, "no such field")
    if model is Image and "name" in values and ":" in str(values["name"]).rpartition("/")[2] and "tag" not in values:
        reference = parse_image(values["name"])
        values.update(name=reference.name, tag=reference.tag, digest=reference.digest)
    return values


def _existing(session: Session, model: type[Model], values: dict[str, Any]) -> Model | None:
    relationships = _relationships(model)
    for field, value in _key_fields(model, values).items():  # before they are looked up with (a 500 on SQLite)
        if field not in relationships and isinstance(value, (list, dict)):
            raise ValidationError(model.__name__, field, f"must be a single value, not a {type(value).__name__}")
    pending = session.info.get(PENDING)
    if pending:
        created = pending.get((model, _natural_key(model, values)))
        if created is not None:
            return created  # type: ignore[no-any-return]
    names, found = session.info.get(EXISTING, {}).get(model, ((), {}))
    if values.get("name") in names:  # looked up with the rest of its chunk
        return found.get(_natural_key(model, values))  # type: ignore[no-any-return]
    key = _key_fields(model, values)
    criteria = []
    for field, value in key.items():
        if field in relationships:
            column = getattr(model, f"{field}_id")
            criteria.append(column.is_(None) if value is None else column == value.id)
        else:
            criteria.append(getattr(model, field) == value)
    return session.scalars(sa.select(model).where(*criteria)).first()


def _natural_key(model: type[Model], values: dict[str, Any]) -> tuple[Any, ...]:
    """The natural key's values; referenced rows by identity (they may not have an id yet)."""
    return tuple(_key_fields(model, values).values())


def _key_fields(model: type[Model], values: dict[str, Any]) -> dict[str, Any]:
    key = {field: values.get(field) for field in model.natural_key}
    if model is KubernetesServiceInstance and isinstance(values.get("slice"), Slice):
        key["trust_domain"] = values["slice"].trust_domain
    if model is Image:
        key.update(tag=values.get("tag", "latest"), digest=values.get("digest", ""))
    if "name" in key and not key["name"]:
        raise ValidationError(model.__name__, "name", "is required")
    return key


def to_document(row: Model) -> dict[str, Any]:
    """A row as a plain mapping: references by qualified name, secret values hidden."""
    document: dict[str, Any] = {"kind": type(row).__name__, "id": row.id}
    relationships = _relationships(type(row))
    fk_columns = {f"{name}_id" for name in relationships}
    for column in table_of(row).columns:
        key = column.key
        if key in ("id", "leaf_model_name") or key in fk_columns:
            continue
        if not hasattr(type(row), key):
            continue  # a column of a sibling model in the same table
        value = getattr(row, key)
        if isinstance(value, dt.datetime):
            value = value.isoformat()
        document[COLUMN_ALIASES.get(key, key)] = value
    for name in relationships:
        target = getattr(row, name)
        document[name] = None if target is None else qualified_name(target)
    if isinstance(row, KubernetesSecret) and row.data:
        document["data"] = hidden_values(row.data)
    if isinstance(row, KubernetesResourceInstance):
        document["resource_definition"] = redact_resource_definition(row.resource_definition)
    return document


def document_criteria(session: Session, model: type[Model], filters: dict[str, str]) -> list[Any]:
    """``field=value`` pairs as given in a URL's query → criteria (references by name, values typed)."""
    relationships = _relationships(model)
    columns = {c.key: c for c in table_of(model).columns}
    criteria: list[Any] = []
    for alias, text in filters.items():
        field = model.aliases.get(alias) or FIELD_NAMES.get(alias, alias)
        if field in relationships:
            target = relationships[field].mapper.class_
            criteria.append(getattr(model, f"{field}_id") == resolve(session, target, as_reference(text)).id)
        elif field in columns and hasattr(model, field) and field != "leaf_model_name":
            criteria.append(getattr(model, field) == typed_value(model, field, columns[field], text))
        else:
            raise ValidationError(model.__name__, alias, "no such field")
    return criteria


def as_reference(text: str) -> str | int:
    """A reference typed as text (URL, command line): an id if it is one in ASCII digits, else a name."""
    return int(text) if re.fullmatch(r"[0-9]{1,19}", text) and int(text) <= MAX_ID else text


def typed_value(model: type[Model], field: str, column: sa.Column[Any], text: str) -> Any:
    try:
        python_type = column.type.python_type
    except NotImplementedError:
        python_type = str
    if python_type is bool:
        if text.lower() not in ("true", "false"):
            raise ValidationError(model.__name__, field, f"must be true or false, not {text!r}")
        return text.lower() == "true"
    if python_type is int:
        low, high = integer_bounds(column.type)
        if not re.fullmatch(r"-?[0-9]{1,19}", text) or not low <= int(text) <= high:
            raise ValidationError(model.__name__, field, f"must be an integer from {low} to {high}, not {text[:40]!r}")
        return int(text)
    if python_type is str:
        return text
    raise ValidationError(model.__name__, field, "cannot be filtered on")
