"""Start-up loads only what the configured features need (model/database.py script_heads, lazy imports)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kuberaven.model.database import script_heads

OPTIONAL = ["openstack", "confluent_kafka", "psycopg", "alembic", "kuberaven.testing", "kuberaven.testing.env"]
# What only the daemon needs: a command that does not run it loads none of it.
DAEMON = ["kuberaven.daemon", "kuberaven.settings", "pydantic_settings", "fastapi", "uvicorn", "lightkube", "httpx2"]
DATABASE = ["sqlalchemy", "kuberaven.model.database", "kuberaven.model.cluster"]


def loaded_by(argv: list[str], candidates: list[str], *, env: dict[str, str] | None = None) -> list[str]:
    """Which of ``candidates`` `kuberaven ARGV` (in a new interpreter) has imported by the time it exits."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['kuberaven', *{argv!r}]\n"
        "from kuberaven.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {candidates!r} if m in sys.modules]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_help_imports_neither_the_database_nor_the_daemon() -> None:
    # Plain help: not even Rich.
    assert loaded_by(["--help"], [*DAEMON, *DATABASE, *OPTIONAL, "rich"]) == []
    assert loaded_by(["get", "--help"], DAEMON + DATABASE + OPTIONAL) == []


def test_importing_the_package_or_the_model_registry_loads_no_library() -> None:
    code = (
        "import json, sys, kuberaven, kuberaven.model.registry, kuberaven.plugins; "
        f"print(json.dumps([m for m in {DAEMON + DATABASE + ['click', 'kuberaven.watch.watcher']!r} "
        "if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert loaded == []


def test_get_as_json_loads_the_model_but_not_the_daemon_nor_rich(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("KUBERAVEN_DB", None)
    loaded_by(["db", "upgrade", "--db", url], [], env=env)  # the schema current: no Alembic after this
    loaded = loaded_by(["get", "Slice", "-o", "json", "--db", url], [*NOT_FOR_GET, "openstack", "sqlalchemy"], env=env)
    assert loaded == ["sqlalchemy"]


# What `get` never needs: the daemon, Rich, Alembic (the schema is current, or made in one step), the plugins'
# policies and watchers (the provisioning loop, the watch machinery, a Kubernetes client), YAML, pydantic (the
# commands are click's: Typer loaded pydantic for every parameter).
NOT_FOR_GET = [
    *("kuberaven.daemon", "kuberaven.settings", "pydantic_settings", "fastapi", "uvicorn", "alembic", "rich"),
    "pydantic",
    *("kuberaven.provisioning.loop", "kuberaven.watch.watcher", "lightkube", "httpx2", "yaml"),
]


def test_get_on_a_fresh_database_makes_the_schema_without_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("KUBERAVEN_DB", None)
    assert loaded_by(["get", "Slice", "-o", "json", "--db", url], NOT_FOR_GET, env=env) == []
    with contextlib.closing(sqlite3.connect(tmp_path / "new.db")) as made:  # the schema is there, and empty
        assert made.execute("SELECT count(*) FROM slice").fetchone() == (0,)


def test_the_lazy_model_package_names_every_public_name_once() -> None:
    import kuberaven.model as model

    assert sorted(model.__all__) == sorted([*model._HOMES, *model._ALIASES])
    assert model.KubernetesConfigMapVolumeMount is model.KubernetesConfigVolumeMount
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        model.Nothing  # noqa: B018 (the lookup is the test)


def test_the_daemon_on_the_default_configuration_imports_no_optional_part() -> None:
    # What `kuberaven run` imports before it reads its settings: the CLI and the daemon.
    code = (
        "import json, sys, kuberaven.cli, kuberaven.daemon; "
        f"print(json.dumps([m for m in {OPTIONAL!r} if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert loaded == []


def test_the_daemon_reads_its_settings_without_pydantic() -> None:
    # The settings are plain dataclasses filled by setting_values.py, without pydantic or pydantic-settings.
    code = (
        "import json, sys, kuberaven.cli, kuberaven.daemon\n"
        "from kuberaven.settings import load_settings\n"
        "load_settings(concurrency='3', network_cni='kuberaven')\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules if m.startswith('pydantic')})))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert loaded == []


def test_run_parses_its_flags_and_reads_its_settings_without_pydantic(tmp_path: Path) -> None:
    # Every flag given, so each one is parsed (Typer built a pydantic TypeAdapter for each, given or not); the
    # missing config file stops `run` once its settings are read, before the daemon starts its web app.
    flags = ["--kubeconfig", "k", "--context", "c", "--db", "sqlite://", "--kafka", "b:9092", "--topic", "t"]
    flags += ["--listen", "127.0.0.1:1", "--log-format", "json", "--network-backend", "embedded", "--no-network"]
    flags += ["--leader-elect", "-v", "--config", str(tmp_path / "missing.yaml")]
    assert loaded_by(["run", *flags], ["pydantic", "kuberaven.settings"]) == ["kuberaven.settings"]


def test_get_and_its_usage_errors_load_no_pydantic(tmp_path: Path) -> None:
    assert loaded_by(["get", "Slice", "-o"], ["pydantic"]) == []  # a usage error: click's own, exit 2
    assert loaded_by(["events", "--since", "x"], ["pydantic"]) == []


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


def test_script_heads_reads_an_assignment_over_several_lines(tmp_path: Path) -> None:
    # The lines that assign revision/down_revision do not parse alone here: the whole file is read instead.
    _revision(tmp_path, "0001_a", "0001", None)
    (tmp_path / "0002_b.py").write_text('revision = "0002"\ndown_revision = (\n    "0001",\n)\n')
    # A docstring line that looks like an assignment comes before the real one, which wins.
    (tmp_path / "0003_c.py").write_text('"""C\nrevision = "not this"\n"""\nrevision = "0003"\ndown_revision = "0002"\n')
    assert script_heads([tmp_path]) == {"0003"}


@pytest.mark.parametrize("extra", ["trio", "h2"])
def test_run_keeps_httpcores_unused_extras_out_of_the_daemon_even_when_installed(tmp_path: Path, extra: str) -> None:
    # httpcore (lightkube's transport) imports trio and h2 whenever they are installed; the daemon runs on
    # asyncio only and speaks HTTP/1.1. Without the refusal in `run` both are loaded by the client below.
    pytest.importorskip(extra)  # installed here with the test tools: the case this guards
    code = (
        "import json, sys\n"
        f"sys.argv = ['kuberaven', 'run', '--config', {str(tmp_path / 'missing.yaml')!r}]\n"
        "from kuberaven.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import httpx2\n"
        "httpx2.AsyncClient()\n"
        f"print(json.dumps([type(sys.modules.get({extra!r})).__name__, 'httpcore2' in sys.modules]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == ["NoneType", True]


def test_without_the_refusal_httpcore_would_load_h2() -> None:
    # The case the test above guards is real here: a plain process making the same client loads h2.
    pytest.importorskip("h2")
    code = "import sys, httpx2; httpx2.AsyncClient(); print('h2' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"


def test_the_models_load_no_database_dialect_and_sqlite_never_loads_postgresql(tmp_path: Path) -> None:
    # The partial indexes keep their predicate beside the index (model/fields.py), not as a dialect's option,
    # which loaded that dialect (PostgreSQL: about 2 MiB and 40-65 ms) when the model class was declared; the
    # daemon's inventory imports its INSERT … ON CONFLICT for the database in use only (inventory/rows.py).
    dialects = ["sqlalchemy.dialects.postgresql", "sqlalchemy.dialects.sqlite"]
    code = (
        "import json, sys, kuberaven.model.tables, kuberaven.model.network, kuberaven.cli, kuberaven.daemon; "
        f"print(json.dumps([m for m in {dialects!r} if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert loaded == []
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("KUBERAVEN_DB", None)
    url = f"sqlite:///{tmp_path / 'k.db'}"
    assert loaded_by(["get", "Slice", "-o", "json", "--db", url], dialects, env=env) == dialects[1:]
    with contextlib.closing(sqlite3.connect(tmp_path / "k.db")) as made:  # the fresh schema's index is partial
        (sql,) = made.execute("SELECT sql FROM sqlite_master WHERE name = 'uq_service_cluster_scoped_name'").fetchone()
    assert sql.endswith("WHERE trust_domain_id IS NULL")


def test_a_partial_index_is_refused_on_a_database_without_them() -> None:
    import sqlalchemy as sa
    from sqlalchemy.dialects import sqlite

    from kuberaven.model.fields import partial_index, with_predicate

    index = partial_index("ix_t_a", "a", where="a IS NULL")
    sa.Table("t", sa.MetaData(), sa.Column("a", sa.Integer), index)
    with pytest.raises(ValueError, match=r"ix_t_a: partial indexes are made on .* not 'mysql'"):
        with_predicate(index, "mysql")
    assert str(sa.schema.CreateIndex(with_predicate(index, "sqlite")).compile(dialect=sqlite.dialect())).endswith(
        "WHERE a IS NULL"
    )


def test_get_of_the_present_builds_no_history_tables(tmp_path: Path) -> None:
    # history.py builds a history table per model table at import: only the past (--at, versions) needs them.
    url = f"sqlite:///{tmp_path / 'k.db'}"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("KUBERAVEN_DB", None)
    past = ["kuberaven.model.history", "kuberaven.model.asof"]
    loaded_by(["db", "upgrade", "--db", url], [], env=env)
    assert loaded_by(["get", "Slice", "-o", "json", "--db", url], past, env=env) == []
    assert loaded_by(["get", "Slice", "-o", "json", "--at", "-1s", "--db", url], past, env=env) == past


def test_a_command_runs_no_collection_before_it_has_started_and_its_start_is_frozen(tmp_path: Path) -> None:
    # cli.main() turns the collector off until model_cli.started() (the database open): the imports and the
    # models' mapping make about a million objects that a `get` walked twenty times (50-60 ms) for nothing.
    url = f"sqlite:///{tmp_path / 'k.db'}"
    code = (
        "import gc, json, sys\n"
        f"sys.argv = ['kuberaven', 'get', 'Slice', '-o', 'json', '--db', {url!r}]\n"
        "from kuberaven import model_cli\n"
        "from kuberaven.cli import GC_THRESHOLDS, main\n"
        "seen = {'started': False, 'early': 0, 'frozen': 0}\n"
        "def started():\n"
        "    seen['started'] = True\n"
        "    real()\n"
        "    seen['frozen'] = gc.get_freeze_count()\n"
        "real, model_cli.started = model_cli.started, started\n"
        "def count(phase, info):\n"
        "    seen['early'] += phase == 'start' and seen['frozen'] == 0 and 'main' in seen\n"
        "gc.callbacks.append(count)\n"
        "seen['main'] = 1\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "seen['enabled'] = gc.isenabled()\n"
        "seen['thresholds'] = list(gc.get_threshold()) == list(GC_THRESHOLDS)\n"
        "print(json.dumps(seen), file=sys.stderr)\n"
    )
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("KUBERAVEN_DB", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    seen = json.loads(done.stderr.strip().splitlines()[-1])
    assert seen["started"] and seen["early"] == 0 and seen["enabled"] and seen["thresholds"]
    assert seen["frozen"] > 100_000  # the start's objects, frozen: no later collection walks them


CONFIGURED = (
    "import json, sys\n"
    "from sqlalchemy import event\n"
    "from sqlalchemy.orm import Mapper\n"
    "configured = []\n"
    "event.listen(Mapper, 'after_configured', lambda: configured.append(True))\n"
    "sys.argv = ['kuberaven', *json.loads(sys.argv[1])]\n"
    "from kuberaven.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print(json.dumps(bool(configured)), file=sys.stderr)\n"
)


def mappers_configured(argv: list[str]) -> bool:
    """Whether `kuberaven ARGV` (in a new interpreter) configured the ORM's mappers."""
    done = subprocess.run([sys.executable, "-c", CONFIGURED, json.dumps(argv)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return bool(json.loads(done.stderr.strip().splitlines()[-1]))


def test_a_command_that_maps_no_row_configures_no_mapper(tmp_path: Path) -> None:
    # The bootstrap is SQL alone (model/bootstrap.py) and `get` asks whether the table holds a row before it
    # uses the ORM: the mappers' configuration (a tenth of a `get`) is paid only when rows are mapped.
    url = f"sqlite:///{tmp_path / 'k.db'}"
    assert not mappers_configured(["get", "Slice", "-o", "json", "--db", url])  # a new database
    assert not mappers_configured(["db", "upgrade", "--db", url])
    assert not mappers_configured(["get", "Slice", "-o", "json", "--db", url])  # the schema current
    assert mappers_configured(["get", "KubernetesService", "-o", "json", "--db", url])  # the bootstrap's row
