"""An unknown kind names the model meant (model/kind_hints.py)."""

from __future__ import annotations

import pytest

from kuberaven.model.documents import model_for
from kuberaven.model.errors import ValidationError
from kuberaven.model.kind_hints import manifest_hint, suggest_kind

KNOWN = ["TrustDomain", "Slice", "Image", "KubernetesServiceInstance", "KubernetesResourceInstance", "Service"]


@pytest.mark.parametrize(
    ("kind", "hint"),
    [
        ("pods", "did you mean KubernetesServiceInstance? (a Kubernetes pod is a KubernetesServiceInstance row here)"),
        ("Pod", "did you mean KubernetesServiceInstance? (a Kubernetes pod is a KubernetesServiceInstance row here)"),
        ("KubernetesServiceInstances", "did you mean KubernetesServiceInstance?"),
        ("kubernetes-service-instances", "did you mean KubernetesServiceInstance?"),
        ("namespaces", "did you mean TrustDomain? (a Kubernetes namespace is a TrustDomain row here)"),
        ("statefulsets", "did you mean Slice? (a Kubernetes statefulset is a Slice row here)"),
        ("images", "did you mean Image?"),
        ("services", "did you mean Service?"),
        ("TrustDomian", "did you mean TrustDomain?"),  # a typo
        ("KubernetesServiceInstanse", "did you mean KubernetesServiceInstance or KubernetesResourceInstance?"),
        ("Gadget", None),
        ("", None),
    ],
)
def test_suggestions(kind: str, hint: str | None) -> None:
    assert suggest_kind(kind, KNOWN) == hint


def test_model_for_says_the_hint_or_lists_the_known_kinds() -> None:
    with pytest.raises(ValidationError, match=r"^pods: unknown kind; did you mean KubernetesServiceInstance\?"):
        model_for("pods")
    with pytest.raises(ValidationError, match=r"^Gadget: unknown kind; known kinds: Site, .*TrustDomain"):
        model_for("Gadget")


def test_a_kubernetes_manifest_points_to_raw_yaml() -> None:
    assert manifest_hint("Pod", "v1") == (
        "a Kubernetes manifest (v1 Pod), not a kuberaven document: to apply it as it is, put it in the "
        "resource_definition of a KubernetesResourceInstance, or describe it as a KubernetesServiceInstance row "
        "(docs/provisioning.md)"
    )
    assert "or describe" not in manifest_hint("Ingress", "networking.k8s.io/v1")
