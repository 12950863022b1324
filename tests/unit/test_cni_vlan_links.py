"""What a user is told when the kernel refuses a nested pod's 802.1Q link (cni/vlan_links.py's add_failure), from
the kernels' own words: Linux's 8021q module (a real VM's), a bare EEXIST, and a kernel without 802.1Q."""

from __future__ import annotations

import pytest

from kuberaven.cni.spec import CniError, ErrorCode
from kuberaven.cni.vlan_links import add_failure

COMMAND = "nsenter --net=/proc/1/ns/net ip link add link eth0 name krv0a1b2c3d4e5 type vlan id 101"


def failed(kernel_says: str) -> CniError:
    return CniError(ErrorCode.IO_FAILURE, f"{COMMAND}: {kernel_says}")


@pytest.mark.parametrize(
    "kernel_says",
    [
        "Error: 8021q: VLAN device already exists.",  # Debian 12's 6.1 kernel, in a QEMU guest (testing/vm.py)
        "RTNETLINK answers: File exists",  # the bare errno, from a kernel that gives no extended ack
    ],
)
def test_an_id_held_by_another_link_is_named_with_what_frees_it(kernel_says: str) -> None:
    told = add_failure(failed(kernel_says), "trunk-0", 101, "eth0")
    assert told.msg == "trunk trunk-0: VLAN id 101 on eth0 is held by another link"
    assert "DEL or GC frees it" in told.details and told.code == ErrorCode.IO_FAILURE


def test_a_kernel_without_8021q_is_named_with_the_option_it_needs() -> None:
    told = add_failure(failed("Error: Unknown device type."), "trunk-0", 101, "eth0")
    assert told.msg.startswith("trunk trunk-0: the VM's kernel makes no 802.1Q links (")
    assert "CONFIG_VLAN_8021Q" in told.details


def test_any_other_refusal_is_passed_on_as_the_kernel_said_it() -> None:
    error = failed('Error: argument "eth9" is wrong: Device does not exist')
    assert add_failure(error, "trunk-0", 101, "eth9") is error
