"""Network commands (entry points into network/): ``kuberaven net can-reach``.

    kuberaven net can-reach NS/A NS/B [--port N] [--protocol TCP] ──► reach_store.ask() over the embedded model

Prints the answer and which rule decides; exits 0 when policy allows the
traffic, 3 when it denies it, 1 when the question cannot be asked (a bad
name, an unknown pod, an unreadable database).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .model_cli import DbOption, OutputOption, fail, open_database
from .network.reach import ReachError

DENIED = 3

net_app = typer.Typer(no_args_is_help=True, help="The network translation (embedded backend)")


@net_app.command("can-reach")
def can_reach(
    source: Annotated[str, typer.Argument(help="NAMESPACE/POD sending")],
    target: Annotated[str, typer.Argument(help="NAMESPACE/POD receiving")],
    port: Annotated[int | None, typer.Option(help="destination port (default: any port)")] = None,
    protocol: Annotated[str, typer.Option(help="TCP, UDP or SCTP")] = "TCP",
    cluster: Annotated[str | None, typer.Option(help="cluster name (default: the only one with that pod)")] = None,
    output: OutputOption = "table",
    db: DbOption = None,
) -> None:
    """Whether NetworkPolicies let SOURCE reach TARGET, and which rule decides (from the embedded model)."""
    from .network.reach_store import ask

    with open_database(db) as database:
        try:
            reach = ask(database, source, target, port, protocol, cluster)
        except ReachError as error:
            raise fail(str(error)) from None
    if output == "json":
        print(json.dumps(reach.as_dict(), indent=2))
    else:
        typer.echo(f"{'allowed' if reach.allowed else 'denied'}: {reach.reason}")
    if not reach.allowed:
        raise typer.Exit(DENIED)


def register(app: typer.Typer) -> None:
    app.add_typer(net_app, name="net")
