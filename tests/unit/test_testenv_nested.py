"""`kuberaven testenv up --nested N`'s refusals and names, before anything starts (testing/env.py, nested.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kuberaven.testing.env import OPENSTACK_DIR, STATE_FILE, EnvError, down, up
from kuberaven.testing.nested import vm_prefix
from kuberaven.testing.openstack import OVN_DIR
from kuberaven.testing.ovn import namespaces
from tests.helpers import kuberaven


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({"nested": 2}, "--nested needs --openstack"),
        ({"nested": -1, "openstack": True}, "--nested is a number of VMs, not -1"),
        ({"nested": 2, "openstack": True, "nodes": 3}, "a chassis per node, 1 to 2: not 3"),
    ],
)
def test_nested_nodes_are_refused_without_the_data_path(
    options: dict[str, int | bool], refusal: str, tmp_path: Path
) -> None:
    nodes = int(options.pop("nodes", 1))
    with pytest.raises(EnvError, match=refusal):
        up(tmp_path / "env", nodes, **options)  # type: ignore[arg-type]
    assert not (tmp_path / "env").exists()  # refused before anything was made


def test_the_cli_says_so_and_the_vms_are_named_after_the_environment(tmp_path: Path) -> None:
    done = kuberaven("testenv", "up", "--dir", str(tmp_path / "env"), "--nested", "2")
    assert done.returncode != 0 and "--nested needs --openstack" in done.stderr, done.stderr
    chassis = tmp_path / "env" / "openstack" / "ovn"
    assert vm_prefix(chassis) == namespaces(chassis)[0].removesuffix("node") + "vm"
    assert vm_prefix(chassis) != vm_prefix(tmp_path / "other" / "openstack" / "ovn")


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_down_removes_the_vms_namespaces_of_a_supervisor_that_died(tmp_path: Path) -> None:
    """A supervisor killed before its own stop leaves the VMs' namespaces: `down` finds them from the directory
    alone, and no other environment's."""
    directory, other = tmp_path / "env", tmp_path / "other"
    directory.mkdir()
    (directory / STATE_FILE).write_text(json.dumps({"pid": 2**22 + 1}))  # no such process
    mine = [f"{vm_prefix(directory / OPENSTACK_DIR / OVN_DIR)}{i}" for i in range(2)]
    theirs = f"{vm_prefix(other / OPENSTACK_DIR / OVN_DIR)}0"
    try:
        for name in [*mine, theirs]:
            subprocess.run(["ip", "netns", "add", name], check=True)
        assert down(directory)
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert [name for name in [*mine, theirs] if name in listed.split()] == [theirs]
    finally:
        for name in [*mine, theirs]:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
