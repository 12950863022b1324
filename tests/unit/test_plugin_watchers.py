"""Watchers named in the ``watchers`` setting (plugins.py), resolved from import paths; bad ones named."""

from __future__ import annotations

import pytest

from kuberaven.plugins import PluginError, import_watchers
from kuberaven.settings import load_settings
from kuberaven.watch.watcher import Watcher, WatchTarget


async def nothing(_event: object) -> None:
    return None


ONE = Watcher(WatchTarget("v1", "ConfigMap"), nothing, name="one")
SOME = [ONE, Watcher(WatchTarget("v1", "Secret"), nothing, name="two")]
NOT_A_WATCHER = "a string"


def test_a_path_names_a_watcher_or_a_list_of_them() -> None:
    assert import_watchers([f"{__name__}:ONE", f"{__name__}:SOME"]) == [ONE, *SOME]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("no_colon", "not a module:attribute"),
        ("no_such_module_here:W", "cannot import no_such_module_here"),
        (f"{__name__}:MISSING", "has no 'MISSING'"),
        (f"{__name__}:NOT_A_WATCHER", "expected a kuberaven.watch.watcher.Watcher"),
    ],
)
def test_a_bad_path_is_named(path: str, says: str) -> None:
    with pytest.raises(PluginError, match=says):
        import_watchers([path])


def test_the_setting_is_comma_separated_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERAVEN_WATCHERS", "a.b:C, d:E ,")
    assert load_settings().watchers == ["a.b:C", "d:E"]
    assert load_settings(watchers=["x:Y"]).watchers == ["x:Y"]  # a config file's YAML list
