"""A real Neutron and Octavia on loopback (testing/): what the openstack network backend is tested against.

    MariaDB (private datadir, socket) ◄── neutron-server (ml2, router plugin, noauth)
                                      ◄── octavia-api + octavia-worker (amphora provider, noop drivers)
    RabbitMQ (private node, own vhost) ◄─┘ (the API hands work to the worker over RPC)

Debian 12's OpenStack Zed packages (neutron-server, octavia-api,
octavia-worker, mariadb-server, rabbitmq-server; ``make deps`` installs
them), run with no Keystone and no agents: ports and floating IPs stay DOWN,
load balancers go ACTIVE through the noop drivers. Everything listens on
127.0.0.1 on free ports and lives in one directory; every child dies with
the process that started it. Cold start ≈10 s, ≈1.2 GiB.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .processes import Process, free_port, wait_for

if TYPE_CHECKING:
    from ..network.backends.openstack import OpenStackBackend

RABBITMQ_BIN = "/usr/lib/rabbitmq/bin"
PACKAGES = ("neutron-server", "octavia-api", "octavia-worker", "mariadb-server", "python3-pymysql", "rabbitmq-server")


class OpenStackError(RuntimeError):
    pass


class LocalOpenStack:
    def __init__(self, directory: Path | None = None) -> None:
        missing = [b for b in ("neutron-server", "octavia-api", "mariadbd", "rabbitmq-server") if not _which(b)]
        if missing:
            raise OpenStackError(f"not installed: {', '.join(missing)} (Debian packages {' '.join(PACKAGES)})")
        self.owns_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="kuberaven-openstack-"))
        self.mysql_port = free_port()
        self.rabbit_port = free_port()
        self.neutron_port = free_port()
        self.octavia_port = free_port()
        self.processes: list[Process] = []

    @property
    def neutron_url(self) -> str:
        return f"http://127.0.0.1:{self.neutron_port}/"

    @property
    def octavia_url(self) -> str:
        return f"http://127.0.0.1:{self.octavia_port}/"

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
        self._start_mariadb()
        self._start_rabbitmq()
        self._start_neutron()
        self._start_octavia()

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        if self.owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Process:
        process = Process(name, args, self.directory, env=env)
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

    def _start_mariadb(self) -> None:
        data = self.directory / "mysql"
        user = ["--user=root"] if os.geteuid() == 0 else []
        self._run(
            "mariadb-install-db",
            ["mariadb-install-db", f"--datadir={data}", "--auth-root-authentication-method=normal", *user],
        )
        process = self._spawn(
            "mariadb",
            [
                "mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self._mysql_socket}",
                f"--port={self.mysql_port}", "--bind-address=127.0.0.1", "--skip-grant-tables",
                "--innodb-flush-log-at-trx-commit=0", "--skip-log-bin", f"--pid-file={self.directory}/mysql.pid",
                *user,
            ],
        )  # fmt: skip
        wait_for(self._mysql_ready, 60, "MariaDB", process=process)
        self._sql("CREATE DATABASE neutron; CREATE DATABASE octavia;")

    def _mysql_ready(self) -> bool:
        return (
            subprocess.run(
                ["mariadb", f"--socket={self._mysql_socket}", "-e", "SELECT 1"], capture_output=True
            ).returncode
            == 0
        )

    def _sql(self, statements: str) -> None:
        self._run("mariadb", ["mariadb", f"--socket={self._mysql_socket}", "-e", statements])

    def _db_url(self, database: str) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.mysql_port}/{database}"

    # -- RabbitMQ -----------------------------------------------------------

    def _start_rabbitmq(self) -> None:
        base = self.directory / "rabbitmq"
        base.mkdir(exist_ok=True)
        node = f"kuberaven{self.rabbit_port}@localhost"
        env = {
            **os.environ,
            "HOME": str(base),  # the Erlang cookie lives here
            "RABBITMQ_NODENAME": node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.rabbit_port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
        }
        (base / "enabled_plugins").write_text("[].\n")
        (base / "rabbitmq.conf").write_text("loopback_users = none\n")
        # Debian's /usr/sbin wrappers switch to the rabbitmq user and its home; the
        # scripts behind them run as us, with our directories.
        process = self._spawn("rabbitmq", [f"{RABBITMQ_BIN}/rabbitmq-server"], env=env)
        ctl = [f"{RABBITMQ_BIN}/rabbitmqctl", "-n", node]
        wait_for(
            lambda: subprocess.run([*ctl, "await_startup"], env=env, capture_output=True, timeout=30).returncode == 0,
            90, "RabbitMQ", interval=0.5, process=process,
        )  # fmt: skip
        self._run("rabbitmqctl add_vhost", [*ctl, "add_vhost", "octavia"], env=env)
        self._run(
            "rabbitmqctl set_permissions",
            [*ctl, "set_permissions", "-p", "octavia", "guest", ".*", ".*", ".*"],
            env=env,
        )

    # -- Neutron --------------------------------------------------------------

    def _start_neutron(self) -> None:
        conf = self.directory / "neutron.conf"
        ml2 = self.directory / "ml2_conf.ini"
        locks = self.directory / "locks"
        locks.mkdir(exist_ok=True)
        conf.write_text(
            textwrap.dedent(
                f"""\
                [DEFAULT]
                bind_host = 127.0.0.1
                bind_port = {self.neutron_port}
                auth_strategy = noauth
                core_plugin = ml2
                service_plugins = router
                transport_url = fake://
                api_workers = 0
                rpc_workers = 0
                rpc_state_report_workers = 0
                notify_nova_on_port_status_changes = false
                notify_nova_on_port_data_changes = false
                state_path = {self.directory}
                log_file = {self.directory}/neutron-server.log
                [database]
                connection = {self._db_url("neutron")}
                [oslo_concurrency]
                lock_path = {locks}
                [oslo_messaging_notifications]
                driver = noop
                [quotas]
                # One project for every test's clusters: each makes security groups (a namespace's, a policy's),
                # a router (Neutron allows 10), networks, ports and floating IPs.
                quota_security_group = -1
                quota_security_group_rule = -1
                quota_router = -1
                quota_network = -1
                quota_subnet = -1
                quota_port = -1
                quota_floatingip = -1
                """
            )
        )
        ml2.write_text(
            textwrap.dedent(
                """\
                [ml2]
                type_drivers = flat,vxlan,local
                tenant_network_types = vxlan
                mechanism_drivers =
                extension_drivers = port_security
                [ml2_type_flat]
                flat_networks = *
                [ml2_type_vxlan]
                vni_ranges = 1:1000
                """
            )
        )
        config = ["--config-file", str(conf), "--config-file", str(ml2)]
        self._run("neutron-db-manage", ["neutron-db-manage", *config, "upgrade", "heads"])
        process = self._spawn("neutron", ["neutron-server", *config])
        wait_for(lambda: _http_ok(self.neutron_url + "v2.0/networks"), 60, "Neutron", process=process)

    # -- Octavia --------------------------------------------------------------

    def _start_octavia(self) -> None:
        certs = self.directory / "certs"
        certs.mkdir(exist_ok=True)
        self._run(
            "openssl (a throw-away CA)",
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=kuberaven-test-ca", "-keyout", str(certs / "ca.key"), "-out", str(certs / "ca.pem"),
            ],
        )  # fmt: skip
        conf = self.directory / "octavia.conf"
        conf.write_text(
            textwrap.dedent(
                f"""\
                [DEFAULT]
                transport_url = rabbit://guest:guest@127.0.0.1:{self.rabbit_port}/octavia
                log_file = {self.directory}/octavia-service.log
                [api_settings]
                bind_host = 127.0.0.1
                bind_port = {self.octavia_port}
                auth_strategy = noauth
                default_provider_driver = amphora
                enabled_provider_drivers = amphora:amphora
                [database]
                connection = {self._db_url("octavia")}
                [controller_worker]
                amphora_driver = amphora_noop_driver
                compute_driver = compute_noop_driver
                network_driver = network_noop_driver
                volume_driver = volume_noop_driver
                image_driver = image_noop_driver
                loadbalancer_topology = SINGLE
                client_ca = {certs}/ca.pem
                [certificates]
                cert_generator = local_cert_generator
                ca_certificate = {certs}/ca.pem
                ca_private_key = {certs}/ca.key
                [haproxy_amphora]
                server_ca = {certs}/ca.pem
                client_cert = {certs}/ca.pem
                [task_flow]
                jobboard_enabled = false
                [oslo_messaging]
                topic = octavia_prov
                [oslo_concurrency]
                lock_path = {self.directory}/locks
                """
            )
        )
        config = ["--config-file", str(conf)]
        self._run("octavia-db-manage", ["octavia-db-manage", *config, "upgrade", "head"])
        self._spawn("octavia-worker", ["octavia-worker", *config])
        api = self._spawn("octavia-api", ["octavia-api", *config])
        wait_for(lambda: _http_ok(self.octavia_url + "v2/lbaas/loadbalancers"), 60, "Octavia", process=api)


def _which(binary: str) -> bool:
    return shutil.which(binary) is not None or Path("/usr/sbin", binary).exists()


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)
