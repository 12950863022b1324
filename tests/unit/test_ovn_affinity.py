"""ClientIP affinity on the ovn provider's OVN load balancers (network/backends/ovn_affinity.py): which value,
clamped to what OVN takes, which rows, what is written; and the client against a real OVN northbound
ovsdb-server (no northd, no provider: rows made as the provider makes them), reachable or not.

The packets are test_affinity.py's (tests/integration/datapath/services/), through the real provider.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kuberaven.network.backend import BackendError
from kuberaven.network.backends.octavia_fields import OVN_NB_SETTING, persistence_for
from kuberaven.network.backends.ovn_affinity import (
    AFFINITY_OPTION,
    DEFAULT_AFFINITY_SECONDS,
    MAX_AFFINITY_SECONDS,
    affinity_seconds,
    differing,
    provider_rows,
)
from kuberaven.network.backends.ovn_northbound import OvnNorthbound
from kuberaven.network.drivers.load_balancers import SOURCE_IP, Persistence
from tests.ovn_nb import nbctl

LB = "3f1e2d4c-0000-4000-8000-00000000abcd"  # an Octavia load balancer's id: the provider's rows' name
VIP = {"neutron:vip": "10.0.0.20"}


@dataclass
class Row:
    name: str
    protocol: list[str]
    options: dict[str, str] = field(default_factory=dict)
    external_ids: dict[str, str] = field(default_factory=lambda: dict(VIP))


def test_the_timeout_is_the_services_whatever_the_protocol_and_kubernetes_default_without_one() -> None:
    assert affinity_seconds(None) == (None, None)  # no affinity: the option removed
    assert affinity_seconds(Persistence(SOURCE_IP)) == (DEFAULT_AFFINITY_SECONDS, None)
    assert affinity_seconds(Persistence(SOURCE_IP, client_timeout=10)) == (10, None)  # a TCP pool: no timeout
    assert affinity_seconds(Persistence(SOURCE_IP, timeout=600)) == (600, None)  # a UDP pool's
    assert affinity_seconds(Persistence(SOURCE_IP, 600, client_timeout=600)) == (600, None)


def test_a_timeout_above_what_ovn_takes_is_clamped_and_said() -> None:
    """OVN's learned flows idle out on a 16-bit timeout: northd would take 86400 as 65535 without a word."""
    assert affinity_seconds(Persistence(SOURCE_IP, client_timeout=MAX_AFFINITY_SECONDS)) == (65535, None)
    seconds, why = affinity_seconds(Persistence(SOURCE_IP, client_timeout=86400))
    assert seconds == MAX_AFFINITY_SECONDS == 65535
    assert why is not None and "86400" in why and "65535 applied" in why, why


def test_the_rows_are_the_providers_of_that_load_balancer_and_the_listeners_protocol() -> None:
    tcp, udp = Row(LB, ["tcp"]), Row(LB, ["udp"])
    rows = [
        tcp,
        udp,
        Row(LB, []),  # a load balancer without listeners: the provider's row has no protocol yet
        Row("another-load-balancer", ["tcp"]),
        Row(LB, ["tcp"], external_ids={}),  # not the provider's (no VIP key)
    ]
    assert provider_rows(rows, LB, "TCP") == [tcp]
    assert provider_rows(rows, LB, "UDP") == [udp]
    assert provider_rows(rows, LB, "SCTP") == []


def test_only_rows_whose_option_differs_are_written() -> None:
    none, ten, other = Row(LB, ["tcp"]), Row(LB, ["tcp"], {AFFINITY_OPTION: "10"}), Row(LB, ["tcp"], {"reject": "x"})
    assert differing([none, ten, other], 10) == [none, other]
    assert differing([none, ten, other], None) == [ten]  # removal: only where it is set
    assert differing([ten], 10) == []


def test_without_the_nb_setting_the_ovn_provider_leaves_affinity_out_naming_the_setting() -> None:
    affinity = Persistence(SOURCE_IP, client_timeout=10)
    wanted, why = persistence_for("ovn", affinity)
    assert wanted is None and why is not None and OVN_NB_SETTING in why and "KUBERAVEN_NETWORK_OVN_NB_CONNECTION" in why
    assert persistence_for("ovn", affinity, ovn_affinity=True) == (None, None)  # set on OVN's rows instead
    assert persistence_for("amphora", affinity, ovn_affinity=True) == ({"type": SOURCE_IP}, None)  # unchanged


# -- against a real OVN northbound database ------------------------------------------------------------------


def provider_row(remote: str, protocol: str, *extra: str) -> str:
    """A Load_Balancer row as Octavia's ovn provider makes one: named after the load balancer, its VIP key."""
    vip = f'external_ids:"neutron:vip"="{VIP["neutron:vip"]}"'
    return nbctl(remote, "create", "Load_Balancer", f"name={LB}", f"protocol={protocol}", vip, *extra)


def options(remote: str, row: str) -> str:
    return nbctl(remote, "get", "Load_Balancer", row, "options")


def test_affinity_is_set_on_the_listeners_row_kept_through_the_providers_writes_and_removed(nb: str) -> None:
    tcp, udp = provider_row(nb, "tcp"), provider_row(nb, "udp", "options:reject=true")
    client = OvnNorthbound(nb, timeout=5)
    try:
        client.ensure_affinity(LB, "TCP", 10)
        assert options(nb, tcp) == '{affinity_timeout="10"}'
        assert options(nb, udp) == '{reject="true"}'  # another protocol's row: its own listener's call
        client.ensure_affinity(LB, "UDP", 600)
        assert options(nb, udp) == '{affinity_timeout="600", reject="true"}'  # the other option kept
        # What the provider writes on a member change (vips, external_ids) leaves the option.
        nbctl(nb, "set", "Load_Balancer", tcp, 'vips:"10.0.0.20:80"="10.64.0.5:8080"', "external_ids:enabled=True")
        client.ensure_affinity(LB, "TCP", 10)
        assert options(nb, tcp) == '{affinity_timeout="10"}'
        client.ensure_affinity(LB, "TCP", 30)  # a new timeoutSeconds
        assert options(nb, tcp) == '{affinity_timeout="30"}'
        client.ensure_affinity(LB, "TCP", None)
        client.ensure_affinity(LB, "TCP", None)  # nothing left to remove
        assert options(nb, tcp) == "{}"
        assert options(nb, udp) == '{affinity_timeout="600", reject="true"}'
        client.ensure_affinity("no-such-load-balancer", "TCP", None)  # nothing to remove: no error
    finally:
        client.close()


def test_a_row_written_over_by_hand_is_set_again(nb: str) -> None:
    """Level-based: what the row holds is compared on every call, not what was written last."""
    tcp = provider_row(nb, "tcp")
    client = OvnNorthbound(nb, timeout=5)
    try:
        client.ensure_affinity(LB, "TCP", 10)
        nbctl(nb, "remove", "Load_Balancer", tcp, "options", AFFINITY_OPTION)

        def set_again() -> str:
            client.ensure_affinity(LB, "TCP", 10)
            return options(nb, tcp)

        deadline = time.monotonic() + 5  # the IDL's replica learns of the removal within moments
        while set_again() != '{affinity_timeout="10"}' and time.monotonic() < deadline:
            time.sleep(0.05)
        assert options(nb, tcp) == '{affinity_timeout="10"}'
    finally:
        client.close()


def test_a_missing_row_to_set_is_an_error_naming_it(nb: str) -> None:
    client = OvnNorthbound(nb, timeout=5, row_wait=0.3)
    try:
        with pytest.raises(
            BackendError, match=f"no Load_Balancer row of the ovn provider named {LB} with protocol tcp"
        ):
            client.ensure_affinity(LB, "TCP", 10)
    finally:
        client.close()


def test_an_nb_database_that_cannot_be_reached_is_a_backend_error_within_the_timeout(tmp_path: Path) -> None:
    """No socket, a refused port, a server that takes the connection and never answers: each a BackendError
    naming the database, within the client's timeout, and the next call tries again."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))  # bound, never listening: a connection is refused
    try:
        for remote in (
            f"unix:{tmp_path / 'none.sock'}",
            f"tcp:127.0.0.1:{refused.getsockname()[1]}",
            f"tcp:127.0.0.1:{silent.getsockname()[1]}",
        ):
            client = OvnNorthbound(remote, timeout=1)
            for _ in range(2):
                started = time.monotonic()
                with pytest.raises(BackendError, match=f"OVN northbound database {remote}"):
                    client.ensure_affinity(LB, "TCP", 10)
                assert time.monotonic() - started < 3
    finally:
        silent.close()
        refused.close()
