"""Command line (entry points of every flow): run and testenv here; db/get/apply/delete/events in model_cli;
net can-reach in net_cli.

A command imports what it uses when it runs: at module level these three
modules import only Typer and the standard library, so ``kuberaven --help``
loads neither SQLAlchemy nor the settings nor the daemon
(tests/unit/test_startup.py checks it).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .model_cli import PLAIN_HELP
from .model_cli import register as register_model_commands
from .net_cli import register as register_net_commands

if TYPE_CHECKING:
    from .settings import Settings

# Plain help (rich_markup_mode=None, as kubectl's): Rich's help formatting alone would double `--help`'s time.
app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=PLAIN_HELP,
    help="kuberaven: Kubernetes ⇄ SQL model ⇄ Kafka",
)
testenv_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=PLAIN_HELP, help="The local control plane, fake kubelet and broker"
)
app.add_typer(testenv_app, name="testenv")
register_model_commands(app)
register_net_commands(app)


def _configure_logging(verbose: bool, log_format: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(
            JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s", rename_fields={"levelname": "level"})
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler], force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)


def _cluster_configured(settings: Settings) -> bool:
    from .localstate import local_env_dir

    kubeconfig = settings.kubeconfig or os.environ.get("KUBECONFIG")
    if kubeconfig and Path(kubeconfig).absolute() == (local_env_dir() / "kubeconfig").absolute():
        return False  # the local cluster's (`eval "$(kuberaven testenv env)"`): start it again if it stopped
    return bool(kubeconfig or (Path.home() / ".kube" / "config").exists() or os.environ.get("KUBERNETES_SERVICE_HOST"))


@app.command()
def run(
    kubeconfig: Annotated[str | None, typer.Option(help="kubeconfig file (default: the usual places)")] = None,
    context: Annotated[str | None, typer.Option(help="kubeconfig context")] = None,
    db: Annotated[str | None, typer.Option(help="database URL (KUBERAVEN_DB)")] = None,
    kafka: Annotated[str | None, typer.Option(help="Kafka bootstrap HOST:PORT")] = None,
    topic: Annotated[str | None, typer.Option(help="Kafka topic for pod events")] = None,
    listen: Annotated[str | None, typer.Option(help="HOST:PORT of the API, UI, /healthz /readyz /metrics")] = None,
    token_file: Annotated[str | None, typer.Option(help="file holding the API token (KUBERAVEN_TOKEN_FILE)")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML file of settings (below flags and KUBERAVEN_*)")] = None,
    log_format: Annotated[str | None, typer.Option(help="text | json")] = None,
    network_backend: Annotated[str | None, typer.Option(help="embedded | openstack")] = None,
    network: Annotated[bool | None, typer.Option("--network/--no-network", help="network translation")] = None,
    leader_elect: Annotated[bool | None, typer.Option("--leader-elect/--no-leader-elect")] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Run the daemon. With no cluster configured, start the local control plane and use it."""
    import asyncio
    from dataclasses import replace

    from .daemon import StartupError, run_daemon
    from .localstate import local_env_dir
    from .settings import ConfigError, load_settings
    from .web.tokens import TokenError, load_token, require_token_off_loopback

    try:
        settings = load_settings(
            config,
            kubeconfig=kubeconfig,
            context=context,
            db=db,
            kafka=kafka,
            topic=topic,
            listen=listen,
            token_file=token_file,
            log_format=log_format,
            network_backend=network_backend,
            network=network,
            leader_elect=leader_elect,
        )
        settings.token = load_token(settings.token, settings.token_file)
        require_token_off_loopback(settings.listen.rpartition(":")[0], settings.token)
    except (ConfigError, TokenError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    _refuse_busy_listen(settings.listen)
    _configure_logging(verbose, settings.log_format)
    log = logging.getLogger("kuberaven")
    _check_watchers(settings)  # before a local control plane is started for nothing
    started_env = on_local_env = False
    env_dir = local_env_dir()
    if not _cluster_configured(settings):
        from .localstate import record_daemon
        from .testing.env import STATE_FILE, up

        log.info("no cluster configured: starting the local control plane in %s", env_dir)
        started_env = not (env_dir / STATE_FILE).exists()
        env = up(env_dir, nodes=1)
        on_local_env = True
        settings.kubeconfig = env["kubeconfig"]
        settings.events = replace(settings.events, kafka=settings.events.kafka or env["kafka_bootstrap"])
        record_daemon(env_dir, settings.db, settings.listen)  # `get`, `apply`, … find its database
        log.info("local cluster ready: kubeconfig %s, broker %s", env["kubeconfig"], env["kafka_bootstrap"])
        log.info('kubectl in another shell: eval "$(kuberaven testenv env)"')
    events = settings.events
    log.info("events go to %s", f"Kafka {events.kafka} topic {events.topic}" if events.kafka else "the event log")
    log.info(
        "web UI http://%s/ · API http://%s/api/v1 (docs /docs) · /healthz /readyz /metrics%s",
        settings.listen,
        settings.listen,
        " · API token required" if settings.token else "",
    )
    try:
        code = asyncio.run(run_daemon(settings))
    except StartupError as error:
        log.error("cannot start: %s", error)
        typer.echo(f"error: {error}", err=True)
        code = 1
    finally:
        if on_local_env:
            from .localstate import forget_daemon

            forget_daemon(env_dir)
        if started_env:
            from .testing.env import down

            log.info("stopping the local control plane it started")
            down(env_dir)
    raise typer.Exit(code)


def _refuse_busy_listen(listen: str) -> None:
    """A second `kuberaven run` stops here, before it starts or attaches to anything."""
    from .ports import listen_conflict

    conflict = listen_conflict(listen)
    if conflict is not None:
        typer.echo(f"error: {conflict}", err=True)
        raise typer.Exit(1)


def _check_watchers(settings: Settings) -> None:
    from .plugins import PluginError, import_watchers

    try:
        import_watchers(settings.watchers)
    except PluginError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None


@testenv_app.command("up")
def testenv_up(
    dir: Annotated[Path | None, typer.Option("--dir", help="state directory (default: a new temporary one)")] = None,
    nodes: Annotated[int, typer.Option(help="fake nodes to register")] = 1,
    postgres: Annotated[bool, typer.Option("--postgres", help="also start PostgreSQL (its database_url)")] = False,
    openstack: Annotated[
        bool, typer.Option("--openstack", help="also Neutron + Octavia on an OVN data path (one node: its chassis)")
    ] = False,
) -> None:
    """Start etcd, the control plane, the fake kubelet and the broker (and PostgreSQL, and OpenStack); print one
    JSON object."""
    from .testing.env import EnvError, up

    try:
        print(json.dumps(up(dir, nodes, postgres=postgres, openstack=openstack)))
    except EnvError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None


@testenv_app.command("down")
def testenv_down(dir: Annotated[Path, typer.Option("--dir", help="state directory given to `up`")]) -> None:
    """Stop the test environment started in DIR."""
    from .testing.env import down

    if not down(dir):
        typer.echo(f"no test environment running in {dir}", err=True)
        raise typer.Exit(1)


@testenv_app.command("env")
def testenv_env(
    dir: Annotated[Path | None, typer.Option("--dir", help="state directory (default: the local cluster's)")] = None,
) -> None:
    """Print the shell environment for the running local cluster: eval "$(kuberaven testenv env)"."""
    from .localstate import env_exports, local_env_dir
    from .testing.env import STATE_FILE
    from .testing.processes import pid_alive

    directory = dir or local_env_dir()
    try:
        env = json.loads((directory / STATE_FILE).read_text())
        if not pid_alive(int(env["pid"])):
            raise ValueError("its supervisor is gone")
    except (OSError, ValueError, KeyError):
        typer.echo(
            f"error: no local cluster running in {directory} (start one with `kuberaven run` "
            "or `kuberaven testenv up --dir DIR`)",
            err=True,
        )
        raise typer.Exit(1) from None
    print(env_exports(env))


@testenv_app.command("build")
def testenv_build() -> None:
    """Build (or find) the Kubernetes binaries and print where they are."""
    from .testing.k8s_build import BuildError, binaries

    try:
        found = binaries()
    except BuildError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    print(json.dumps({k: str(v) for k, v in found.__dict__.items()}))


def main() -> None:
    app()
