"""Which change of a port's status is worth an Event (reconcilers/pod_vif.py), how it reads, and activation.py's
restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.network.activation import PortActivation
from kuberaven.network.drivers.port_status import PortStatus
from kuberaven.network.reconcilers.pod_vif import event_of


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

    def __init__(self, activation: Callable[[], PortActivation]) -> None:
        self.calls = 0
        self.activation = activation
        self.port_status = self  # its port status driver is itself

    def port_statuses(self, cluster: str, ports: list[str] | None = None, inactive: bool = False) -> dict:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("cloud unreachable")
        self.activation().stop()
        return {}


async def test_a_run_after_a_crash_gets_threads_of_its_own(tmp_path: Path) -> None:
    """The supervisor runs the component again after a crash; the crashed run shut its executor down."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    database = Database(f"sqlite:///{tmp_path}/k.db")
    database.prepare()
    client = KubeClient.from_kubeconfig(kubeconfig)
    made: list[PortActivation] = []
    backend = FailsOnce(lambda: made[0])
    made.append(PortActivation(client, database, "c", backend, period=0.01))  # type: ignore[arg-type]  # a fake
    try:
        with pytest.raises(RuntimeError, match="cloud unreachable"):
            await made[0].run()
        await made[0].run()  # before: "cannot schedule new futures after shutdown", on every restart
        assert made[0].passes == 1 and backend.calls == 2
    finally:
        await client.close()
        database.dispose()
