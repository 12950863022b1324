"""WorkQueue (watch/workqueue.py): client-go's work queue rules, driven with plain keys."""

from __future__ import annotations

import asyncio
import sys
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuberaven.kube.backoff import KeyedBackoff, exponential
from kuberaven.watch.workqueue import ShutDown, WorkQueue


async def take(queue: WorkQueue[str], timeout: float = 0.05) -> str | None:
    """The next key, or None when none comes within ``timeout``."""
    try:
        return await asyncio.wait_for(queue.get(), timeout)
    except TimeoutError:
        return None


async def test_a_key_added_while_it_waits_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue("t-once")
    for key in ("a", "b", "a", "a", "b", "c"):
        queue.add(key)
    assert len(queue) == 3
    assert [await take(queue) for _ in range(3)] == ["a", "b", "c"]  # first-added first
    assert await take(queue, 0.01) is None


async def test_a_key_in_hand_is_not_given_out_again_until_done_and_then_once() -> None:
    queue: WorkQueue[str] = WorkQueue("t-processing")
    queue.add("a")
    assert await take(queue) == "a"
    queue.add("a")  # changed while being handled
    queue.add("a")
    assert await take(queue, 0.01) is None  # no second worker gets it meanwhile
    queue.done("a")
    assert await take(queue) == "a"  # handled again after, once
    queue.done("a")
    assert await take(queue, 0.01) is None
    await asyncio.wait_for(queue.wait_idle(), 1)


async def test_a_key_done_without_a_change_is_not_queued_again() -> None:
    queue: WorkQueue[str] = WorkQueue("t-done")
    queue.add("a")
    assert await take(queue) == "a"
    queue.done("a")
    assert len(queue) == 0 and queue.busy == 0


async def test_rate_limited_adds_wait_longer_each_failure_until_forgotten() -> None:
    queue: WorkQueue[str] = WorkQueue("t-backoff", retry_initial=0.02, retry_max=0.08)
    queue.add_rate_limited("a")  # 20 ms
    assert queue.failures("a") == 1
    assert await take(queue, 0.005) is None
    assert await take(queue, 0.2) == "a"
    queue.done("a")
    queue.add_rate_limited("a")  # 40 ms
    assert await take(queue, 0.025) is None
    assert await take(queue, 0.2) == "a"
    queue.done("a")
    queue.forget("a")
    assert queue.failures("a") == 0
    queue.add_rate_limited("a")  # 20 ms again
    assert await take(queue, 0.2) == "a"


async def test_add_after_keeps_the_earliest_wait_and_an_add_comes_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue("t-after")
    queue.add_after("a", 0.03)
    queue.add_after("a", 5.0)  # later: the earlier wait stays
    assert await take(queue, 0.2) == "a"
    queue.done("a")
    queue.add_after("b", 5.0)
    queue.add("b")  # a change now does not wait for the requeue
    assert await take(queue) == "b"


async def test_shutdown_drains_what_is_queued_then_ends_workers_and_ignores_adds() -> None:
    queue: WorkQueue[str] = WorkQueue("t-shutdown")
    queue.add("a")
    queue.add_after("late", 5.0)
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    assert await waiting == "a"
    blocked = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.shutdown()
    with pytest.raises(ShutDown):
        await blocked
    queue.add("b")
    with pytest.raises(ShutDown):
        await queue.get()
    queue.done("a")
    await asyncio.wait_for(queue.wait_idle(), 1)  # the delayed key was dropped


async def test_a_cancelled_getter_passes_its_key_to_another() -> None:
    queue: WorkQueue[str] = WorkQueue("t-cancel")
    first = asyncio.ensure_future(queue.get())
    second = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.add("a")
    first.cancel()
    await asyncio.sleep(0)
    assert await asyncio.wait_for(second, 1) == "a"


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(0, 0.1), (1, 0.1), (2, 0.2), (3, 0.4), (5, 1.6), (7, 5.0), (10_000, 5.0)],
)
def test_exponential_delays(failures: int, delay: float) -> None:
    assert exponential(0.1, 5.0, failures) == pytest.approx(delay)


def test_keyed_backoff_counts_per_key_and_refuses_a_bad_range() -> None:
    backoff = KeyedBackoff(1.0, 4.0)
    assert [backoff.when("a") for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    assert backoff.when("b") == 1.0 and len(backoff) == 2
    backoff.forget("a")
    assert backoff.when("a") == 1.0


def test_keyed_backoff_makes_its_table_anew_once_no_key_fails() -> None:
    """A burst of failures (an outage: a key per pod) must not size the counts' table for good."""
    backoff = KeyedBackoff(1.0, 4.0)
    keys = [f"ns/pod-{i}" for i in range(5000)]
    for key in keys:
        backoff.when(key)
    for key in keys[:-1]:
        backoff.forget(key)
    assert sys.getsizeof(backoff._failures) > 100 * sys.getsizeof({})  # one still failing: kept as it is
    assert backoff.failures(keys[-1]) == 1
    backoff.forget(keys[-1])
    assert sys.getsizeof(backoff._failures) == sys.getsizeof({}) and len(backoff) == 0
    assert backoff.when("again") == 1.0
    with pytest.raises(ValueError, match="0 < initial <= maximum"):
        KeyedBackoff(2.0, 1.0)


OPERATIONS = st.lists(st.tuples(st.sampled_from(["add", "get", "done"]), st.sampled_from("abc")), max_size=40)


@settings(max_examples=200, deadline=None)
@given(OPERATIONS)
def test_the_queue_behaves_like_client_gos_model(operations: list[tuple[str, str]]) -> None:
    """Against a model of queue.go (queue, dirty, processing): never two holders of a key, never a change lost."""

    async def run() -> None:
        queue: WorkQueue[str] = WorkQueue("t-model")
        order: deque[str] = deque()
        dirty: set[str] = set()
        processing: set[str] = set()
        for operation, key in operations:
            if operation == "add" and key not in dirty:
                dirty.add(key)
                if key not in processing:
                    order.append(key)
                queue.add(key)
            elif operation == "get" and order:
                expected = order.popleft()
                processing.add(expected)
                dirty.discard(expected)
                assert await queue.get() == expected
            elif operation == "done" and key in processing:
                processing.discard(key)
                if key in dirty:
                    order.append(key)
                queue.done(key)
            assert len(queue) == len(order)
        assert set(order) <= dirty  # every queued key still carries its change

    asyncio.run(run())


async def test_the_tables_a_backlog_grew_are_made_anew_once_the_queue_is_idle() -> None:
    """A set or dict never shrinks as keys leave it: a cold start's backlog would size the queue for good."""
    queue: WorkQueue[str] = WorkQueue("t-shrink", retry_initial=0.001, retry_max=0.001)
    empty = sys.getsizeof(set())
    keys = [f"ns/pod-{i}" for i in range(5000)]
    for key in keys:
        queue.add(key)
    assert sys.getsizeof(queue._dirty) > 100 * empty
    for index, key in enumerate(keys):
        assert await take(queue) == key
        if index < len(keys) - 1:  # the last one is retried once: its failure count stays until it succeeds
            queue.forget(key)
            queue.done(key)
    # every key has left but the one in hand, and the tables have not shrunk
    assert min(sys.getsizeof(queue._dirty), sys.getsizeof(queue._added)) > 100 * empty
    queue.add_rate_limited(keys[-1])
    queue.done(keys[-1])
    assert queue.failures(keys[-1]) == 1  # failing: not idle, its count is kept
    assert await take(queue, 1) == keys[-1]
    queue.forget(keys[-1])
    queue.done(keys[-1])
    await asyncio.wait_for(queue.wait_idle(), 1)
    assert sys.getsizeof(queue._dirty) == sys.getsizeof(queue._processing) == empty
    assert sys.getsizeof(queue._added) == sys.getsizeof(queue._delayed) == sys.getsizeof({})
    assert sys.getsizeof(queue._backoff._failures) == sys.getsizeof({})
    queue.add("again")  # and it goes on working as before
    assert await take(queue) == "again"
