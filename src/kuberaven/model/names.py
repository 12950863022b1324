"""Rules for names and values users give (model/), as pure functions the tables' validate() calls.

A name that becomes a Kubernetes object's name is held to the rule Kubernetes
applies to that object (DNS-1123 label or subdomain, DNS-1035 label for a
Service), so that a row is refused when saved rather than failing later in
the cluster. Any other name (a Site, a Slice, a Service with no namespace such
as an XOS service, a KubernetesService) follows the original XOS rule, unique
and without spaces, plus what makes a name unusable here: ``/`` separates the
parts of a qualified name, and invisible, control or bidirectional characters
(U+202E) and markup (``<``, ``>``) make a name that reads as something else.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_LIMIT = 63
SUBDOMAIN_LIMIT = 253
# The original's Service.name is a CharField(max_length=30).
XOS_SERVICE_NAME_LIMIT = 30
_FORBIDDEN = frozenset("/<>")
_DOT_NAMES = frozenset({".", ".."})


def dns_name_problem(name: str | None, pattern: re.Pattern[str], limit: int, what: str) -> str | None:
    """Why ``name`` is not a valid Kubernetes name of the kind ``what`` describes; None if it is."""
    if not name:
        return "is required"
    if len(name) > limit or not pattern.match(name):
        return f"{name!r} is not a valid {what} (at most {limit} characters)"
    return None


def plain_name_problem(name: str | None, limit: int | None = None) -> str | None:
    """Why ``name`` is not a valid name of a row that never becomes a Kubernetes object; None if it is."""
    if not name:
        return "is required"
    if limit is not None and len(name) > limit:
        return f"{name!r} is {len(name)} characters long; at most {limit} are allowed"
    if name in _DOT_NAMES:
        return f"{name!r} is not a name"
    for character in name:
        if character.isspace() or character in _FORBIDDEN or unicodedata.category(character).startswith("C"):
            return f"{name!r} contains {_describe(character)}; no spaces, '/', '<', '>' or control characters"
    return None


def _describe(character: str) -> str:
    if character.isprintable() and not character.isspace():
        return repr(character)
    return f"U+{ord(character):04X} ({unicodedata.name(character, 'unnamed')})"


def decode_string_map(value: Any) -> tuple[dict[str, str] | None, str | None]:
    """A ConfigMap's or Secret's data: a mapping, or its JSON encoding (the original's form) → (mapping, problem)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            return None, f"is a string but not JSON-encoded ({error}); give a mapping or json.dumps() of one"
        if not isinstance(value, dict):
            return None, f"is JSON of a {type(value).__name__}; it must encode a mapping of strings to strings"
    if value is None:
        return None, None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None, "must be a mapping of string keys to string values (or a JSON-encoded one)"
    return value, None
