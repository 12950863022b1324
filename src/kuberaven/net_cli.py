"""Network commands (entry points into network/): ``kuberaven net get`` and ``kuberaven net can-reach``.

    kuberaven net get networks|ports|loadbalancers|policies [-n NS] ──► listing_store.list_network() ──► a table
    kuberaven net can-reach NS/A|ADDRESS NS/B|NS/svc/NAME [--port N] [--protocol TCP] [--via ingress]
        ──► reach_store.ask() over the translation rows and the backend that made them (embedded or OpenStack)

Prints the answer and every hop that decided it; exits 0 when the traffic
is allowed, 3 when it is denied, 1 when the question cannot be asked (a bad
name, an unknown pod or Service, an unreadable database or backend).
"""

from __future__ import annotations

import json
from typing import Any

import click

from .model_cli import Group, db_option, fail, open_database, output_option, print_table

DENIED = 3
PAGE = 1000

net_app = Group("net", no_args_is_help=True, help="The network translation: what it made, and what policy allows")

# Columns of `net get` tables: header → the cell of a row.
COLUMNS: dict[str, dict[str, Any]] = {
    "networks": {
        "cluster": lambda r: r["cluster"],
        "namespace": lambda r: r["namespace"],
        "cidr": lambda r: r["cidr"],
        "gateway": lambda r: r["gateway"],
        "network": lambda r: r["network"],
        "subnet": lambda r: r["subnet"],
        "security group": lambda r: r["security_group"],
        "ports": lambda r: r["ports"],
    },
    "ports": {
        "namespace": lambda r: r["namespace"],
        "pod": lambda r: r["pod"],
        "address": lambda r: r["address"],
        "mac": lambda r: r["mac"],
        "node": lambda r: r["node"],
        "port": lambda r: r["port"],
        "security groups": lambda r: ", ".join(f"{g['id']} ({g['from'] or '?'})" for g in r["security_groups"]),
    },
    "loadbalancers": {
        "namespace": lambda r: r["namespace"],
        "service": lambda r: r["service"],
        "vip": lambda r: r["vip_address"],
        "floating ip": lambda r: r["floating_ip"] or r["floating_error"] or "",
        "listeners → members": lambda r: "\n".join(_listener(listener) for listener in r["listeners"]),
    },
    "policies": {
        "namespace": lambda r: r["namespace"],
        "policy": lambda r: r["policy"],
        "security group": lambda r: r["security_group"],
        "directions": lambda r: ",".join(r["directions"]),
        "rules": lambda r: (
            "\n".join(_rule(rule) for rule in r["rules"])
            if r["rules"] is not None
            else f"{r['rule_count']} (in {r['backend']})"
        ),
        "pods": lambda r: ", ".join(r["pods"]),
    },
}


def _listener(listener: dict[str, Any]) -> str:
    if "protocol" not in listener:
        return listener["name"]
    members = (listener.get("pool") or {}).get("members") or []
    targets = ", ".join(f"{m['address']}:{m['port']}" for m in members) or "no members"
    return f"{listener['protocol']}:{listener['port']} → {targets}"


def _rule(rule: dict[str, Any]) -> str:
    peer = "from" if rule["direction"] == "ingress" else "to"
    return f"{rule['direction']} {rule['protocol']} {rule['ports']} {peer} {rule['remote']} ({rule['description']})"


@net_app.command("get")
@click.argument("what", help="networks | ports | loadbalancers | policies")
@click.option("-n", "--namespace", help="only this namespace")
@click.option("--cluster", help="only this cluster")
@output_option
@db_option
def get(what: str, namespace: str | None, cluster: str | None, output: str, db: str | None) -> None:
    """What the network translation made: namespaces' networks, pods' ports, Services' load balancers,
    NetworkPolicies' security groups (from the model; rules with the embedded backend, pools' members with both)."""
    from .network.listing_store import UnknownListing, list_network

    if output not in ("table", "json"):
        raise fail(f"-o {output}: use table or json")
    rows: list[dict[str, Any]] = []
    with open_database(db) as database:
        try:
            while True:
                total, page = list_network(
                    database, what, cluster=cluster, namespace=namespace, limit=PAGE, offset=len(rows)
                )
                rows.extend(page)
                if len(rows) >= total or not page:
                    break
        except UnknownListing as error:
            raise fail(str(error)) from None
    if output == "json":
        print(json.dumps(rows, indent=2))
        return
    columns = COLUMNS[what]
    cells = [[str(cell(row) if cell(row) is not None else "") for cell in columns.values()] for row in rows]
    print_table(f"{what} ({len(rows)})", list(columns), cells)


@net_app.command("can-reach")
@click.argument("source", help="NAMESPACE/POD sending, or an outside IP address")
@click.argument("target", help="NAMESPACE/POD, or NAMESPACE/svc/SERVICE, receiving")
@click.option("--port", type=int, help="destination port (a Service's port; default: any port)")
@click.option("--protocol", default="TCP", show_default=True, help="TCP, UDP or SCTP")
@click.option(
    "--via",
    type=click.Choice(["cluster-ip", "ingress"]),
    default="cluster-ip",
    show_default=True,
    help="a pod to a Service: through its ClusterIP, or its ingress address (floating IP)",
)
@click.option("--cluster", help="cluster name (default: the only one with that pod)")
@click.option(
    "--cloud",
    envvar="KUBERAVEN_NETWORK_CLOUD",
    show_envvar=True,
    help="openstack backend: clouds.yaml entry (default: OS_*)",
)
@output_option
@db_option
def can_reach(
    source: str,
    target: str,
    port: int | None,
    protocol: str,
    via: str,
    cluster: str | None,
    cloud: str | None,
    output: str,
    db: str | None,
) -> None:
    """Whether SOURCE reaches TARGET, and each hop that decides: NetworkPolicies' rules at both ends, and for a
    Service its floating IP, listener, allowed_cidrs and members (from the backend that made them)."""
    from .network.backend import BackendError
    from .network.reach_backends import ReachBackends
    from .network.reach_store import ask, document
    from .network.rules.reach import ReachError

    with open_database(db) as database:
        backends = ReachBackends(database, cloud)
        try:
            reach = ask(database, source, target, port, protocol, cluster, backends, via)
        except (ReachError, BackendError) as error:
            raise fail(str(error)) from None
        finally:
            backends.close()
    if output == "json":
        question = {"from": source, "to": target, "port": port, "protocol": protocol, "via": via}
        print(json.dumps(document(question, reach), indent=2))
    else:
        click.echo(f"{'allowed' if reach.allowed else 'denied'}: {reach.reason}")
        for hop in reach.hops:
            click.echo(f"  {'✓' if hop.allowed else '✗'} {hop.hop} {hop.at}: {hop.reason}")
    if not reach.allowed:
        raise click.exceptions.Exit(DENIED)
