"""Reconcilers' wiring (watch/controller.py, store.py, reconciler.py) driven with plain data."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Hashable

import pytest

from kuberaven.kube.reflector import WatchEvent
from kuberaven.watch.controller import Controller, Marks
from kuberaven.watch.reconciler import DONE, Change, Enqueue, Reconciler, Result, Waiting, Watch
from kuberaven.watch.store import Store
from kuberaven.watch.watcher import WatchTarget
from tests.helpers import eventually

PODS = WatchTarget("v1", "Pod")


def obj(name: str, rv: int, uid: str = "u", **labels: str) -> dict:
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "resourceVersion": str(rv),
        "labels": labels,
        "annotations": {"kuberaven.io/vif": "x", "other": "y" * 100},
    }
    return {"metadata": meta, "spec": {"nodeName": "n1", "containers": [{"image": "big"}]}}


def test_marks_floor_is_the_oldest_event_not_covered() -> None:
    marks = Marks()
    assert marks.floor(5) == 5  # nothing outstanding: every event given is covered
    marks.add("a", 6)
    marks.add("b", 7)
    marks.add("a", 8)  # a waits since 6 still
    assert marks.floor(8) == 5
    marks.take("a")  # a reconcile of a starts: covers 6 and 8
    marks.add("a", 9)  # changed while running
    assert marks.floor(9) == 5
    marks.covered("a")
    assert marks.floor(9) == 6  # b (7) is the oldest now
    marks.take("b")
    marks.failed("b")  # not covered: 7 again
    assert marks.floor(9) == 6
    marks.take("b")
    marks.covered("b")
    assert marks.floor(9) == 8  # a's newer change (9) waits
    marks.take("a")
    marks.covered("a")
    assert marks.floor(12) == 12 and len(marks) == 0


def test_a_failure_keeps_the_oldest_of_what_it_took_and_what_came_meanwhile() -> None:
    marks = Marks()
    marks.add("a", 3)
    marks.take("a")
    marks.add("a", 4)
    marks.failed("a")
    assert marks.dirty == {"a": 3} and marks.floor(4) == 2


class Recorder:
    def __init__(self) -> None:
        self.runs: list[Hashable] = []
        self.active: set[Hashable] = set()
        self.overlaps = 0
        self.fail: dict[Hashable, int] = {}  # key → failures left
        self.requeue: dict[Hashable, float] = {}

    async def reconcile(self, key: Hashable) -> Result | None:
        if key in self.active:
            self.overlaps += 1
        self.active.add(key)
        try:
            await asyncio.sleep(0.001)
            self.runs.append(key)
            if self.fail.get(key):
                self.fail[key] -= 1
                raise Waiting(f"{key} not yet")
            after = self.requeue.pop(key, None)
            return Result(after) if after else DONE
        finally:
            self.active.discard(key)


def controller(recorder: Recorder, watch: Watch, retry: float = 0.01) -> Controller:
    return Controller(Reconciler("t", recorder.reconcile, [watch]), concurrency=4, retry_initial=retry, retry_max=1)


async def test_events_become_keys_reconciled_once_each_never_concurrently() -> None:
    recorder = Recorder()
    watch = Watch(PODS)
    ctl = controller(recorder, watch)
    marks = ctl.attach(lambda: None)
    ctl.start()
    for seq, (name, rv) in enumerate([("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)], start=1):
        ctl.offer(watch, marks, seq, Change("MODIFIED", obj(name, rv)))
    await asyncio.wait_for(ctl.wait_idle(), 5)
    await ctl.stop(1)
    assert sorted(recorder.runs, key=str) == ["ns/a", "ns/b"]  # a burst of changes is one reconcile
    assert recorder.overlaps == 0 and marks.floor(5) == 5


async def test_a_failing_key_is_retried_with_backoff_and_holds_the_position_back_alone() -> None:
    recorder = Recorder()
    recorder.fail["ns/a"] = 2
    watch = Watch(PODS)
    ctl = controller(recorder, watch, retry=0.2)
    marks = ctl.attach(lambda: None)
    ctl.start()
    ctl.offer(watch, marks, 1, Change("ADDED", obj("a", 1)))
    ctl.offer(watch, marks, 2, Change("ADDED", obj("b", 1)))
    # b done and a failed once, a's retry still to come (backoff 0.2 s): a's failure holds the floor at 0.
    await eventually(lambda: "ns/b" in recorder.runs and "ns/a" in recorder.runs, timeout=5, interval=0.001)
    assert marks.floor(2) == 0 and recorder.runs.count("ns/a") < 3
    await asyncio.wait_for(ctl.wait_idle(), 5)
    assert recorder.runs.count("ns/a") == 3 and marks.floor(2) == 2
    assert ctl.queue.failures("ns/a") == 0  # forgotten after its success
    await ctl.stop(1)


async def test_keys_given_to_a_reconcilers_handle_are_reconciled_while_its_controller_runs() -> None:
    """A typed handle, not the reconciler's name: what another part finds reaches this one's queue."""
    recorder = Recorder()
    handle = Enqueue()
    ctl = Controller(Reconciler("t", recorder.reconcile, [Watch(PODS)], enqueue=handle), concurrency=2,
                     retry_initial=0.01, retry_max=1)  # fmt: skip
    handle("ns/early")  # before the controller runs: kept for it
    ctl.start()
    await asyncio.to_thread(handle, "ns/from-a-thread")
    await eventually(lambda: len(recorder.runs) == 2, timeout=5, interval=0.001)
    await asyncio.wait_for(ctl.wait_idle(), 5)
    assert sorted(recorder.runs, key=str) == ["ns/early", "ns/from-a-thread"]
    await ctl.stop(1)
    handle("ns/late")  # stopped: it waits for the next start
    assert recorder.runs.count("ns/late") == 0


async def test_a_controller_started_again_after_a_stop_reconciles_again() -> None:
    """The supervisor runs a crashed engine again: its controllers start again on their queues, which take keys
    again: a key given to the handle while stopped, and the events after the start."""
    recorder = Recorder()
    handle = Enqueue()
    watch = Watch(PODS)
    ctl = Controller(Reconciler("t", recorder.reconcile, [watch], enqueue=handle), concurrency=2,
                     retry_initial=0.01, retry_max=1)  # fmt: skip
    marks = ctl.attach(lambda: None)
    ctl.start()
    handle("ns/first")
    await eventually(lambda: recorder.runs == ["ns/first"], timeout=5, interval=0.001)
    await ctl.stop(1)
    handle("ns/while-stopped")
    ctl.start()
    ctl.offer(watch, marks, 1, Change("ADDED", obj("after", 1)))
    expected = ["ns/after", "ns/first", "ns/while-stopped"]
    await eventually(lambda: sorted(recorder.runs, key=str) == expected, timeout=5, interval=0.001)
    await ctl.stop(1)


async def test_mapping_functions_fan_an_event_out_and_requeue_after_runs_again() -> None:
    recorder = Recorder()

    def selected(change: Change) -> list[str]:
        before = (change.previous or {}).get("metadata", {}).get("labels", {}).get("app")
        after = change.object["metadata"]["labels"].get("app")
        return sorted({f"policy/{app}" for app in (before, after) if app} if before != after else set())

    watch = Watch(PODS, keys=selected, fields=("metadata.labels",))
    ctl = controller(recorder, watch)
    marks = ctl.attach(lambda: None)
    recorder.requeue["policy/web"] = 0.02
    ctl.start()
    ctl.offer(watch, marks, 1, Change("MODIFIED", obj("a", 2, app="web"), previous=obj("a", 1, app="db")))
    ctl.offer(watch, marks, 2, Change("MODIFIED", obj("b", 2, app="x"), previous=obj("b", 1, app="x")))
    await asyncio.wait_for(ctl.wait_idle(), 5)
    # The unchanged label maps to nothing; web, asked to run again, ran twice.
    assert sorted(recorder.runs, key=str) == ["policy/db", "policy/web", "policy/web"]
    await ctl.stop(1)


def test_a_reconciler_must_watch_something_and_each_resource_once() -> None:
    with pytest.raises(ValueError, match="watches nothing"):
        Reconciler("t", Recorder().reconcile, [])
    with pytest.raises(ValueError, match="one resource twice"):
        Reconciler("t", Recorder().reconcile, [Watch(PODS), Watch(PODS)])


def by_app(o: dict) -> list[str]:
    return [o["metadata"]["labels"]["app"]] if o["metadata"].get("labels", {}).get("app") else []


def test_the_store_keeps_declared_fields_and_annotation_keys_and_indexes_them() -> None:
    store = Store()
    store.declare(("metadata.labels", "spec.nodeName"), ("kuberaven.io/vif",), {"app": by_app})
    store.update(WatchEvent("ADDED", obj("a", 1, app="web")))
    kept = store.get("ns/a")
    assert kept is not None and store.previous is None
    assert kept["spec"] == {"nodeName": "n1"}  # containers were not declared
    assert kept["metadata"]["annotations"] == {"kuberaven.io/vif": "x"}  # only the key read
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["a"]
    store.update(WatchEvent("MODIFIED", obj("a", 2, app="db")))
    assert store.previous is not None and store.previous["metadata"]["labels"] == {"app": "web"}
    assert store.by_index("app", "web") == [] and len(store.by_index("app", "db")) == 1
    store.update(WatchEvent("DELETED", obj("a", 3, app="db")))
    assert store.get("ns/a") is None and store.by_index("app", "db") == [] and len(store) == 0


def test_a_read_never_brings_back_what_the_watch_deleted_or_replaced_meanwhile() -> None:
    store = Store()
    store.declare(("metadata.labels",), (), {})
    store.update(WatchEvent("ADDED", obj("newer", 9)))
    read = store.begin_read()
    store.update(WatchEvent("DELETED", obj("gone", 5)))
    store.end_read(read, [store.slim(obj(n, 4)) for n in ("gone", "newer", "fresh")])
    assert store.get("gone") is None  # deleted while the read ran
    assert store.get("ns/gone") is None
    assert store.get("ns/newer")["metadata"]["resourceVersion"] == "9"  # type: ignore[index]  # the watch's is newer
    assert store.get("ns/fresh") is not None  # nothing known of it: kept


def test_an_index_function_is_declared_once() -> None:
    store = Store()
    store.declare((), (), {"app": by_app})
    store.declare((), (), {"app": by_app})  # the same function again: fine
    with pytest.raises(ValueError, match="already declared"):
        store.declare((), (), {"app": lambda o: []})


async def test_a_feeds_position_waits_for_every_key_an_event_mapped_to() -> None:
    """The safe resume point (watch/feeds.py) with a reconciler: the resourceVersion below the oldest event
    not covered by a successful reconcile; the informer's store holds the state before the key is handed out."""
    from kuberaven.watch.feeds import WatcherFeed
    from kuberaven.watch.informers import SharedInformer

    informer = SharedInformer(PODS)
    informer.keep_store(("metadata.labels",))
    recorder = Recorder()
    recorder.fail["ns/b"] = 1
    seen: list[dict | None] = []

    async def reconcile(key: Hashable) -> Result | None:
        seen.append(informer.store.get(str(key)) if informer.store else None)
        return await recorder.reconcile(key)

    ctl = Controller(Reconciler("t-feed", reconcile, [Watch(PODS)]), concurrency=2, retry_initial=0.2, retry_max=1)
    feed = WatcherFeed(informer, [], [(ctl, Watch(PODS))], False, concurrency=2, retry_initial=0.2, retry_max=1)
    informer.declare(feed.consumer, feed, feed.fields)
    ctl.start()
    informer.on_event(WatchEvent("ADDED", obj("a", 11, app="web")))
    informer.on_event(WatchEvent("ADDED", obj("b", 12)))
    informer.on_event(WatchEvent("MODIFIED", obj("a", 13, app="db")))
    # b (12) failed once and waits for its retry: not covered, a's newer change is held behind it.
    await eventually(lambda: "ns/a" in recorder.runs and "ns/b" in recorder.runs, timeout=5, interval=0.001)
    assert feed.position() == "11" and recorder.runs.count("ns/b") == 1
    await asyncio.wait_for(ctl.wait_idle(), 5)
    assert feed.position() == "13"
    assert all(s is not None for s in seen)  # every reconcile found its key's state in the store
    await ctl.stop(1)


async def test_a_reconcile_gets_the_reflectors_own_key_string() -> None:
    """The key queued and reconciled is the event's known_key object itself, not an equal copy (issue 26: one
    string per object for the reflector's record, the store, the queues and the reconcilers' caches); an event
    without one still gets its key from the object."""
    from kuberaven.watch.feeds import WatcherFeed
    from kuberaven.watch.informers import SharedInformer

    informer = SharedInformer(PODS)
    informer.keep_store(())
    keys: list[Hashable] = []

    async def reconcile(key: Hashable) -> Result | None:
        keys.append(key)
        return DONE

    ctl = Controller(Reconciler("t-key", reconcile, [Watch(PODS)]), concurrency=1, retry_initial=0.05, retry_max=1)
    feed = WatcherFeed(informer, [], [(ctl, Watch(PODS))], False, concurrency=1, retry_initial=0.05, retry_max=1)
    informer.declare(feed.consumer, feed, feed.fields)
    ctl.start()
    known = "/".join(["ns", "a"])  # built at run time: not the interned literal "ns/a"
    informer.on_event(WatchEvent("ADDED", obj("a", 1), known_key=known))
    informer.on_event(WatchEvent("ADDED", obj("b", 2)))
    await asyncio.wait_for(ctl.wait_idle(), 5)
    assert keys == ["ns/a", "ns/b"]
    assert keys[0] is known
    await ctl.stop(1)


def test_a_change_without_the_reflectors_key_makes_it_from_the_object() -> None:
    assert Change("ADDED", obj("a", 1)).key == "ns/a"
    assert Change("ADDED", obj("a", 1), known_key="ns/a").key == "ns/a"


def test_marks_make_their_tables_anew_once_nothing_is_outstanding() -> None:
    """A dict keeps its size as keys leave it: the start's backlog would size the marks for good."""
    marks = Marks()
    keys = [f"ns/pod-{i}" for i in range(3000)]
    for seq, key in enumerate(keys, 1):
        marks.add(key, seq)
    for key in keys[:-1]:
        marks.take(key)
        marks.covered(key)
    assert sys.getsizeof(marks.dirty) > 100 * sys.getsizeof({})  # one left: the table is as the backlog made it
    assert marks.floor(3000) == 2999
    marks.take(keys[-1])
    marks.covered(keys[-1])
    assert sys.getsizeof(marks.dirty) == sys.getsizeof(marks.running) == sys.getsizeof({})
    assert marks.floor(3001) == 3001 and len(marks) == 0
    marks.add("again", 3002)  # and the marks go on as before
    assert marks.floor(3002) == 3001
