"""Which change of a port's status is worth an Event (reconcilers/pod_vif.py), how it reads, and activation.py's
failed looks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from kuberaven.model import Database
from kuberaven.network.activation import PortActivation
from kuberaven.network.backend import BackendError
from kuberaven.network.drivers.port_status import PortStatus
from kuberaven.network.reconcilers.pod_vif import event_of
from kuberaven.network.translation_runtime import TranslationRuntime


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


class FailsOnce:
    """A backend whose first listing fails as a cloud that cannot be reached does, then lists no ports."""

    name = "openstack"
    pools = trunks = None

    def __init__(self, activation: Callable[[], PortActivation]) -> None:
        self.calls = 0
        self.closed = 0
        self.activation = activation
        self.port_status = self  # its port status driver is itself

    def port_statuses(self, cluster: str, ports: list[str] | None = None, inactive: bool = False) -> dict:
        self.calls += 1
        if self.calls == 1:
            raise BackendError("cloud unreachable")
        self.activation().stop()
        return {}

    def close(self) -> None:
        self.closed += 1


async def test_a_failed_look_is_logged_and_the_next_one_comes(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A look that fails is not the component's end (kube/loops.py's every()): one line, then the next look;
    the run's end closes the runtime it ran on (its last runnable)."""
    made: list[PortActivation] = []
    backend = FailsOnce(lambda: made[0])
    runtime = TranslationRuntime(None, database, "c", backend, workers=2)  # type: ignore[arg-type]  # stand-ins
    made.append(PortActivation(runtime, backend, period=0.01))
    with caplog.at_level(logging.WARNING, logger="kuberaven.kube.loops"):
        await asyncio.wait_for(made[0].run(), 10)
    assert made[0].passes == 1 and backend.calls == 2
    [failed] = [r for r in caplog.records if r.name == "kuberaven.kube.loops"]
    assert failed.getMessage().startswith("ports' status of c failed (cloud unreachable); again in")
    assert failed.levelno == logging.WARNING and failed.exc_info is None  # expected: one line, no traceback
    assert backend.closed == 1
