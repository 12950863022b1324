"""Start-up loads only what the configured features need (model/database.py script_heads, lazy imports)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kuberaven.model.database import script_heads

OPTIONAL = ["openstack", "confluent_kafka", "psycopg", "alembic", "kuberaven.testing", "kuberaven.testing.env"]


def test_the_daemon_on_the_default_configuration_imports_no_optional_part() -> None:
    # What `kuberaven run` imports before it reads its settings: the CLI and the daemon.
    code = (
        "import json, sys, kuberaven.cli, kuberaven.daemon; "
        f"print(json.dumps([m for m in {OPTIONAL!r} if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert loaded == []


def _revision(directory: Path, name: str, revision: str, down: object, annotated: bool = False) -> None:
    colon = ": str" if annotated else ""
    (directory / f"{name}.py").write_text(f'"""{name}"""\nrevision{colon} = {revision!r}\ndown_revision = {down!r}\n')


def test_script_heads_of_a_chain_and_a_plugin_branch(tmp_path: Path) -> None:
    core, plugin = tmp_path / "core", tmp_path / "plugin"
    core.mkdir()
    plugin.mkdir()
    _revision(core, "0001_a", "0001", None)
    _revision(core, "0002_b", "0002", "0001", annotated=True)
    _revision(core, "0003_c", "0003", ("0002",))
    _revision(plugin, "p1", "p1", None)
    (plugin / "__init__.py").write_text("")  # skipped, as Alembic does
    assert script_heads([core, plugin]) == {"0003", "p1"}


def test_script_heads_is_unsure_of_a_revision_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("revision = make_id()\ndown_revision = None\n")
    assert script_heads([tmp_path]) is None
