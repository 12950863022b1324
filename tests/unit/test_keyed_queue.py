"""KeyedQueue: per-object order, collapsing, concurrency bound and retry backoff."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time

import pytest

from kuberaven.kube.reflector import WatchEvent
from kuberaven.watch.queue import KeyedQueue
from tests.helpers import eventually


def pod(name: str, rv: int, uid: str = "u1") -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(rv)}}


class Recorder:
    def __init__(self, delay: float = 0.0) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.done: list[int] = []
        self.delay = delay
        self.active: set[str] = set()
        self.overlaps = 0
        self.max_active = 0

    async def handle(self, event: WatchEvent) -> None:
        key = event.key
        if key in self.active:
            self.overlaps += 1
        self.active.add(key)
        self.max_active = max(self.max_active, len(self.active))
        await asyncio.sleep(self.delay)
        self.seen.append((key, event.type, event.object["metadata"]["resourceVersion"]))
        self.active.discard(key)


async def test_one_object_in_order_never_concurrently() -> None:
    recorder = Recorder(delay=0.002)
    queue = KeyedQueue("t-order", recorder.handle, recorder.done.extend, concurrency=8)
    queue.start()
    seq = 0
    for rv in range(1, 40):
        for name in ("a", "b", "c"):
            seq += 1
            queue.add(f"ns/{name}", WatchEvent("MODIFIED", pod(name, rv)), seq)
        await asyncio.sleep(0.001)
    await asyncio.wait_for(queue.wait_idle(), 5)
    await queue.stop(1)
    assert recorder.overlaps == 0
    for name in ("a", "b", "c"):
        versions = [int(rv) for key, _, rv in recorder.seen if key == f"ns/{name}"]
        assert versions == sorted(versions), versions
        assert versions[-1] == 39  # the newest state always arrives
    assert sorted(recorder.done) == list(range(1, seq + 1))  # every event accounted for
    assert recorder.max_active > 1  # different objects did run concurrently


async def test_queued_states_collapse_to_newest_and_added_stays_added() -> None:
    recorder = Recorder()
    queue = KeyedQueue("t-collapse", recorder.handle, recorder.done.extend, concurrency=1)
    queue.add("ns/a", WatchEvent("ADDED", pod("a", 1)), 1)
    queue.add("ns/a", WatchEvent("MODIFIED", pod("a", 2)), 2)
    queue.add("ns/a", WatchEvent("MODIFIED", pod("a", 3)), 3)
    queue.start()
    await asyncio.wait_for(queue.wait_idle(), 5)
    await queue.stop(1)
    assert recorder.seen == [("ns/a", "ADDED", "3")]
    assert sorted(recorder.done) == [1, 2, 3]


async def test_deleted_is_never_lost_when_the_name_is_reused() -> None:
    recorder = Recorder()
    queue = KeyedQueue("t-delete", recorder.handle, recorder.done.extend, concurrency=1)
    queue.add("ns/a", WatchEvent("ADDED", pod("a", 1, uid="old")), 1)
    queue.add("ns/a", WatchEvent("DELETED", pod("a", 2, uid="old")), 2)
    queue.add("ns/a", WatchEvent("ADDED", pod("a", 3, uid="new")), 3)
    queue.add("ns/a", WatchEvent("MODIFIED", pod("a", 4, uid="new")), 4)
    queue.start()
    await asyncio.wait_for(queue.wait_idle(), 5)
    await queue.stop(1)
    assert recorder.seen == [("ns/a", "DELETED", "2"), ("ns/a", "ADDED", "4")]


RETRY_FLOOR = 0.9  # of a retry's delay: the event loop's timers may fire a little early


async def test_failing_object_is_retried_with_growing_backoff_while_others_flow() -> None:
    attempts: list[float] = []
    handled: list[str] = []

    async def handle(event: WatchEvent) -> None:
        if event.key == "ns/bad" and len(attempts) < 5:
            attempts.append(time.monotonic())
            raise RuntimeError("boom")
        handled.append(event.key)

    done: list[int] = []
    queue = KeyedQueue("t-retry", handle, done.extend, concurrency=4, retry_initial=0.01, retry_max=1.0)
    queue.start()
    queue.add("ns/bad", WatchEvent("ADDED", pod("bad", 1)), 1)
    for i in range(20):
        queue.add(f"ns/good{i}", WatchEvent("ADDED", pod(f"good{i}", 1)), 2 + i)
    # Good objects are not held up by the failing one: all of them are handled while it is still failing.
    await eventually(lambda: len([k for k in handled if k.startswith("ns/good")]) == 20, timeout=5)
    assert "ns/bad" not in handled and queue.failures("ns/bad") >= 1
    assert 1 not in done  # the failing event is not counted as handled
    queue.add("ns/bad", WatchEvent("MODIFIED", pod("bad", 2)), 30)  # newer state joins the retry
    await asyncio.wait_for(queue.wait_idle(), 5)
    await queue.stop(1)
    assert handled[-1] == "ns/bad"
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert len(gaps) == 4
    # At least 10, 20, 40 and 80 ms (no jitter): a loaded machine only stretches them, never shortens them.
    assert all(gap >= RETRY_FLOOR * 0.01 * 2**i for i, gap in enumerate(gaps)), gaps
    assert {1, 30} <= set(done)
    assert queue.failures("ns/bad") == 0  # success forgets the failures


async def test_stop_waits_for_handlers_in_flight() -> None:
    entered: list[str] = []
    finished: list[str] = []

    async def slow(event: WatchEvent) -> None:
        entered.append(event.key)
        await asyncio.sleep(0.2)
        finished.append(event.key)

    queue = KeyedQueue("t-stop", slow, lambda seqs: None, concurrency=1)
    queue.start()
    queue.add("ns/a", WatchEvent("ADDED", pod("a", 1)), 1)
    await eventually(lambda: entered == ["ns/a"], timeout=5)  # a's handler is in flight
    queue.add("ns/b", WatchEvent("ADDED", pod("b", 2, uid="u2")), 2)
    started = time.monotonic()
    await queue.stop(timeout=2)
    # Stop returns when the handler in flight is done, not at the bound, and starts no new work.
    assert time.monotonic() - started < 1
    assert finished == ["ns/a"]


@pytest.mark.parametrize("timeout", [0.05])
async def test_stop_cancels_handlers_past_the_bound(timeout: float) -> None:
    entered: list[str] = []

    async def stuck(event: WatchEvent) -> None:
        entered.append(event.key)
        await asyncio.sleep(30)

    queue = KeyedQueue("t-stuck", stuck, lambda seqs: None, concurrency=1)
    queue.start()
    queue.add("ns/a", WatchEvent("ADDED", pod("a", 1)), 1)
    await eventually(lambda: entered == ["ns/a"], timeout=5)  # the stuck handler is in flight
    started = time.monotonic()
    await queue.stop(timeout=timeout)
    assert time.monotonic() - started < 1


async def test_a_key_stuck_in_retries_holds_one_event_however_fast_it_changes() -> None:
    """Memory O(objects), not O(events): superseded events are accounted at once, the watermark stays small."""
    from kuberaven.watch.positions import Watermark

    mark = Watermark()

    async def always_fails(event: WatchEvent) -> None:
        raise RuntimeError("backend down")

    def done(seqs: list[int]) -> None:
        mark.done(seqs)

    queue = KeyedQueue("t-stuck-churn", always_fails, done, concurrency=1, retry_initial=60, retry_max=60)
    queue.start()
    mark.issue(1)
    queue.add("ns/a", WatchEvent("ADDED", pod("a", 1)), 1)
    await eventually(lambda: queue.failures("ns/a") == 1, timeout=5)  # handled once, failed, waiting 60 s for its retry
    for seq in range(2, 10_002):
        mark.issue(seq)
        queue.add("ns/a", WatchEvent("MODIFIED", pod("a", seq)), seq)
    assert len(queue._pending["ns/a"]) == 1 and queue._pending["ns/a"][0].seqs == [10_001]
    assert len(mark._outstanding) == 1  # only the newest event waits
    assert mark.value == 10_000  # a restart from here replays the newest state of ns/a
    await queue.stop(1)


async def test_the_table_of_a_drained_backlog_is_made_anew_once_idle() -> None:
    """A dict never shrinks as keys leave it: a cold start's backlog of events would size the queue for good."""
    recorder = Recorder()
    queue = KeyedQueue("t-shrink", recorder.handle, recorder.done.extend, concurrency=2)
    for seq in range(3000):
        queue.add(f"ns/pod-{seq}", WatchEvent("ADDED", pod(f"pod-{seq}", 1, uid=str(seq))), seq)
    grown = sys.getsizeof(queue._pending)
    assert grown > 100 * sys.getsizeof({})
    queue.start()
    await asyncio.wait_for(queue.wait_idle(), 10)
    await queue.stop(1)
    assert sorted(recorder.done) == list(range(3000))
    assert sys.getsizeof(queue._pending) == sys.getsizeof({}) < grown
    assert sys.getsizeof(queue._busy) == sys.getsizeof(set())


async def test_a_queue_started_again_after_a_stop_handles_what_waited_and_what_comes() -> None:
    """The supervisor runs a crashed engine again: its queues start again and handle the events added while they
    were stopped, a key waiting for a long retry at once, and the events after the start."""
    seen: list[str] = []
    failed: set[str] = set()

    async def handle(event: WatchEvent) -> None:
        if event.key == "ns/retried" and event.key not in failed:
            failed.add(event.key)
            raise RuntimeError("the first try fails")
        seen.append(event.key)

    done: list[int] = []
    queue = KeyedQueue("t-restart", handle, done.extend, concurrency=2, retry_initial=60)
    queue.start()
    queue.add("ns/a", WatchEvent("ADDED", pod("a", 1)), 1)
    queue.add("ns/retried", WatchEvent("ADDED", pod("retried", 1)), 2)
    await eventually(lambda: seen == ["ns/a"] and failed, timeout=5, interval=0.001)
    await queue.stop(1)
    queue.add("ns/b", WatchEvent("ADDED", pod("b", 1)), 3)
    queue.start()
    queue.add("ns/c", WatchEvent("ADDED", pod("c", 1)), 4)
    await asyncio.wait_for(queue.wait_idle(), 5)
    await queue.stop(1)
    assert sorted(seen) == ["ns/a", "ns/b", "ns/c", "ns/retried"] and sorted(done) == [1, 2, 3, 4]
