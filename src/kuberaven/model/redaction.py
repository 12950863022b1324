"""Secret values hidden in every output (model/): ``get``, REST and the UI all print rows through to_document.

Stored rows keep the real values (the sync loop applies them); only what is
shown is redacted: a KubernetesSecret's data, and the ``data``/``stringData``
of every Secret document inside a KubernetesResourceInstance's raw YAML.
"""

from __future__ import annotations

from typing import Any

HIDDEN = "<hidden>"
SECRET_KIND = "Secret"
SECRET_FIELDS = ("data", "stringData")
# Shown instead of a resource_definition that is not YAML: it may hold a Secret we cannot find.
UNREADABLE = f"{HIDDEN} (not valid YAML: the stored text is not shown)"


def hidden_values(data: Any) -> Any:
    """A mapping's keys kept, its values hidden."""
    return dict.fromkeys(data, HIDDEN) if isinstance(data, dict) else HIDDEN


def redact_resource_definition(text: str | None) -> str | None:
    """Raw Kubernetes YAML with every Secret's values hidden; text without a Secret is returned as it is."""
    if not text:
        return text
    import yaml  # only for the rows that hold raw YAML: a quick `get` of other kinds never loads it

    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return UNREADABLE
    if not any(_has_secret(d) for d in documents):
        return text
    return yaml.safe_dump_all([_redacted(d) for d in documents], sort_keys=False)


def _has_secret(document: Any) -> bool:
    if not isinstance(document, dict):
        return False
    if document.get("kind") == SECRET_KIND:
        return True
    items = document.get("items")  # a v1 List
    return isinstance(items, list) and any(_has_secret(i) for i in items)


def _redacted(document: Any) -> Any:
    if not isinstance(document, dict):
        return document
    copy = dict(document)
    if copy.get("kind") == SECRET_KIND:
        for field in SECRET_FIELDS:
            if field in copy:
                copy[field] = hidden_values(copy[field])
    if isinstance(copy.get("items"), list):
        copy["items"] = [_redacted(i) for i in copy["items"]]
    return copy
