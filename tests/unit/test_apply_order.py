"""apply -f resolves references within one file whatever the order (model/applying.py: dependency_order)."""

from __future__ import annotations

import pytest

from kuberaven.model import Image, KubernetesService, Service, Site, Slice, TrustDomain
from kuberaven.model.applying import dependency_order
from kuberaven.model.base import Model
from kuberaven.model.workloads import KubernetesConfigMap, KubernetesConfigVolumeMount, KubernetesServiceInstance

KSI, MOUNT, CONFIG = KubernetesServiceInstance, KubernetesConfigVolumeMount, KubernetesConfigMap


@pytest.mark.parametrize(
    ("models", "order"),
    [
        ([], []),
        ([Image, TrustDomain, Slice, KSI], [0, 1, 2, 3]),  # already in order: unchanged
        ([KSI, Image], [1, 0]),  # the newcomer's file: the instance before its image
        ([KSI, Slice, TrustDomain, Image], [2, 1, 3, 0]),  # the earliest document that is ready goes next
        ([MOUNT, KSI, CONFIG, TrustDomain], [3, 1, 2, 0]),
        ([Site, Image, Site, Image], [0, 1, 2, 3]),  # kinds that do not refer to each other: file order
        ([KSI, None, Image], [1, 2, 0]),  # an unknown kind keeps its place (refused when applied, with its line)
        # Service and TrustDomain refer to each other: file order, either way round.
        ([TrustDomain, Service, KubernetesService], [0, 1, 2]),
        ([Service, TrustDomain, KubernetesService], [0, 1, 2]),
        ([Slice, TrustDomain, Slice, TrustDomain], [1, 3, 0, 2]),  # same kind: file order among themselves
    ],
)
def test_each_document_comes_after_the_kinds_it_refers_to(models: list[type[Model] | None], order: list[int]) -> None:
    assert dependency_order(models) == order
