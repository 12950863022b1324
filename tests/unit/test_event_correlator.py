"""Kubernetes Events' correlation (kube/event_recorder.py): repeats raise a count, floods are cut, memory is bounded."""

from __future__ import annotations

import pytest

from kuberaven.kube import event_recorder as events
from kuberaven.kube.event_recorder import BURST, REFILL_SECONDS, Correlator, InvolvedObject

POD = InvolvedObject("v1", "Pod", "shop", "web-0", "uid-1")
OTHER = InvolvedObject("v1", "Pod", "shop", "web-1", "uid-2")


def test_a_repeat_raises_the_count_of_the_stored_event() -> None:
    correlator = Correlator()
    first = correlator.decide(POD, "Warning", "Failed", "quota exceeded", now=100.0)
    again = correlator.decide(POD, "Warning", "Failed", "quota exceeded", now=160.0)
    other = correlator.decide(POD, "Warning", "Failed", "image missing", now=170.0)
    assert (first.action, first.count) == ("create", 1) and first.name.startswith("web-0.")
    assert (again.action, again.name, again.count, again.first) == ("update", first.name, 2, first.first)
    assert other.action == "create" and other.name != first.name


def test_an_expired_event_is_created_anew() -> None:
    correlator = Correlator()
    correlator.decide(POD, "Normal", "Provisioned", "applied", now=1.0)
    correlator.forget(POD, "Normal", "Provisioned", "applied")
    assert correlator.decide(POD, "Normal", "Provisioned", "applied", now=2.0).action == "create"


def test_one_object_gets_a_burst_then_one_event_per_refill_and_others_are_not_held_back() -> None:
    correlator = Correlator()
    actions = [correlator.decide(POD, "Warning", "Failed", f"try {i}", now=0.0).action for i in range(BURST + 3)]
    assert actions.count("create") == BURST and actions[-3:] == ["drop"] * 3
    assert correlator.decide(OTHER, "Warning", "Failed", "x", now=0.0).action == "create"
    assert correlator.decide(POD, "Warning", "Failed", "later", now=REFILL_SECONDS).action == "create"
    assert correlator.decide(POD, "Warning", "Failed", "later too", now=REFILL_SECONDS).action == "drop"


def test_the_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "CACHE_SIZE", 10)
    correlator = Correlator()
    for i in range(50):
        correlator.decide(InvolvedObject("v1", "Pod", "ns", f"p{i}"), "Normal", "Provisioned", "m", now=float(i))
    assert len(correlator.cache) == 10 and len(correlator.buckets) == 10
