"""An unknown KUBERAVEN_* variable stops the start, naming the closest setting (settings.py)."""

from __future__ import annotations

import pytest

from kuberaven.settings import NOT_SETTINGS, ConfigError, load_settings, setting_names, unknown_variable

SETTINGS = sorted(setting_names())


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({}, None),
        ({"KUBERAVEN_NETWORK_BACKEND": "embedded", "KUBERAVEN_DB": "sqlite://", "HOME": "/x"}, None),
        (
            {"KUBERAVEN_NETWORK_BAKEND": "openstack"},
            "unknown environment variable KUBERAVEN_NETWORK_BAKEND; did you mean KUBERAVEN_NETWORK_BACKEND?",
        ),
        (
            {"KUBERAVEN_LISTN": "0.0.0.0:80"},
            "unknown environment variable KUBERAVEN_LISTN; did you mean KUBERAVEN_LISTEN?",
        ),
        (
            {"kuberaven_concurency": "3"},
            "unknown environment variable kuberaven_concurency; did you mean KUBERAVEN_CONCURRENCY?",
        ),
        (
            {"KUBERAVEN_ZZZZZZZZZZZZZZZ": "1"},
            "unknown environment variable KUBERAVEN_ZZZZZZZZZZZZZZZ; see docs/configuration.md",
        ),
        # Read by other parts, not settings: never refused.
        ({name: "1" for name in NOT_SETTINGS}, None),
        ({"NOT_KUBERAVEN_THING": "1", "KUBERAVENX": "1"}, None),
    ],
)
def test_unknown_variables_are_named_with_the_closest_setting(environ: dict[str, str], says: str | None) -> None:
    assert unknown_variable(environ, SETTINGS) == says


def test_the_variables_the_code_base_reads_are_known() -> None:
    assert {"KUBERAVEN_PLUGINS", "KUBERAVEN_K8S_CACHE", "KUBERAVEN_NEED_SOURCE", "KUBERAVEN_PG_BIN"} <= NOT_SETTINGS
    assert unknown_variable({"KUBERAVEN_TOKEN": "t", "KUBERAVEN_WATCHERS": "a:b"}, SETTINGS) is None


def test_load_settings_refuses_an_unknown_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERAVEN_NETWORK_BAKEND", "openstack")
    with pytest.raises(ConfigError, match="did you mean KUBERAVEN_NETWORK_BACKEND"):
        load_settings()
