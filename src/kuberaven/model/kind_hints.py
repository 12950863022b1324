"""What an unknown ``kind`` probably meant (model/, pure; used by documents.py's model_for and apply).

A newcomer types Kubernetes' words (``get pods``), plurals (``get KubernetesServiceInstances``) or
applies a plain Kubernetes manifest (``kind: Pod``). Each gets the model it meant, by name.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

RAW_YAML_MODEL = "KubernetesResourceInstance"
# Kubernetes kinds (lowercase, singular) and the model whose rows mirror or make them.
KUBERNETES_KINDS = {
    "pod": "KubernetesServiceInstance",
    "namespace": "TrustDomain",
    "serviceaccount": "Principal",
    "configmap": "KubernetesConfigMap",
    "secret": "KubernetesSecret",
    **dict.fromkeys(
        ("deployment", "replicaset", "statefulset", "daemonset", "job", "cronjob", "replicationcontroller"), "Slice"
    ),
}
_CLOSE_ENOUGH = 0.6  # difflib's ratio: "TrustDomian" and "Slices" match, unrelated words do not
_MAX_SUGGESTIONS = 3


def _singular(word: str) -> list[str]:
    forms = [word]
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    return forms


def suggest_kind(kind: str, known: Sequence[str]) -> str | None:
    """``did you mean X?`` for an unknown ``kind`` among the ``known`` model names, or None."""
    by_lower = {name.lower(): name for name in known}
    for form in _singular(kind.lower().replace("-", "").replace("_", "")):
        if form in by_lower:
            return f"did you mean {by_lower[form]}?"
        if form in KUBERNETES_KINDS:
            model = KUBERNETES_KINDS[form]
            return f"did you mean {model}? (a Kubernetes {form} is a {model} row here)"
    close = difflib.get_close_matches(kind.lower(), list(by_lower), n=_MAX_SUGGESTIONS, cutoff=_CLOSE_ENOUGH)
    if close:
        return f"did you mean {' or '.join(by_lower[c] for c in close)}?"
    return None


def manifest_hint(kind: str, api_version: str) -> str:
    """For a plain Kubernetes manifest given where a kuberaven document was expected."""
    mirrored = KUBERNETES_KINDS.get(kind.lower())
    also = f", or describe it as a {mirrored} row" if mirrored else ""
    return (
        f"a Kubernetes manifest ({api_version} {kind}), not a kuberaven document: to apply it as it is, put it in "
        f"the resource_definition of a {RAW_YAML_MODEL}{also} (docs/provisioning.md)"
    )
