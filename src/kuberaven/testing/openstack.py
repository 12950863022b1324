"""A real Neutron and Octavia on loopback (testing/): what the openstack network backend is tested against.

API-only (the default):

    MariaDB (private datadir, socket) ◄── neutron-server (ml2, router plugin, noauth)
                                      ◄── octavia-api + octavia-worker (amphora provider, noop drivers)
    RabbitMQ (private node, own vhost) ◄─┘ (the API hands work to the worker over RPC)

With a data path (``data_path=True``):

    MariaDB ◄── neutron-server (ML2 ovn, ovn-router) ──► OVN NB ◄── ovn-northd ──► SB ◄── ovn-controller
            ◄── octavia-api (ovn provider) + octavia-driver-agent ──┘                  (ovn.py: the chassis)
    + the external network "public" (flat, physnet1 on the chassis' br-ex), its gateway in the external netns

Debian 12's OpenStack Zed packages (``make deps`` installs them), run with no
Keystone and no Nova. API-only, ports and floating IPs stay DOWN and load
balancers go ACTIVE through the noop drivers: for the options the ovn
provider does not offer. With the data path, OVN binds a port to the chassis
once kuberaven-cni plugs it into br-int and Neutron reports it ACTIVE, and
load balancers are OVN's. Everything listens on 127.0.0.1 on free ports or
on unix sockets and lives in one directory; every child dies with the process
that started it. Cold start ≈10 s, ≈1.2 GiB.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .chassis import PeerChassis, tunnel_addresses
from .free_ports import free_port
from .openstack_config import (
    MARIADB_SERVER_OPTIONS,
    RABBITMQ_CONF,
    RABBITMQ_VHOST,
    Layout,
    MariaDBFiles,
    mariadb_options,
    ml2_conf,
    neutron_conf,
    octavia_conf,
    rabbitmq_environment,
)
from .openstack_schema import cache_key, entry, restore, run_together
from .ovn import LOOPBACK, PHYSNET, LocalOVN
from .processes import Process, stop_all, wait_for

if TYPE_CHECKING:
    from ..network.backends.openstack import OpenStackBackend

RABBITMQ_BIN = "/usr/lib/rabbitmq/bin"
PACKAGES = ("neutron-server", "octavia-api", "octavia-worker", "mariadb-server", "python3-pymysql", "rabbitmq-server")
DATA_PATH_PACKAGES = ("python3-ovn-octavia-provider",)
NEUTRON_LOG = "neutron-server.log"  # neutron.conf's log_file, in the environment's directory
# What neutron-server logs, on one line, when its ML2/OVN driver could not initialize (it serves on, refusing
# every port): a CallbackFailure of this callback.
NEUTRON_INIT_FAILED = ("CallbackFailure", "OVNMechanismDriver.pre_fork_initialize")
EXTERNAL_NETWORK = "public"  # the data path's external network, as devstack names it
CLOUD = "kuberaven-local"  # its entry in clouds.yaml
OVN_DIR = "ovn"
BACKING_SERVICES = frozenset({"mariadb", "rabbitmq"})  # what the servers use: stopped after them
# octavia-worker's graceful stop waits out oslo.service's shutdown (≈9 s) with nothing in flight at the end.
WORKER_STOP_TIMEOUT = 2.0
START_TIMEOUT = 180  # seconds for any server to answer (a loaded 2-core machine has taken over 60)


class OpenStackError(RuntimeError):
    pass


def data_path_installed() -> bool:
    from .ovn import installed

    return installed() and Path("/usr/lib/python3/dist-packages/ovn_octavia_provider").is_dir()


class LocalOpenStack:
    """``data_path``: with OVN, whose chassis is named ``hostname`` (the node OVN binds ports for), and one more
    chassis for each of ``peers`` (their nodes' names: testing/chassis.py)."""

    def __init__(
        self, directory: Path | None = None, data_path: bool = False, hostname: str = "", peers: tuple[str, ...] = ()
    ) -> None:
        missing = [b for b in ("neutron-server", "octavia-api", "mariadbd", "rabbitmq-server") if not _which(b)]
        if missing:
            raise OpenStackError(f"not installed: {', '.join(missing)} (Debian packages {' '.join(PACKAGES)})")
        if data_path and not data_path_installed():
            raise OpenStackError(f"not installed: Debian packages {' '.join(DATA_PATH_PACKAGES)} and OVN")
        self.owns_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="kuberaven-openstack-"))
        self.directory = self.directory.absolute()
        self.rabbit_port = free_port()
        self.rabbit_dist_port = free_port()
        self.neutron_port = free_port()
        self.octavia_port = free_port()
        self.processes: list[Process] = []
        self.ovn: LocalOVN | None = None
        self.peers: list[PeerChassis] = []  # started after self.ovn, stopped before it
        if data_path:
            addresses = tunnel_addresses(1 + len(peers))  # none for a lone chassis: it tunnels nowhere
            encap = str(addresses[0].ip) if addresses else LOOPBACK
            ovn = self.ovn = LocalOVN(self.directory / OVN_DIR, hostname or "kuberaven-node-0", encap_ip=encap)
            self.peers = [PeerChassis(ovn, i, name, addresses[i], addresses[0]) for i, name in enumerate(peers, 1)]

    @property
    def neutron_url(self) -> str:
        return f"http://127.0.0.1:{self.neutron_port}/"

    @property
    def octavia_url(self) -> str:
        return f"http://127.0.0.1:{self.octavia_port}/"

    @property
    def clouds_yaml(self) -> Path:
        return self.directory / "clouds.yaml"

    def connection(self) -> Any:
        """An openstacksdk Connection to this Neutron and Octavia (no Keystone)."""
        import openstack

        return openstack.connect(
            auth_type="none",
            network_endpoint_override=self.neutron_url,
            load_balancer_endpoint_override=self.octavia_url,
        )

    def backend(self) -> OpenStackBackend:
        from ..network.backends.openstack import OpenStackBackend

        return OpenStackBackend(self.connection())

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            # What needs no other server starts at once, and each is waited for only where it is needed:
            # RabbitMQ's Erlang VM boots while the data directory is made, OVN while MariaDB starts on it.
            rabbitmq = self._spawn_rabbitmq() if self.ovn is None else None
            self.prepare_database()
            mariadb = self._spawn_mariadb(self._mysql_data)
            if self.ovn is not None:
                self.ovn.start()
            for peer in self.peers:
                peer.start()
            self._make_ca()
            wait_for(self._mysql_ready, START_TIMEOUT, "MariaDB", process=mariadb)
            neutron = self._spawn_neutron()
            octavia = self._spawn_octavia(rabbitmq)
            self._await_neutron(neutron)
            wait_for(
                lambda: _http_ok(self.octavia_url + "v2/lbaas/loadbalancers"), START_TIMEOUT, "Octavia", process=octavia
            )
            if self.ovn is not None:
                self._make_external_network()
            self._write_clouds_yaml()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        # The servers together, then what they use (MariaDB, RabbitMQ): a throwaway stack needs no other order.
        backing = [p for p in self.processes if p.name in BACKING_SERVICES]
        stop_all([p for p in self.processes if p not in backing])
        stop_all(backing)
        self.processes.clear()
        for peer in self.peers:
            peer.stop()
        if self.ovn is not None:
            self.ovn.stop()
        if self.owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _write_clouds_yaml(self) -> None:
        """What `openstack --os-cloud kuberaven-local` and kuberaven (OS_CLIENT_CONFIG_FILE) read."""
        cloud = {
            "auth_type": "none",
            "network_endpoint_override": self.neutron_url,
            "load_balancer_endpoint_override": self.octavia_url,
        }
        self.clouds_yaml.write_text(yaml.safe_dump({"clouds": {CLOUD: cloud}}))

    def _spawn(
        self, name: str, args: list[str], env: dict[str, str] | None = None, stop_timeout: float = 10.0
    ) -> Process:
        process = Process(name, args, self.directory, env=env, stop_timeout=stop_timeout)
        process.start()
        self.processes.append(process)
        return process

    def _run(self, what: str, args: list[str], env: dict[str, str] | None = None) -> None:
        result = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            raise OpenStackError(f"{what} failed: {(result.stderr or result.stdout).strip()[-2000:]}")

    # -- MariaDB ------------------------------------------------------------

    @property
    def _mysql_socket(self) -> Path:
        return self.directory / "mysql.sock"

    @property
    def _mysql_data(self) -> Path:
        return self.directory / "mysql"

    @property
    def _mysql_tmp(self) -> Path:
        return self.directory / "mysql-tmp"

    def prepare_database(self) -> None:
        """The configuration files and MariaDB's data directory with Neutron's and Octavia's tables, before any
        server runs: a copy of the cache's entry (openstack_schema.py; the first start that finds none builds
        it), or, with no key to cache it under, built in place."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_configs()
        key = cache_key()
        if key is None:
            self._build_schemas(self._mysql_data)
        else:
            restore(entry(key, self._build_schemas), self._mysql_data)

    def _mariadb_files(self, datadir: Path) -> MariaDBFiles:
        self._mysql_tmp.mkdir(exist_ok=True)
        return MariaDBFiles(
            datadir, self._mysql_tmp, self._mysql_socket, self.directory / "mysql.pid", as_root=os.geteuid() == 0
        )

    def _spawn_mariadb(self, datadir: Path) -> Process:
        args = ["mariadbd", *mariadb_options(self._mariadb_files(datadir)), *MARIADB_SERVER_OPTIONS]
        return self._spawn("mariadb", args)

    def _mysql_ready(self) -> bool:
        return (
            subprocess.run(
                ["mariadb", "--no-defaults", f"--socket={self._mysql_socket}", "-e", "SELECT 1"], capture_output=True
            ).returncode
            == 0
        )

    def _sql(self, statements: str) -> None:
        self._run("mariadb", ["mariadb", "--no-defaults", f"--socket={self._mysql_socket}", "-e", statements])

    # -- RabbitMQ -----------------------------------------------------------

    def _spawn_rabbitmq(self) -> Process:
        base = self.directory / "rabbitmq"
        base.mkdir(exist_ok=True)
        (base / "enabled_plugins").write_text("[].\n")
        # Octavia's vhost and its user's rights made at boot: no rabbitmqctl (an Erlang VM of its own, seconds each).
        (base / "rabbitmq.conf").write_text(RABBITMQ_CONF)
        # Debian's /usr/sbin wrappers switch to the rabbitmq user and its home; the
        # scripts behind them run as us, with our directories.
        env = rabbitmq_environment(os.environ, base, self.rabbit_port, self.rabbit_dist_port)
        return self._spawn("rabbitmq", [f"{RABBITMQ_BIN}/rabbitmq-server"], env=env)

    def _await_rabbitmq(self, process: Process) -> None:
        """Until RabbitMQ takes connections: it opens its port once its boot (and the vhost's) is done."""
        wait_for(lambda: _tcp_accepts(self.rabbit_port), START_TIMEOUT, "RabbitMQ", process=process)

    # -- Neutron --------------------------------------------------------------

    def _layout(self) -> Layout:
        return Layout(
            self.directory,
            self._mysql_socket,
            self.neutron_port,
            self.octavia_port,
            None if self.ovn else f"rabbit://guest:guest@127.0.0.1:{self.rabbit_port}/{RABBITMQ_VHOST}",
            self.ovn.nb_connection if self.ovn else None,
            self.ovn.sb_connection if self.ovn else None,
        )

    @property
    def _neutron_config(self) -> list[str]:
        return [
            "--config-file",
            str(self.directory / "neutron.conf"),
            "--config-file",
            str(self.directory / "ml2_conf.ini"),
        ]

    @property
    def _octavia_config(self) -> list[str]:
        return ["--config-file", str(self.directory / "octavia.conf")]

    def _write_configs(self) -> None:
        (self.directory / "locks").mkdir(exist_ok=True)
        (self.directory / "neutron.conf").write_text(neutron_conf(self._layout()))
        (self.directory / "ml2_conf.ini").write_text(ml2_conf(self._layout()))
        (self.directory / "octavia.conf").write_text(octavia_conf(self._layout(), self.directory / "certs"))

    def _build_schemas(self, datadir: Path) -> None:
        """A new data directory at ``datadir`` with Neutron's and Octavia's tables, migrated together by a
        MariaDB of its own on this environment's socket, then shut down cleanly (what the cache keeps)."""
        self._run(
            "mariadb-install-db",
            [
                "mariadb-install-db",
                *mariadb_options(self._mariadb_files(datadir)),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
        )
        mariadb = self._spawn_mariadb(datadir)
        try:
            wait_for(self._mysql_ready, START_TIMEOUT, "MariaDB", process=mariadb)
            self._sql("CREATE DATABASE neutron; CREATE DATABASE octavia;")
            try:
                run_together(
                    [
                        ("neutron-db-manage", ["neutron-db-manage", *self._neutron_config, "upgrade", "heads"]),
                        ("octavia-db-manage", ["octavia-db-manage", *self._octavia_config, "upgrade", "head"]),
                    ]
                )
            except RuntimeError as error:
                raise OpenStackError(str(error)) from error
            self._sql("SHUTDOWN")
            assert mariadb.popen is not None
            mariadb.popen.wait(START_TIMEOUT)
        finally:
            self.processes.remove(mariadb)
            mariadb.stop()

    def _await_neutron(self, neutron: Process) -> None:
        """Until Neutron answers; once more after starting it again if its ML2/OVN driver failed to initialize.
        On a loaded machine Debian 12's neutron-server sometimes does (NEUTRON_INIT_FAILED in its log) and serves
        on without it: it answers, and every port it is asked for is a 500."""
        wait_for(lambda: _http_ok(self.neutron_url + "v2.0/networks"), START_TIMEOUT, "Neutron", process=neutron)
        log = self.directory / NEUTRON_LOG
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        if not any(all(part in line for part in NEUTRON_INIT_FAILED) for line in lines):
            return
        neutron.stop()
        self.processes.remove(neutron)
        log.rename(log.with_name(f"{NEUTRON_LOG}.failed"))
        neutron = self._spawn_neutron()
        wait_for(lambda: _http_ok(self.neutron_url + "v2.0/networks"), START_TIMEOUT, "Neutron", process=neutron)

    def _spawn_neutron(self) -> Process:
        # ML2/OVN makes SIGTERM clean its hash ring and nothing else: neutron-server would not end.
        return self._spawn("neutron", ["neutron-server", *self._neutron_config], stop_timeout=2.0 if self.ovn else 10.0)

    # -- Octavia --------------------------------------------------------------

    def _make_ca(self) -> None:
        certs = self.directory / "certs"
        certs.mkdir(exist_ok=True)
        self._run(
            "openssl (a throw-away CA)",
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=kuberaven-test-ca",
                "-keyout",
                str(certs / "ca.key"),
                "-out",
                str(certs / "ca.pem"),
            ],
        )

    def _spawn_octavia(self, rabbitmq: Process | None) -> Process:
        """The API and its worker (API-only: once ``rabbitmq`` is up) or the ovn provider's driver agent: the
        API, to wait for."""
        config = self._octavia_config
        if rabbitmq is not None:
            # The worker once RabbitMQ is up (its RPC server backs off ever longer before), and before the
            # API, as ever: the API's first cast must find the worker's queue, or it is lost.
            self._await_rabbitmq(rabbitmq)
            self._spawn("octavia-worker", ["octavia-worker", *config], stop_timeout=WORKER_STOP_TIMEOUT)
            return self._spawn("octavia-api", ["octavia-api", *config])
        # The ovn provider talks to the driver agent through sockets it always looks for in
        # /var/run/octavia: each environment's are its own directory, mounted there in a mount
        # namespace of the API's and the agent's own.
        sockets = self.directory / "octavia-run"
        sockets.mkdir(exist_ok=True)
        # It waits for its provider agents to end, which the ovn one is slow to do: 10 s and more.
        self._spawn("octavia-driver-agent", [*_private_run(sockets), "octavia-driver-agent", *config], stop_timeout=2.0)
        return self._spawn("octavia-api", [*_private_run(sockets), "octavia-api", *config])

    # -- the external network ---------------------------------------------------

    def _make_external_network(self) -> None:
        """The cloud's "public" network on the chassis' br-ex, with the external netns as its gateway."""
        assert self.ovn is not None
        conn = self.connection()
        network = conn.network.create_network(
            name=EXTERNAL_NETWORK,
            is_router_external=True,
            provider_network_type="flat",
            provider_physical_network=PHYSNET,
        )
        cidr = self.ovn.external
        conn.network.create_subnet(
            network_id=network.id,
            name=EXTERNAL_NETWORK,
            ip_version=4,
            cidr=str(cidr),
            gateway_ip=self.ovn.external_gateway,
            enable_dhcp=False,
        )
        conn.close()


def _private_run(directory: Path) -> list[str]:
    """A command prefix: in a mount namespace of its own, ``directory`` is /run/octavia (on a private /run)."""
    script = 'mount -t tmpfs tmpfs /run && mkdir /run/octavia && mount --bind "$0" /run/octavia && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(directory)]


def _which(binary: str) -> bool:
    return shutil.which(binary) is not None or Path("/usr/sbin", binary).exists()


def _tcp_accepts(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return True


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)
