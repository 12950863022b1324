"""How a nested node's VM is booted, from plain data (testing/vm_boot.py): its shares, its boot script and QEMU's
command line, and when KVM is used (testing/vm.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kuberaven.testing.vm import ACCEL_VARIABLE, kvm_usable
from kuberaven.testing.vm_boot import (
    CONTROL_ADDRESS,
    CONTROL_PORT,
    HOST_ADDRESS,
    GuestNet,
    boot_script,
    guest_config,
    qemu_command,
    shares,
)

NET = GuestNet("FA:16:3E:00:00:01", "192.168.240.10", 24, 1442, "52:54:00:00:0c:00")
SHARED = [("s0", Path("/usr")), ("s1", Path("/srv/checkout"))]


def test_a_path_inside_another_share_is_no_share_of_its_own() -> None:
    paths = [Path("/srv/checkout/.venv"), Path("/usr"), Path("/srv/checkout"), Path("/usr"), Path("/opt/python")]
    assert shares(paths) == [("s0", Path("/usr")), ("s1", Path("/opt/python")), ("s2", Path("/srv/checkout"))]


def test_the_boot_script_mounts_usr_before_linking_into_it_then_names_the_nics_and_serves() -> None:
    script = boot_script("kuberaven-vm-0", NET, SHARED, "/srv/checkout/.venv/bin/python", Path("/srv/checkout/src"))
    lines = script.splitlines()
    mount_usr = next(i for i, line in enumerate(lines) if line.startswith("mount -t 9p") and line.endswith(" s0 /usr"))
    assert "ro" in lines[mount_usr].split()[4].split(",")
    assert mount_usr < lines.index("ln -s usr/bin /bin") and "ln -s usr/lib /lib" in lines
    assert '  if [ "$(cat "$nic/address")" = "fa:16:3e:00:00:01" ] && [ "${nic##*/}" != "eth0" ]; then' in lines
    assert "ip link set eth0 mtu 1442 up" in lines and "ip address add 192.168.240.10/24 dev eth0" in lines
    assert f"ip address add {CONTROL_ADDRESS}/24 dev ctl0" in lines
    assert lines[-1] == (
        "exec /srv/checkout/.venv/bin/python -I -S /srv/checkout/src/kuberaven/testing/vm_guest.py /vm/guest.json"
    )
    assert lines[0] == "set -e"


def test_the_guest_relays_the_hosts_ports_from_its_own_loopback() -> None:
    config = guest_config("t0k3n", [6443])
    assert config == {
        "listen": [CONTROL_ADDRESS, CONTROL_PORT],
        "token": "t0k3n",
        "relays": [{"listen": ["127.0.0.1", 6443], "target": [HOST_ADDRESS, 6443]}],
    }


def test_qemu_boots_the_kernel_with_the_tap_the_control_network_and_the_shares() -> None:
    command = qemu_command(Path("/c/vmlinux"), Path("/c/initrd"), Path("/e/vms/vm0"), SHARED, "fa:16:3e:00:00:01", 3,
                           40123, "tcg")  # fmt: skip
    pairs = list(itertools.pairwise(command))
    assert ("-accel", "tcg,tb-size=64") in pairs and ("-kernel", "/c/vmlinux") in pairs and "-no-reboot" in command
    assert ("-netdev", "tap,id=trunk,fd=3") in pairs
    assert ("-device", "virtio-net-pci,netdev=trunk,mac=fa:16:3e:00:00:01") in pairs
    assert ("-netdev", f"user,id=ctl,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:40123-{CONTROL_ADDRESS}:7000") in pairs
    assert ("-device", "virtio-net-pci,netdev=ctl,mac=52:54:00:00:0c:03") in pairs
    assert ("-virtfs", "local,path=/e/vms/vm0,mount_tag=vm,security_model=none") in pairs
    assert ("-virtfs", "local,path=/usr,mount_tag=s0,security_model=none,readonly=on") in pairs
    assert ("-serial", "file:/e/vms/vm0/console.log") in pairs
    kvm = qemu_command(Path("k"), Path("i"), Path("d"), [], "m", 0, 1, "kvm")
    assert ("-accel", "kvm") in itertools.pairwise(kvm)


@pytest.mark.parametrize(("chosen", "expected"), [("tcg", False), ("kvm", True)])
def test_the_accelerator_can_be_chosen(monkeypatch: pytest.MonkeyPatch, chosen: str, expected: bool) -> None:
    monkeypatch.setenv(ACCEL_VARIABLE, chosen)
    assert kvm_usable() is expected
