"""`kuberaven testenv up --node-ports`'s pure parts (testing/node_ports.py, k8s_extra.py): its refusal before
anything starts, kube-proxy's command line and the node's routes, and kube-proxy's place in the build cache
beside the control plane's binaries, which its absence never rebuilds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberaven.network.backend import NetworkOptions
from kuberaven.testing.controlplane import SERVICE_CIDR
from kuberaven.testing.env import EnvError, up
from kuberaven.testing.k8s_build import COMPONENTS, BuildError, binaries
from kuberaven.testing.k8s_extra import extra_binary
from kuberaven.testing.node_ports import CONNTRACK_UNTOUCHED, proxy_args, routed_cidrs
from tests.helpers import kuberaven

EXTERNAL = "172.24.4.0/24"


def test_node_ports_are_refused_without_the_data_path(tmp_path: Path) -> None:
    with pytest.raises(EnvError, match="--node-ports needs --openstack"):
        up(tmp_path / "env", 1, node_ports=True)
    assert not (tmp_path / "env").exists()  # refused before anything was made
    done = kuberaven("testenv", "up", "--dir", str(tmp_path / "env"), "--node-ports")
    assert done.returncode != 0 and "--node-ports needs --openstack" in done.stderr, done.stderr


def test_the_node_routes_the_pods_the_services_and_the_outside_through_its_gateway() -> None:
    assert routed_cidrs(EXTERNAL) == [NetworkOptions().namespace_pool, SERVICE_CIDR, EXTERNAL]


def test_kube_proxy_runs_in_iptables_mode_inside_the_node_netns_as_the_node() -> None:
    args = proxy_args(Path("/cache/kube-proxy"), Path("/env/kubeconfig"), "kuberaven-node-1")
    assert args[:5] == ["ip", "netns", "exec", "{netns}", "/cache/kube-proxy"]
    flags = dict(zip(args[5::2], args[6::2], strict=True))
    assert flags["--proxy-mode"] == "iptables"
    assert flags["--hostname-override"] == "kuberaven-node-1"
    assert flags["--kubeconfig"] == "/env/kubeconfig"
    assert flags["--cluster-cidr"] == NetworkOptions().namespace_pool
    assert flags["--metrics-bind-address"].startswith("127.0.0.1:")  # the node netns' own loopback
    assert all(flags[flag] == "0" for flag in CONNTRACK_UNTOUCHED[::2])  # the machine's conntrack table untouched


def test_kube_proxy_is_found_in_the_cache_beside_the_control_plane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache of the three control plane binaries serves them without kube-proxy (no build), kube-proxy
    missing is an error that names it when no build is allowed, and one that is there is found as it is."""
    cache = tmp_path / "k8s"
    cache.mkdir()
    for component in COMPONENTS:
        (cache / component).write_text("")
    monkeypatch.setenv("KUBERAVEN_K8S_CACHE", str(cache))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    assert binaries(build_if_missing=False).kube_apiserver == cache / "kube-apiserver"
    with pytest.raises(BuildError, match="no kube-proxy in"):
        extra_binary("kube-proxy", build_if_missing=False)
    (cache / "kube-proxy").write_text("")
    assert extra_binary("kube-proxy", build_if_missing=False) == cache / "kube-proxy"
    assert sorted(p.name for p in cache.iterdir()) == sorted([*COMPONENTS, "kube-proxy"])  # nothing built
    with pytest.raises(ValueError, match="not one of kube-proxy"):
        extra_binary("kubelet")


def test_kubebuilder_assets_must_hold_kube_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    with pytest.raises(BuildError, match="lacks kube-proxy"):
        extra_binary("kube-proxy")
    (tmp_path / "kube-proxy").write_text("")
    assert extra_binary("kube-proxy") == tmp_path / "kube-proxy"
