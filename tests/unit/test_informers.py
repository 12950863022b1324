"""Shared informers (watch/informers.py): where a shared watch starts, and what each consumer receives."""

from __future__ import annotations

from kuberaven.kube.reflector import ObjectVersion, WatchEvent
from kuberaven.watch.informers import Joined, SharedInformer
from kuberaven.watch.watcher import WatchTarget


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict]] = []
        self.bookmarks: list[str] = []

    def on_event(self, event: WatchEvent) -> None:
        self.events.append((event.type, event.object["metadata"]["resourceVersion"], event.object))

    def on_bookmark(self, resource_version: str) -> None:
        self.bookmarks.append(resource_version)

    def on_synced(self) -> None: ...

    async def wait_for_room(self) -> None: ...


def pod(rv: int) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": str(rv)},
        "spec": {"nodeName": "n1"},
        "status": {"podIP": "10.1.0.5", "phase": "Running"},
    }


def informer_with(*joins: tuple[str, Joined]) -> tuple[SharedInformer, dict[str, Listener]]:
    informer = SharedInformer(WatchTarget("v1", "Pod"))
    listeners = {name: Listener() for name, _ in joins}
    for name, _ in joins:
        informer.declare(name, listeners[name], ("status.podIP",) if name == "network" else ("spec.nodeName",))
    for name, joined in joins:
        informer.join(name, joined)
    return informer, listeners


def test_a_restart_resumes_at_the_oldest_position_and_the_consumer_ahead_skips_what_it_had() -> None:
    informer, listeners = informer_with(
        ("inventory", Joined("150", {"ns/p": ObjectVersion("u", "140")}, known_complete=True)),
        ("network", Joined("100")),
    )
    position, known, complete = informer.start_position()
    assert (position, complete) == ("100", True) and known == {"ns/p": ObjectVersion("u", "140")}
    for rv in (120, 150, 160):
        informer.on_event(WatchEvent("MODIFIED", pod(rv)))
    informer.on_bookmark("130")
    informer.on_bookmark("170")
    assert [rv for _, rv, _ in listeners["network"].events] == ["120", "150", "160"]
    assert [rv for _, rv, _ in listeners["inventory"].events] == ["160"]  # 120 and 150 were handled before
    assert listeners["inventory"].bookmarks == ["170"]  # its stored position never moves back
    assert listeners["network"].bookmarks == ["130", "170"]
    informer.on_event(WatchEvent("MODIFIED", pod(110), relisted=True))  # a relist's diff: everyone sees it
    assert len(listeners["inventory"].events) == 2


def test_a_consumer_without_a_position_or_needing_a_list_makes_the_informer_list() -> None:
    informer, _ = informer_with(("inventory", Joined("150")), ("network", Joined(None)))
    assert informer.start_position()[0] is None
    informer, _ = informer_with(("inventory", Joined("150")), ("network", Joined("150", needs_list=True)))
    assert informer.start_position()[0] is None


def test_each_consumer_receives_only_the_fields_it_declared() -> None:
    informer, listeners = informer_with(("inventory", Joined(None)), ("network", Joined(None)))
    informer.on_event(WatchEvent("ADDED", pod(5)))
    seen_by_network, seen_by_inventory = listeners["network"].events[0][2], listeners["inventory"].events[0][2]
    assert seen_by_network["status"] == {"podIP": "10.1.0.5"} and "spec" not in seen_by_network
    assert seen_by_inventory["spec"] == {"nodeName": "n1"} and "status" not in seen_by_inventory
