"""The delete rule (model/deletes.py) and which deleted rows lose their Kubernetes object (tombstones.py)."""

from __future__ import annotations

import pytest

from kuberaven.model import Service, Slice
from kuberaven.model.deletes import LISTED, DeletePlan, Doomed, refusal
from kuberaven.model.tombstones import deletes_object

SITE = Doomed("Site", 1, "mysite", managed=True, in_kubernetes=False)
SLICE = Doomed("Slice", 2, "kubernetes/shop/web", managed=True, in_kubernetes=True)
POD = Doomed("KubernetesServiceInstance", 3, "kubernetes/shop/web-0", managed=True, in_kubernetes=True)
FOUND = Doomed("KubernetesServiceInstance", 4, "kubernetes/shop/found", managed=False, in_kubernetes=False)
IMAGE = Doomed("Image", 5, "nginx:1.25", managed=True, in_kubernetes=False)


def test_a_row_alone_is_deleted_with_or_without_cascade() -> None:
    assert refusal(DeletePlan(POD), cascade=False) is None
    assert refusal(DeletePlan(POD), cascade=True) is None


def test_a_row_that_takes_others_with_it_needs_cascade_and_the_refusal_names_them() -> None:
    plan = DeletePlan(SITE, cascaded=(SLICE, POD, FOUND))
    problem = refusal(plan, cascade=False)
    assert problem == (
        "deleting Site 'mysite' would delete 3 other rows with it: "
        "Slice 'kubernetes/shop/web' (deleted in Kubernetes), "
        "KubernetesServiceInstance 'kubernetes/shop/web-0' (deleted in Kubernetes), "
        "KubernetesServiceInstance 'kubernetes/shop/found'; "
        "delete with cascade to delete them too (nothing was deleted)"
    )
    assert refusal(plan, cascade=True) is None
    assert plan.rows == (SITE, SLICE, POD, FOUND)


def test_discovered_rows_going_along_need_cascade_too() -> None:
    # Forgetting them is a change the caller must ask for (a namespace deleted in Kubernetes takes them anyway).
    assert refusal(DeletePlan(SLICE, cascaded=(FOUND,)), cascade=False) is not None


def test_a_referenced_row_is_refused_even_with_cascade() -> None:
    runs_it = Doomed("KubernetesServiceInstance", 3, "kubernetes/shop/web-0", managed=True, in_kubernetes=False)
    plan = DeletePlan(IMAGE, blockers=(runs_it,))
    for cascade in (False, True):
        assert refusal(plan, cascade=cascade) == (
            "Image 'nginx:1.25' is still referenced by KubernetesServiceInstance 'kubernetes/shop/web-0'; "
            "delete those first"
        )


def test_a_long_list_is_cut() -> None:
    many = tuple(Doomed("Slice", i, f"s{i}", managed=True, in_kubernetes=False) for i in range(LISTED + 5))
    problem = refusal(DeletePlan(SITE, cascaded=many), cascade=False)
    assert problem is not None and f"would delete {LISTED + 5} other rows" in problem and "and 5 more" in problem
    assert f"s{LISTED - 1}'" in problem and f"s{LISTED}'" not in problem


@pytest.mark.parametrize(
    ("model", "row", "deleted"),
    [
        (Slice, {"xos_managed": True}, True),
        (Slice, {"xos_managed": False}, False),  # found by the inventory: not kuberaven's to delete
        (Service, {"xos_managed": True, "trust_domain_id": 4}, True),
        (Service, {"xos_managed": True, "trust_domain_id": None}, False),  # no namespace, no object
    ],
)
def test_which_deleted_rows_lose_their_kubernetes_object(model: type, row: dict[str, object], deleted: bool) -> None:
    assert deletes_object(model.__name__, model, row) is deleted
