"""Command line (entry points of every flow): run and testenv here; db/get/apply/delete/events in model_cli;
net can-reach in net_cli.

A command imports what it uses when it runs: at module level these three
modules import only click and the standard library, so ``kuberaven --help``
loads neither SQLAlchemy nor the settings nor the daemon
(tests/unit/test_startup.py checks it). The commands are click's own, not
Typer's: Typer builds a pydantic TypeAdapter for each parameter of the
command that runs, which loaded pydantic into every command (docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from .model_cli import MODEL_COMMANDS, Group, db_app, started
from .net_cli import net_app

if TYPE_CHECKING:
    from .settings import Settings

# Plain help (as kubectl's): Rich's help formatting alone would double `--help`'s time.
app = Group("kuberaven", no_args_is_help=True, help="kuberaven: Kubernetes ⇄ SQL model ⇄ Kafka")
testenv_app = Group("testenv", no_args_is_help=True, help="The local control plane, fake kubelet and broker")


PATH = click.Path(path_type=Path)
# New objects before a young collection, young collections before a middle one, middle ones before a full one
# (Python's defaults: 700, 10, 10): main() says why.
GC_THRESHOLDS = (50_000, 20, 10)
# Imported by httpcore (lightkube's transport) whenever they are installed, used by nothing the daemon does:
# trio (the daemon runs on asyncio only) and h2 (its clients speak HTTP/1.1). _refuse_unused_extras says why.
UNUSED_EXTRAS = ("trio", "h2")


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


@click.command()
@click.option("--kubeconfig", help="kubeconfig file (default: the usual places)")
@click.option("--context", help="kubeconfig context")
@click.option("--db", help="database URL (KUBERAVEN_DB)")
@click.option("--kafka", help="Kafka bootstrap HOST:PORT")
@click.option("--topic", help="Kafka topic for pod events")
@click.option("--listen", help="HOST:PORT of the API, UI, /healthz /readyz /metrics")
@click.option("--token-file", help="file holding the API token (KUBERAVEN_TOKEN_FILE)")
@click.option("--config", type=PATH, help="YAML file of settings (below flags and KUBERAVEN_*)")
@click.option("--log-format", help="text | json")
@click.option("--network-backend", help="embedded | openstack")
@click.option("--network/--no-network", default=None, help="network translation")
@click.option("--network-ovn-nb-connection", help="OVN's northbound database (ClientIP affinity on the ovn provider)")
@click.option("--leader-elect/--no-leader-elect", default=None)
@click.option("-v", "--verbose", is_flag=True)
def run(
    kubeconfig: str | None,
    context: str | None,
    db: str | None,
    kafka: str | None,
    topic: str | None,
    listen: str | None,
    token_file: str | None,
    config: Path | None,
    log_format: str | None,
    network_backend: str | None,
    network: bool | None,
    network_ovn_nb_connection: str | None,
    leader_elect: bool | None,
    verbose: bool,
) -> None:
    """Run the daemon. With no cluster configured, start the local control plane and use it."""
    import asyncio
    from dataclasses import replace

    _refuse_unused_extras()
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
            network_ovn_nb_connection=network_ovn_nb_connection,
            leader_elect=leader_elect,
        )
        settings.token = load_token(settings.token, settings.token_file)
        require_token_off_loopback(settings.listen.rpartition(":")[0], settings.token)
    except (ConfigError, TokenError) as error:
        click.echo(f"error: {error}", err=True)
        raise click.exceptions.Exit(2) from None
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
    # What the imports made (hundreds of thousands of objects) lives as long as the process: frozen, no
    # collection of the cold start walks it again; the collector, off since main(), on from here.
    started()
    try:
        code = asyncio.run(run_daemon(settings))
    except StartupError as error:
        log.error("cannot start: %s", error)
        click.echo(f"error: {error}", err=True)
        code = 1
    finally:
        if on_local_env:
            from .localstate import forget_daemon

            forget_daemon(env_dir)
        if started_env:
            from .testing.env import down

            log.info("stopping the local control plane it started")
            down(env_dir)
    raise click.exceptions.Exit(code)


def _refuse_unused_extras() -> None:
    """Keep the daemon's process from importing httpcore's optional parts that it never uses.

    httpcore (lightkube's HTTP transport) imports trio and h2 whenever they are installed, only to serve code
    running under trio or asking for HTTP/2. The daemon is one asyncio loop and its clients speak HTTP/1.1
    (none is made with http2=True). trio cost 0.2 s of the start and 4 MiB; h2 with hpack and hyperframe
    38 ms of CPU on every start (docs/benchmarks.md). Both come with other tools
    (selenium, an httpx[http2] elsewhere). A module set to None in sys.modules makes its import an
    ImportError, which httpcore takes as "not installed". Only in `kuberaven run`; other commands never load
    httpcore.
    """
    for name in UNUSED_EXTRAS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None in sys.modules refuses the import


def _refuse_busy_listen(listen: str) -> None:
    """A second `kuberaven run` stops here, before it starts or attaches to anything."""
    from .ports import listen_conflict

    conflict = listen_conflict(listen)
    if conflict is not None:
        click.echo(f"error: {conflict}", err=True)
        raise click.exceptions.Exit(1)


def _check_watchers(settings: Settings) -> None:
    from .plugins import PluginError, import_watchers

    try:
        import_watchers(settings.watchers)
    except PluginError as error:
        click.echo(f"error: {error}", err=True)
        raise click.exceptions.Exit(1) from None


class _NodeCommand(click.Command):
    """`kuberaven node`: its help ends with each setting's default, read from node/options.py (their one place)
    only when the help is shown. The options themselves have none: a flag not given stays unset, so that the
    variables and the config file below it are read."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        import dataclasses

        from .node.options import NodeOptions

        defaults = [
            (f"--{field.name.replace('_', '-')}", str(field.default))
            for field in dataclasses.fields(NodeOptions)
            if field.default not in (dataclasses.MISSING, None, "")
        ]
        with formatter.section("Defaults"):
            formatter.write_dl(defaults)
        super().format_epilog(ctx, formatter)


@click.command("node", cls=_NodeCommand)
@click.option("--config", type=PATH, help="YAML file of settings (below flags and KUBERAVEN_NODE_*)")
@click.option("--node", "--name", "name", envvar="NODE_NAME", help="the Kubernetes node served (NODE_NAME)")
@click.option("--socket", help="the unix socket kuberaven-cni calls")
@click.option(
    "--readiness",
    help="when an OVS-plugged pod is ready: ovn-installed (OVS's), port-active (the VIF's ACTIVE), or auto "
    "(ovn-installed where Open_vSwitch external_ids has ovn-remote)",
)
@click.option("--kubeconfig", help="kubeconfig file (default: the usual places, or in-cluster)")
@click.option("--ovsdb", help="the node's Open_vSwitch database (default: ovs-vsctl's own)")
@click.option("--ovs-bridge", help="the bridge OVN binds ports on")
@click.option("--node-netns", "--netns", "netns", help="netns path of the node's OVS and pods' host ends")
@click.option("--workers", metavar="INTEGER", help="pods wired at once")
@click.option(
    "--park-for", metavar="SECONDS", help="how long a gone pod's veth pair stays bound for its port's next pod"
)
@click.option("--stop-timeout", metavar="SECONDS", help="how long the calls in flight get on SIGTERM")
@click.option("--log-format", help="text | json")
@click.option("-v", "--verbose", is_flag=True)
def node(config: Path | None, verbose: bool, **flags: str | None) -> None:
    """Run the node agent that kuberaven-cni hands CNI calls to (deploy/kuberaven-cni.yaml's DaemonSet).

    Every flag is also a KUBERAVEN_NODE_<NAME> variable and a key of --config's file; their defaults are in
    docs/network.md."""
    import asyncio

    _refuse_unused_extras()
    from .node.agent import KubeconfigError, run_agent
    from .node.server import SocketInUse
    from .node_settings import load_node_settings
    from .setting_schema import ConfigError

    try:
        settings = load_node_settings(config, **flags)
    except ConfigError as error:
        click.echo(f"error: {error}", err=True)
        raise click.exceptions.Exit(2) from None
    _configure_logging(verbose, settings.log_format)
    started()
    try:
        asyncio.run(run_agent(settings.agent, settings.kubeconfig))
    except (SocketInUse, KubeconfigError) as error:
        click.echo(f"error: {error}", err=True)
        raise click.exceptions.Exit(1) from None


@testenv_app.command("up")
@click.option("--dir", type=PATH, help="state directory (default: a new temporary one)")
@click.option("--nodes", default=1, show_default=True, help="fake nodes to register")
@click.option("--postgres", is_flag=True, help="also start PostgreSQL (its database_url)")
@click.option("--openstack", is_flag=True, help="also Neutron + Octavia on an OVN data path (a chassis per node)")
@click.option(
    "--nested",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="with --openstack: N VMs on the chassis (QEMU guests of Debian's kernel whose NIC is a trunk's parent "
    "port), each a nested node kuberaven-vm-<i> (InternalIP: that port's) with its own node agent in the guest; the "
    "JSON's openstack.nested gives each VM's exec (how to run a command in it) and cni_config",
)
@click.option(
    "--nested-netns",
    is_flag=True,
    help="with --nested: the VMs are network namespaces (fast: no guest boots; the agents run beside them, and "
    "pods' 802.1Q links need this host's kernel to make them)",
)
@click.option(
    "--node-ports",
    is_flag=True,
    help="with --openstack: each node a port into OVN (its InternalIP) and kube-proxy (iptables mode, built on "
    "first use) in its netns, serving <node address>:<nodePort>; the JSON's openstack.node_ports",
)
def testenv_up(
    dir: Path | None, nodes: int, postgres: bool, openstack: bool, nested: int, nested_netns: bool, node_ports: bool
) -> None:
    """Start etcd, the control plane, the fake kubelet and the broker (and PostgreSQL, and OpenStack, and VMs on
    it, and kube-proxy for node ports); print one JSON object."""
    from .testing.env import EnvError, up
    from .testing.k8s_build import BuildError
    from .testing.vm_image import ImageError

    try:
        described = up(
            dir, nodes, postgres=postgres, openstack=openstack, nested=nested, node_ports=node_ports,
            nested_netns=nested_netns,
        )  # fmt: skip
        print(json.dumps(described))
    except (EnvError, BuildError, ImageError) as error:
        _testenv_failed(error)


@testenv_app.command("down")
@click.option("--dir", type=PATH, required=True, help="state directory given to `up`")
def testenv_down(dir: Path) -> None:
    """Stop the test environment started in DIR."""
    from .testing.env import down

    if not down(dir):
        click.echo(f"no test environment running in {dir}", err=True)
        raise click.exceptions.Exit(1)


@testenv_app.command("env")
@click.option("--dir", type=PATH, help="state directory (default: the local cluster's)")
def testenv_env(dir: Path | None) -> None:
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
        click.echo(
            f"error: no local cluster running in {directory} (start one with `kuberaven run` "
            "or `kuberaven testenv up --dir DIR`)",
            err=True,
        )
        raise click.exceptions.Exit(1) from None
    print(env_exports(env))


@testenv_app.command("restart", short_help="Restart one server (apiserver) of the running environment.")
@click.argument("component")
@click.option("--dir", type=PATH, help="state directory (default: the local cluster's)")
def testenv_restart(component: str, dir: Path | None) -> None:
    """Restart COMPONENT of the running environment, leaving its other servers running. COMPONENT: apiserver
    (kube-apiserver, killed and started again with the same flags, port, certificates and etcd data).

    Prints one JSON object once it serves again: down_seconds (from the kill to /readyz answering), previous_pid,
    pid."""
    from dataclasses import asdict

    from .localstate import local_env_dir
    from .testing.env import restart
    from .testing.restart import RestartFailed, UnknownComponent

    try:
        print(json.dumps(asdict(restart(dir or local_env_dir(), component))))
    except UnknownComponent as error:
        click.echo(f"error: {error}", err=True)
        raise click.exceptions.Exit(2) from None
    except RestartFailed as error:
        _testenv_failed(error)


@testenv_app.command("build")
def testenv_build() -> None:
    """Build (or find) the Kubernetes binaries and print where they are."""
    from .testing.k8s_build import BuildError, binaries

    try:
        found = binaries()
    except BuildError as error:
        _testenv_failed(error)
    print(json.dumps({k: str(v) for k, v in found.__dict__.items()}))


def _testenv_failed(error: Exception) -> NoReturn:
    """A testenv command's error on stderr and its exit: 2 for a cache location to fix (a setting, as a bad
    option), 1 for what failed on the way (a build step, a server)."""
    from .testing.k8s_build import CacheLocationError

    click.echo(f"error: {error}", err=True)
    raise click.exceptions.Exit(2 if isinstance(error, CacheLocationError) else 1) from None


# In --help's order: the commands, then the groups.
for _command in (*MODEL_COMMANDS, run, node, testenv_app, db_app, net_app):
    app.add_command(_command)


def main() -> None:
    """The kuberaven command, with the garbage collector set for what kuberaven does.

    With Python's default thresholds (a young collection every 700 new objects) a 5,000-pod cold start of
    the daemon ran about 1,000 collections, a quarter of its CPU time, walking the growing store again and
    again (docs/benchmarks.md); with GC_THRESHOLDS a handful, for 2 MiB more at the peak. Cyclic garbage is
    still collected, in larger steps; everything else is freed by reference counting. At exit the
    interpreter's last collections would walk every object the imports made (a quarter of a `get`): frozen
    objects are skipped, and finalizers and atexit handlers still run.

    The collector is off until the command has started (model_cli.started(): `run` once its imports are made,
    every command that opens a database once it has): what a command's start makes lives as long as it does.
    A command that opens no database (help, testenv) is short and runs without it.
    """
    gc.set_threshold(*GC_THRESHOLDS)
    gc.disable()
    try:
        app()
    finally:
        gc.freeze()
        gc.enable()  # a caller of main() in its own process (a test) gets its collector back
