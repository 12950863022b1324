"""Start QEMU with a tap device of another network namespace as its NIC (testing/).

    python -m kuberaven.testing.vm_tap <netns> <tap> -- qemu-system-x86_64 … -netdev tap,fd=3,…

The VM's NIC is a tap in the chassis' node netns, where the userspace
ovs-vswitchd that has it on br-int runs; QEMU itself must stay in the root
netns, where its user-mode network (the control channel) reaches the host's
127.0.0.1. A tap is attached by name in the netns of whoever opens
/dev/net/tun, so this process opens it there, returns to its own netns, and
execs QEMU with the open tap as fd ``TAP_FD`` (the device belongs to that file,
not to the process' netns). Single-threaded: setns moves the whole process.

The tap carries virtio-net headers (IFF_VNET_HDR: QEMU finds it on the fd; as
libvirt sets it up): a packet whose TCP checksum is left to offload (the
pods' veths on the userspace datapath send such packets) reaches the guest
marked so, and the guest's kernel completes or trusts it. Without them, a
connection to a Service's VIP whose member is a nested pod never got its
SYN answered.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys

from .netns_forward import _setns

TAP_FD = 3  # the descriptor QEMU is told (-netdev tap,fd=3)
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000
IFNAMSIZ = 16


def open_tap(netns: str, name: str) -> int:
    """The tap ``name`` of ``netns`` (made by `ip tuntap add`), attached: an open descriptor."""
    own = os.open(f"/proc/{os.getpid()}/ns/net", os.O_RDONLY)
    try:
        _setns(f"/run/netns/{netns}")
        try:
            tap = os.open("/dev/net/tun", os.O_RDWR)
            flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR
            fcntl.ioctl(tap, TUNSETIFF, struct.pack(f"{IFNAMSIZ}sH", name.encode(), flags))
        finally:
            _setns(f"/proc/self/fd/{own}")
    finally:
        os.close(own)
    return tap


def main(arguments: list[str]) -> None:
    netns, name, separator, *command = arguments
    if separator != "--" or not command:
        raise SystemExit("usage: python -m kuberaven.testing.vm_tap <netns> <tap> -- <qemu command>")
    tap = open_tap(netns, name)
    if tap != TAP_FD:
        os.dup2(tap, TAP_FD)
        os.close(tap)
    os.set_inheritable(TAP_FD, True)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
