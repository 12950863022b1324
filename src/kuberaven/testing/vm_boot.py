"""What boots a nested node's VM (testing/, pure): QEMU's command line, the guest's boot script, its shares.

    qemu_command(): Debian's kernel (vm_image.py) + initramfs, TCG (or KVM), NICs:
        trunk: a tap on the chassis' br-int (fd TAP_FD, vm_tap.py), the trunk's parent port's MAC
        ctl:   QEMU's user-mode network: the guest is CONTROL_ADDRESS, the host's 127.0.0.1 is HOST_ADDRESS,
               and the host's 127.0.0.1:<port> is forwarded to the guest's command server (vm_guest.py)
        9p:    the VM's own directory (rw, tag "vm") and the host's /usr, Python and checkout (read-only)
    boot_script(): run by the initramfs' /init (vm_image.py's INIT) from the "vm" share: mounts, NICs, server

Everything the guest runs is the host's own files, at the same paths: the
project's virtualenv and `ip` from the host's /usr. Nothing here does I/O.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from .vm_guest import GUEST_PATH

CONTROL_NET = "10.0.2.0/24"  # QEMU user-mode network's default
CONTROL_ADDRESS = "10.0.2.15"  # the guest on it
HOST_ADDRESS = "10.0.2.2"  # the host's 127.0.0.1, seen from the guest
CONTROL_PORT = 7000  # the guest's command server (vm_guest.py), on CONTROL_ADDRESS
CONTROL_NIC, TRUNK_NIC = "ctl0", "eth0"  # the guest's NICs, named by their MACs
CONTROL_MAC = "52:54:00:00:0c:{index:02x}"  # the control NIC's MAC of VM ``index`` (its own network: any)
MEMORY = "256M"  # a guest's RAM: the agent, a few pods, the page cache of what it imported
TB_SIZE_MB = 64  # TCG's translation cache: QEMU's default (1 GiB, lazily) costs ~100 MiB more resident
MSIZE = 262144  # 9p's largest message: fewer round trips per read of a module
TAP_FD = 3  # vm_tap.py's descriptor of the trunk NIC's tap
KERNEL_ARGUMENTS = "console=ttyS0 panic=-1 quiet mitigations=off"  # a panic powers off (-no-reboot: QEMU ends)
GUEST_MODULE = "kuberaven/testing/vm_guest.py"  # under the project's src: the command server
ROOT_LINKS = ("bin", "sbin", "lib")  # the guest's /<name> -> usr/<name>, as on Debian (merged /usr)


@dataclass(frozen=True)
class GuestNet:
    """A VM's NICs as the guest must set them: its trunk parent's MAC, address/prefix and MTU; its control NIC."""

    trunk_mac: str
    address: str
    prefix: int
    mtu: int
    control_mac: str


def shares(paths: list[Path]) -> list[tuple[str, Path]]:
    """Read-only 9p shares for ``paths`` (each mounted at its own path in the guest), those inside another one
    left out: (tag, path), tags s0, s1, …"""
    unique = sorted({Path(path) for path in paths}, key=lambda path: (len(path.parts), str(path)))
    kept: list[Path] = []
    for path in unique:
        if not any(path == other or other in path.parents for other in kept):
            kept.append(path)
    return [(f"s{index}", path) for index, path in enumerate(kept)]


def boot_script(node: str, net: GuestNet, shared: list[tuple[str, Path]], python: str, src: Path) -> str:
    """The guest's /vm/boot.sh: the read-only shares mounted (/usr first: /lib is a link into it, as on Debian),
    the NICs named by MAC and addressed, then the command server (``python``, from ``src``) in its place."""
    mount = f"mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize={MSIZE}"
    lines = ["set -e", 'echo "krv-boot: mounting the host\'s files"']
    for tag, path in shared:
        lines += [f"mkdir -p {shlex.quote(str(path))}", f"{mount} {tag} {shlex.quote(str(path))}"]
    lines += [
        *(f"ln -s usr/{name} /{name}" for name in ROOT_LINKS),
        "if [ -d /usr/lib64 ]; then ln -s usr/lib64 /lib64; fi",
        f"export PATH={GUEST_PATH}",
        f"hostname {shlex.quote(node)}",
        *_rename(net.control_mac, CONTROL_NIC),
        *_rename(net.trunk_mac, TRUNK_NIC),
        "ip link set lo up",
        f"ip link set {TRUNK_NIC} mtu {net.mtu} up",
        f"ip address add {net.address}/{net.prefix} dev {TRUNK_NIC}",
        f"ip link set {CONTROL_NIC} up",
        f"ip address add {CONTROL_ADDRESS}/{CONTROL_NET.split('/')[1]} dev {CONTROL_NIC}",
        "mkdir -p /run/netns /run/kuberaven /var && ln -sf /run /var/run",
        'echo "krv-boot: starting the command server"',
        f"exec {shlex.quote(python)} -I -S {shlex.quote(str(src / GUEST_MODULE))} /vm/guest.json",
    ]
    return "\n".join(lines) + "\n"


def _rename(mac: str, name: str) -> list[str]:
    """Shell lines that give the NIC of ``mac`` the name ``name`` (the kernel's own order is no contract)."""
    return [
        "for nic in /sys/class/net/*; do",
        f'  if [ "$(cat "$nic/address")" = "{mac.lower()}" ] && [ "${{nic##*/}}" != "{name}" ]; then',
        f'    ip link set "${{nic##*/}}" name {name}',
        "  fi",
        "done",
    ]


def guest_config(token: str, relayed_ports: list[int]) -> dict[str, object]:
    """vm_guest.py's configuration: where it serves, its token, and the host's ports it relays from the guest's
    127.0.0.1 (the API server's: the agent's kubeconfig says 127.0.0.1)."""
    relays = [{"listen": ["127.0.0.1", port], "target": [HOST_ADDRESS, port]} for port in relayed_ports]
    return {"listen": [CONTROL_ADDRESS, CONTROL_PORT], "token": token, "relays": relays}


def qemu_command(
    kernel: Path, initramfs: Path, vm_dir: Path, shared: list[tuple[str, Path]], trunk_mac: str, index: int,
    host_port: int, accel: str,
) -> list[str]:  # fmt: skip
    """QEMU for VM ``index``: ``accel`` ("tcg" or "kvm"), the console into ``vm_dir``/console.log, the trunk NIC on
    TAP_FD, the control NIC with the host's 127.0.0.1:``host_port`` forwarded to the command server."""
    acceleration = f"tcg,tb-size={TB_SIZE_MB}" if accel == "tcg" else accel
    forward = f"hostfwd=tcp:127.0.0.1:{host_port}-{CONTROL_ADDRESS}:{CONTROL_PORT}"
    command = [
        "qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-machine", "pc", "-accel", acceleration, "-m", MEMORY, "-smp", "1",
        "-kernel", str(kernel), "-initrd", str(initramfs), "-append", KERNEL_ARGUMENTS,
        "-serial", f"file:{vm_dir / 'console.log'}",
        "-netdev", f"tap,id=trunk,fd={TAP_FD}", "-device", f"virtio-net-pci,netdev=trunk,mac={trunk_mac}",
        "-netdev", f"user,id=ctl,net={CONTROL_NET},{forward}",
        "-device", f"virtio-net-pci,netdev=ctl,mac={CONTROL_MAC.format(index=index)}",
        "-virtfs", f"local,path={vm_dir},mount_tag=vm,security_model=none",
    ]  # fmt: skip
    for tag, path in shared:
        command += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,readonly=on"]
    return command
