"""Configuration of the local OpenStack (testing/, pure): neutron.conf, ml2_conf.ini, octavia.conf,
RabbitMQ's rabbitmq.conf and environment, MariaDB's options.

    openstack.py ──► Layout (ports, directory, the OVN chassis' sockets or None) ──► the files' text
                 ──► MariaDBFiles (where its files go) ──► mariadbd's and mariadb-install-db's options

Two configurations: API-only (ML2 without a mechanism driver, Octavia's
amphora provider with noop drivers: ports stay DOWN, load balancers go ACTIVE
without a data plane) and data path (ML2 ``ovn`` + the ``ovn-router`` service
plugin, Octavia's ``ovn`` provider and its driver agent, over the OVN
databases' unix sockets).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .ovn import PHYSNET

# One project for every test's clusters: each makes security groups (a namespace's, a policy's),
# a router (Neutron allows 10), networks, ports and floating IPs.
UNLIMITED_QUOTAS = ("security_group", "security_group_rule", "router", "network", "subnet", "port", "floatingip")
RABBITMQ_VHOST = "octavia"
# Octavia's vhost and its user's rights, made at boot: no rabbitmqctl (an Erlang VM of its own, seconds each).
RABBITMQ_CONF = f"""loopback_users = none
default_vhost = {RABBITMQ_VHOST}
default_user = guest
default_pass = guest
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
"""
GENEVE_HEADER = 38  # OVN's geneve header: networks' MTU is 1500 minus this
# A throw-away database: no binary log, no fsync, one tablespace (the schema makes ~300 tables, each a file and
# fsyncs otherwise); no grant tables (no passwords); its unix socket alone, no TCP port (a port chosen free
# before the server binds it can be taken meanwhile by another environment's server or an outgoing connection).
MARIADB_SERVER_OPTIONS = (
    "--skip-networking",
    "--skip-grant-tables",
    "--innodb-flush-log-at-trx-commit=0",
    "--skip-log-bin",
    "--innodb-flush-method=nosync",
    "--innodb-file-per-table=0",
    "--innodb-doublewrite=0",
)


@dataclass(frozen=True)
class MariaDBFiles:
    """Where one MariaDB keeps everything it writes: all in its environment's directory (or its build's)."""

    datadir: Path
    tmpdir: Path
    socket: Path
    pid_file: Path
    as_root: bool = False  # running as root: mariadbd refuses to unless told to


def mariadb_options(files: MariaDBFiles) -> list[str]:
    """Options of ``mariadbd`` and of ``mariadb-install-db`` (its bootstrap server's) that keep it to its own files:
    no option file read (``--no-defaults`` must come first: /etc/mysql names /run/mysqld's socket and pid file),
    and its temporary tables, data, socket and pid file where ``files`` says, never /tmp itself, which another
    environment's server (or another build) may be using at the same moment."""
    return [
        "--no-defaults",
        f"--datadir={files.datadir}",
        f"--tmpdir={files.tmpdir}",
        f"--socket={files.socket}",
        f"--pid-file={files.pid_file}",
        *(["--user=root"] if files.as_root else []),
    ]


@dataclass(frozen=True)
class Layout:
    directory: Path
    mysql_socket: Path  # MariaDB's unix socket (it listens on no port)
    neutron_port: int
    octavia_port: int
    rabbit_url: str | None  # None: no RabbitMQ (the ovn provider needs none)
    nb_connection: str | None = None  # the OVN databases: None for the API-only configuration
    sb_connection: str | None = None

    @property
    def data_path(self) -> bool:
        return self.nb_connection is not None

    def database_url(self, name: str) -> str:
        """oslo.db's connection to database ``name`` over MariaDB's socket."""
        return f"mysql+pymysql://root@localhost/{name}?unix_socket={self.mysql_socket}"


def neutron_conf(layout: Layout) -> str:
    quotas = "\n".join(f"quota_{name} = -1" for name in UNLIMITED_QUOTAS)
    # trunk (nested pods on subports) needs a mechanism driver with a trunk driver: OVN's, the data path's.
    plugins = "ovn-router,trunk" if layout.data_path else "router"
    # ML2/OVN connects to OVN only in forked API workers (and joins the hash ring that spreads OVN's
    # events over them): with the API in neutron-server's own process, its first call would hang. Two, so
    # that port creation, CPU-bound in ML2/OVN, has both cores (it bounds how fast pods get ports).
    api_workers = 2 if layout.data_path else 0
    return (
        textwrap.dedent(
            f"""\
        [DEFAULT]
        bind_host = 127.0.0.1
        bind_port = {layout.neutron_port}
        auth_strategy = noauth
        core_plugin = ml2
        service_plugins = {plugins}
        transport_url = fake://
        api_workers = {api_workers}
        rpc_workers = 0
        rpc_state_report_workers = 0
        notify_nova_on_port_status_changes = false
        notify_nova_on_port_data_changes = false
        state_path = {layout.directory}
        log_file = {layout.directory}/neutron-server.log
        [database]
        connection = {layout.database_url("neutron")}
        [oslo_concurrency]
        lock_path = {layout.directory}/locks
        [oslo_messaging_notifications]
        driver = noop
        [quotas]
        """
        )
        + quotas
        + "\n"
    )


def ml2_conf(layout: Layout) -> str:
    if not layout.data_path:
        return textwrap.dedent(
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
    return textwrap.dedent(
        f"""\
        [ml2]
        type_drivers = flat,geneve,local
        tenant_network_types = geneve
        mechanism_drivers = ovn
        extension_drivers = port_security
        [ml2_type_flat]
        flat_networks = {PHYSNET}
        [ml2_type_geneve]
        vni_ranges = 1:65536
        max_header_size = {GENEVE_HEADER}
        [ovn]
        ovn_nb_connection = {layout.nb_connection}
        ovn_sb_connection = {layout.sb_connection}
        ovn_metadata_enabled = false
        neutron_sync_mode = off
        """
    )


def octavia_conf(layout: Layout, certs: Path) -> str:
    if layout.data_path:
        providers = textwrap.dedent(
            f"""\
            [api_settings]
            bind_host = 127.0.0.1
            bind_port = {layout.octavia_port}
            auth_strategy = noauth
            default_provider_driver = ovn
            enabled_provider_drivers = ovn:OVN provider
            [driver_agent]
            enabled_provider_agents = ovn
            provider_agent_shutdown_timeout = 1
            [ovn]
            ovn_nb_connection = {layout.nb_connection}
            ovn_sb_connection = {layout.sb_connection}
            [neutron]
            endpoint = http://127.0.0.1:{layout.neutron_port}/
            [service_auth]
            auth_type = none
            """
        )
        # The API validates a VIP's subnet and network through its network driver (the noop one knows none).
        network_driver = "allowed_address_pairs_driver"
    else:
        providers = textwrap.dedent(
            f"""\
            [api_settings]
            bind_host = 127.0.0.1
            bind_port = {layout.octavia_port}
            auth_strategy = noauth
            default_provider_driver = amphora
            enabled_provider_drivers = amphora:amphora
            """
        )
        network_driver = "network_noop_driver"
    return (
        textwrap.dedent(
            f"""\
        [DEFAULT]
        transport_url = {layout.rabbit_url or "fake://"}
        log_file = {layout.directory}/octavia-service.log
        [database]
        connection = {layout.database_url("octavia")}
        [controller_worker]
        amphora_driver = amphora_noop_driver
        compute_driver = compute_noop_driver
        network_driver = {network_driver}
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
        lock_path = {layout.directory}/locks
        """
        )
        + providers
    )


def rabbitmq_environment(base_env: Mapping[str, str], base: Path, port: int, dist_port: int) -> dict[str, str]:
    """The environment of a private RabbitMQ node whose files all live in ``base``."""
    return {
        **base_env,
        "HOME": str(base),  # the Erlang cookie lives here
        "RABBITMQ_NODENAME": f"kuberaven{port}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
        # The script then execs the Erlang VM instead of forking it behind a shell: the VM stays
        # our child and keeps PR_SET_PDEATHSIG, so it dies with us even if our stop never runs.
        "RUNNING_UNDER_SYSTEMD": "true",
    }
