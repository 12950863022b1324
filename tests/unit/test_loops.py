"""The base every loop stands on (kube/loops.py): a stop that ends each loop after its call in hand, periodic
loops that outlive their failures, restarts and retries with kube/backoff.py's delays, and threads made again
after they were closed."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from kuberaven.kube.backoff import Backoff
from kuberaven.kube.loops import Loops, OffLoop

QUICK = 0.01  # seconds: a period or delay short enough for a unit test
BOUND = 5.0  # seconds a test waits for what should take far less
LONGEST = 0.1  # seconds: a backoff's longest delay, which a run that returns at once never lasts


class Recorded(Backoff):
    """A backoff without jitter that keeps the delays it gave."""

    def __init__(self, initial: float, maximum: float) -> None:
        super().__init__(initial, maximum, jitter=0.0)
        self.given: list[float] = []

    def next(self) -> float:
        delay = super().next()
        self.given.append(delay)
        return delay


async def test_a_periodic_loop_outlives_its_failures_and_ends_at_the_stop(caplog: pytest.LogCaptureFixture) -> None:
    loops = Loops()
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ValueError("once")
        if calls == 4:
            loops.stop()

    with caplog.at_level(logging.WARNING, logger="kuberaven.kube.loops"):
        await asyncio.wait_for(loops.every(QUICK, flaky, "flaky"), BOUND)
    assert calls == 4  # the failure was logged, and the loop went on until the stop
    [failed] = caplog.records
    assert failed.levelno == logging.ERROR and failed.exc_info is not None  # unexpected: its traceback
    assert failed.getMessage().startswith("flaky failed; again in")


async def test_a_failure_waits_the_backoff_and_a_success_resets_it() -> None:
    loops = Loops()
    retry = Recorded(2 * QUICK, 8 * QUICK)
    failure = ValueError("no")
    outcomes = iter([failure, failure, failure, None, failure, "stop"])

    async def call() -> None:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        if outcome == "stop":
            loops.stop()

    await asyncio.wait_for(loops.every(QUICK, call, "backing off", retry=retry, quiet=(ValueError,)), BOUND)
    # Three failures, each waiting twice as long as the one before; the success waits the period and resets the
    # backoff, so the next failure waits the first delay again.
    assert retry.given == [2 * QUICK, 4 * QUICK, 8 * QUICK, 2 * QUICK]


async def test_a_wake_cuts_the_pause_short_and_the_stop_ends_a_long_one() -> None:
    loops, wake = Loops(), asyncio.Event()
    looked = [asyncio.Event(), asyncio.Event()]  # set by the first look, by the second
    looks = 0

    async def look() -> None:
        nonlocal looks
        looked[min(looks, 1)].set()
        looks += 1

    running = asyncio.create_task(loops.every(BOUND * 10, look, "look", wake=wake))
    await asyncio.wait_for(looked[0].wait(), BOUND)  # the first look at once
    wake.set()
    await asyncio.wait_for(looked[1].wait(), BOUND)  # the second when woken, not a period later
    started = time.monotonic()
    loops.stop()
    await asyncio.wait_for(running, BOUND)
    assert time.monotonic() - started < BOUND and looks == 2


async def test_until_stopped_restarts_a_failing_call_with_the_backoffs_delays() -> None:
    loops = Loops()
    backoff = Recorded(QUICK, 4 * QUICK)
    runs = 0
    fifth = asyncio.Event()

    async def watch() -> None:
        nonlocal runs
        runs += 1
        if runs <= 4:
            raise ConnectionError("the API server went away")
        fifth.set()
        await loops.wait()  # the fifth run lasts until the stop

    running = asyncio.create_task(loops.until_stopped(watch, "watch", backoff, quiet=(ConnectionError,)))
    await asyncio.wait_for(fifth.wait(), BOUND)
    assert backoff.given == [QUICK, 2 * QUICK, 4 * QUICK, 4 * QUICK]  # doubling, up to the longest
    loops.stop()
    await asyncio.wait_for(running, BOUND)
    assert runs == 5  # not started again after the stop


async def test_until_stopped_starts_a_call_that_returned_again_and_a_long_run_resets_the_backoff() -> None:
    loops = Loops()
    backoff = Recorded(QUICK, LONGEST)
    runs = 0

    async def short_then_long() -> None:
        nonlocal runs
        runs += 1
        if runs in (3, 4):
            await asyncio.sleep(1.5 * LONGEST)  # longer than the longest delay: healthy
        if runs == 5:
            loops.stop()

    await asyncio.wait_for(loops.until_stopped(short_then_long, "short", backoff), BOUND)
    assert backoff.given == [QUICK, 2 * QUICK, QUICK, QUICK]


async def test_retry_returns_the_first_success_or_none_once_stopped() -> None:
    loops = Loops()
    backoff = Recorded(QUICK, BOUND)
    tries = 0

    async def third_time() -> str:
        nonlocal tries
        tries += 1
        if tries < 3:
            raise OSError("not yet")
        return "made"

    assert await loops.retry(third_time, "made", backoff) == "made"
    assert backoff.given == [QUICK, 2 * QUICK]

    async def never() -> str:
        raise OSError("unreachable")

    asyncio.get_running_loop().call_later(QUICK, loops.stop)
    assert await asyncio.wait_for(loops.retry(never, "never", Backoff(BOUND, BOUND)), BOUND) is None


async def test_join_ends_a_runs_loops_and_a_next_run_starts_them_again() -> None:
    """A runnable the supervisor runs again after a crash: join() ended the first run's loops, not the runnable."""
    loops = Loops()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        ticks += 1

    loops.start(loops.every(QUICK, tick, "tick"), "tick")
    await asyncio.sleep(5 * QUICK)
    await asyncio.wait_for(loops.join(), BOUND)
    assert not loops.stopping and ticks >= 1
    before = ticks
    loops.start(loops.every(QUICK, tick, "tick"), "tick")
    await asyncio.sleep(5 * QUICK)
    assert ticks > before  # the second run's loop runs
    loops.stop()
    await asyncio.wait_for(loops.join(), BOUND)
    assert loops.stopping  # stopped for good: a loop started now ends at once
    await asyncio.wait_for(loops.every(QUICK, tick, "tick"), BOUND)


async def test_join_cancels_what_outlives_its_grace() -> None:
    loops = Loops()
    stuck = loops.start(asyncio.sleep(BOUND * 10), "stuck")
    started = time.monotonic()
    await loops.join(grace=QUICK)
    assert stuck.cancelled() and time.monotonic() - started < BOUND


async def test_off_loop_calls_run_in_its_threads_and_closed_threads_are_made_again() -> None:
    threads = OffLoop(2, "tested")
    assert (await threads(lambda: threading.current_thread().name)).startswith("tested")
    threads.close(wait=True)
    assert (await threads(lambda: threading.current_thread().name)).startswith("tested")  # new threads
    threads.close(wait=True)
    with pytest.raises(ValueError, match="at least one"):
        OffLoop(0, "none")
