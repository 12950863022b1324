"""What a failed `testenv up` tells: its servers' ERROR lines beside the supervisor's tail (testing/env.py)."""

from __future__ import annotations

from pathlib import Path

from kuberaven.testing.env import SUPERVISOR_LOG, server_errors


def test_a_failed_start_names_each_servers_last_errors(tmp_path: Path) -> None:
    neutron = tmp_path / "openstack" / "neutron-server.log"
    neutron.parent.mkdir()
    lines = [f"2026-12-05 22:40:0{i} 1234 ERROR neutron.api: boom {i}" for i in range(5)]
    neutron.write_text("\n".join(["2026-12-05 22:40:00 1234 INFO neutron: fine", *lines]) + "\n")
    (tmp_path / SUPERVISOR_LOG).write_text("x ERROR from the supervisor, already in its tail\n")
    (tmp_path / "octavia.log").write_text("all well\n")
    assert server_errors(tmp_path, last=2) == [f"openstack/neutron-server.log: {line}" for line in lines[-2:]]
