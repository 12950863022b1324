"""Which change of a port's status is worth an Event (network/activation.py), and how it reads."""

from __future__ import annotations

import pytest

from kuberaven.network.activation import event_of
from kuberaven.network.backend import PortStatus


@pytest.mark.parametrize(
    ("previous", "status", "vif_type", "event"),
    [
        (None, "ACTIVE", "ovs", ("Normal", "PortActive")),
        ("DOWN", "ACTIVE", "ovs", ("Normal", "PortActive")),
        (None, "DOWN", "unbound", None),  # every new port: not worth an Event
        (None, "DOWN", "ovs", None),
        (None, "DOWN", "binding_failed", ("Warning", "PortNotActive")),
        ("DOWN", "ERROR", "ovs", ("Warning", "PortNotActive")),
        ("ACTIVE", "DOWN", "ovs", ("Warning", "PortNotActive")),  # it was up and went down
    ],
)
def test_the_event_of_a_change(previous: str | None, status: str, vif_type: str, event: tuple[str, str] | None) -> None:
    assert event_of(previous, PortStatus("p", "uid", status, vif_type, "node-1")) == event


def test_a_failed_binding_says_which_host_has_no_chassis() -> None:
    assert PortStatus("p", "u", "DOWN", "binding_failed", "node-9").describe() == (
        "DOWN (binding failed: no OVN chassis or agent on host 'node-9')"
    )
    assert PortStatus("p", "u", "ACTIVE", "ovs", "node-1").describe() == "ACTIVE"
