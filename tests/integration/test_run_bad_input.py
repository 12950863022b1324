"""``kuberaven run`` refuses bad configuration with one clear line and a non-zero exit, storing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kuberaven.testing.free_ports import free_port

UNREACHABLE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: someone, user: {token: nothing}}]
contexts: [{name: gone, context: {cluster: gone, user: someone}}]
current-context: gone
"""


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KUBERAVEN_")}
    clean["KUBERAVEN_DB"] = f"sqlite:///{tmp_path}/k.db"
    command = [sys.executable, "-m", "kuberaven", "run", "--no-network", *args]
    return subprocess.run(command, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=90)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("colour: red\n", "unknown setting 'colour'"),
        ("concurrency: many\n", "concurrency: Input should be a valid integer"),
        ("listen: [unclosed\n", "invalid YAML"),
        ("- a list\n", "must be a mapping"),
    ],
)
def test_a_bad_config_file_is_named(tmp_path: Path, config: str, says: str) -> None:
    path = tmp_path / "kuberaven.yaml"
    path.write_text(config)
    result = run(tmp_path, "--config", str(path))
    assert result.returncode == 2 and says in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "k.db").exists()  # refused before anything is opened


def test_our_cni_with_one_subnet_for_the_cluster_stops_the_start_saying_what_to_set(tmp_path: Path) -> None:
    result = run(tmp_path, env={"KUBERAVEN_NETWORK_CNI": "kuberaven", "KUBERAVEN_NETWORK_SUBNET_MODE": "cluster"})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "network_subnet_mode=cluster cannot work with network_cni=kuberaven" in result.stderr
    assert "set network_subnet_mode=namespace, or leave it unset" in result.stderr
    assert not (tmp_path / "k.db").exists()  # refused before anything is opened


def test_a_misspelt_environment_variable_stops_the_start_naming_the_setting(tmp_path: Path) -> None:
    result = run(tmp_path, env={"KUBERAVEN_NETWORK_BAKEND": "openstack"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: unknown environment variable KUBERAVEN_NETWORK_BAKEND; did you mean KUBERAVEN_NETWORK_BACKEND?"
    ]
    assert not (tmp_path / "k.db").exists()  # refused before anything is opened


def test_a_watcher_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    result = run(tmp_path, env={"KUBERAVEN_WATCHERS": "no_such_module_here:W"})
    assert result.returncode == 1 and "cannot import no_such_module_here" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "k.db").exists()


def test_listening_off_loopback_needs_a_token(tmp_path: Path) -> None:
    public = run(tmp_path, "--listen", f"0.0.0.0:{free_port()}")
    assert public.returncode == 2 and "needs an API token" in public.stderr, public.stderr
    missing = run(tmp_path, "--token-file", str(tmp_path / "no-such-token"))
    assert missing.returncode == 2 and "no-such-token" in missing.stderr, missing.stderr
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    assert "is empty" in run(tmp_path, "--token-file", str(empty)).stderr


def test_an_unreachable_cluster_or_database_stops_the_start(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "gone.kubeconfig"
    kubeconfig.write_text(UNREACHABLE_KUBECONFIG)
    # The server is retried for reach_timeout seconds (15 by default) before the start gives up.
    quick = {"KUBERAVEN_REACH_TIMEOUT": "1"}
    cluster = run(tmp_path, "--kubeconfig", str(kubeconfig), "--listen", f"127.0.0.1:{free_port()}", env=quick)
    assert cluster.returncode == 1, cluster.stderr
    assert "cannot reach the API server at https://127.0.0.1:1" in cluster.stderr and "Traceback" not in cluster.stderr

    missing = run(tmp_path, "--kubeconfig", str(tmp_path / "none.kubeconfig"))
    assert missing.returncode == 1 and "none.kubeconfig not found" in missing.stderr, missing.stderr

    # The default reach_timeout: a database that fails is named at once, while the server is still retried.
    database = run(tmp_path, "--kubeconfig", str(kubeconfig), "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert (
        database.returncode == 1 and "error: database postgresql+psycopg://nobody@127.0.0.1:1/none" in database.stderr
    )
    assert "Traceback" not in database.stderr
