"""`kuberaven node`'s settings: flags, KUBERAVEN_NODE_* variables and a config file, each default written once."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kuberaven.cli import app
from kuberaven.node.options import NodeOptions
from kuberaven.node.readiness import Readiness
from kuberaven.node_settings import NODE, NodeSettings, load_node_settings
from kuberaven.setting_schema import ConfigError
from kuberaven.settings import ConfigError as DaemonConfigError
from kuberaven.settings import load_settings

NETWORK_DOC = Path(__file__).parents[2] / "docs" / "network.md"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.upper().startswith("KUBERAVEN_") or k == "NODE_NAME"]:
        monkeypatch.delenv(key)


def test_a_flag_sets_a_node_setting() -> None:
    settings = load_node_settings(None, name="n1", workers="4", park_for="0", readiness="port-active")
    assert settings.agent == NodeOptions(name="n1", workers=4, park_for=0.0, readiness=Readiness.PORT_ACTIVE)


def test_a_variable_sets_a_node_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERAVEN_NODE_NAME", "n2")
    monkeypatch.setenv("KUBERAVEN_NODE_PARK_FOR", "5")
    monkeypatch.setenv("KUBERAVEN_NODE_LOG_FORMAT", "json")
    settings = load_node_settings(None, park_for=None)
    assert (settings.agent.name, settings.agent.park_for, settings.log_format) == ("n2", 5.0, "json")


def test_the_config_file_sets_a_node_setting_below_variables_and_flags(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "node.yaml"
    config.write_text("name: n3\nworkers: 2\nnetns: /run/netns/x\nsocket: /tmp/a.sock\novs_bridge: br-x\n")
    settings = load_node_settings(config)
    assert settings.agent == NodeOptions(
        name="n3", workers=2, netns="/run/netns/x", socket=Path("/tmp/a.sock"), ovs_bridge="br-x"
    )
    monkeypatch.setenv("KUBERAVEN_NODE_WORKERS", "3")
    assert load_node_settings(config).agent.workers == 3
    assert load_node_settings(config, workers="7").agent.workers == 7


def test_a_bad_value_is_named_by_its_setting_and_where_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERAVEN_NODE_PARK_FOR", "soon")
    with pytest.raises(ConfigError) as raised:
        load_node_settings(None, name="n", workers="0", readiness="sometimes")
    text = str(raised.value)
    assert "workers: Input should be greater than or equal to 1 (from --workers)" in text
    assert "park_for: Input should be a valid number" in text and "(from KUBERAVEN_NODE_PARK_FOR)" in text
    assert "readiness: Input should be 'auto', 'ovn-installed' or 'port-active' (from --readiness)" in text


def test_the_name_is_required_and_a_misspelt_variable_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="name: the node's name is required"):
        load_node_settings(None)
    monkeypatch.setenv("KUBERAVEN_NODE_WORKRS", "3")
    with pytest.raises(ConfigError, match="did you mean KUBERAVEN_NODE_WORKERS"):
        load_node_settings(None, name="n")


def test_the_cli_reads_node_name_and_the_old_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """NODE_NAME (the DaemonSet's, from the downward API) and --node-netns as the testenv gives them still work;
    a bad value exits 2 naming its setting, before anything starts."""
    monkeypatch.setenv("NODE_NAME", "n4")
    done = CliRunner().invoke(app, ["node", "--node-netns", "/run/netns/x", "--workers", "0"])
    assert done.exit_code == 2, done.output
    assert "workers: Input should be greater than or equal to 1 (from --workers)" in done.output


def test_the_daemon_and_the_agent_share_an_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kuberaven run` takes a KUBERAVEN_NODE_* variable as known (one environment may serve both), and
    the agent looks only at its own prefix."""
    monkeypatch.setenv("KUBERAVEN_NODE_WORKERS", "3")
    monkeypatch.setenv("KUBERAVEN_DB", "sqlite://")
    load_settings()
    assert load_node_settings(None, name="n").agent.workers == 3
    monkeypatch.setenv("KUBERAVEN_NODE_WORKRS", "3")
    with pytest.raises(DaemonConfigError, match="KUBERAVEN_NODE_WORKRS"):
        load_settings()


def test_the_documented_defaults_are_the_parsed_ones() -> None:
    """docs/network.md's table of the agent's settings says the defaults NodeOptions writes (once), and
    lists every setting with its flag and variable."""
    table = NETWORK_DOC.read_text().split("`kuberaven node`'s settings", 1)[1].split("\n\n", 2)[1]
    rows = {m[1]: m[2].strip("`") for m in re.finditer(r"^\| `--([a-z-]+)`[^|]*\| ([^|]*) \|", table, re.M)}
    defaults = dataclasses.asdict(NodeOptions(name="x"))
    documented = {
        "socket": str(defaults["socket"]),
        "readiness": str(defaults["readiness"]),
        "ovs-bridge": defaults["ovs_bridge"],
        "workers": str(defaults["workers"]),
        "park-for": f"{defaults['park_for']:g}",
        "stop-timeout": f"{defaults['stop_timeout']:g}",
        "log-format": NodeSettings(agent=NodeOptions(name="x")).log_format,
    }
    assert {flag: rows.get(flag) for flag in documented} == documented
    names = {name.replace("_", "-") for name in NODE.names()}
    assert names - {"name", "netns"} <= set(rows), "every setting has its row"
    for name in NODE.names():
        assert NODE.variable(name) in table, name


def test_the_help_shows_each_default_from_the_one_place_it_is_written() -> None:
    """`kuberaven node --help` ends with the defaults, read from NodeOptions (no flag has one of its own)."""
    shown = CliRunner().invoke(app, ["node", "--help"]).output
    defaults = shown.split("Defaults:", 1)[1]
    for flag, value in (
        ("--socket", str(NodeOptions.socket)),
        ("--readiness", str(NodeOptions.readiness)),
        ("--workers", str(NodeOptions.workers)),
        ("--park-for", str(NodeOptions.park_for)),
        ("--stop-timeout", str(NodeOptions.stop_timeout)),
    ):
        assert re.search(rf"^\s+{flag}\s+{re.escape(value)}$", defaults, re.M), (flag, value, shown)
