"""The base every loop of a runnable stands on (kube/, below every layer that runs loops): stop, retry with
backoff, and blocking calls off the event loop.

    Loops()                                one runnable's loops, ended together
        every(period, call, what)          call() at once, then ``period`` s after each end (sooner when ``wake``
                                           is set), until stopped; a failure logged, and tried again after
                                           ``retry``'s delay when given (kube/backoff.py; reset by a success)
        until_stopped(call, what, backoff) call() again whenever it fails or returns before the stop, after the
                                           backoff's delay; a run that outlived the longest delay resets it
        retry(call, what, backoff)         call() until it succeeds (its result) or the stop (None)
        start(coroutine, name)             a task of the runnable's: join() awaits it
        sleep(seconds) / wait()            at most ``seconds``, or until the stop
        stop()                             for good: each loop ends after the call in hand
        join(grace)                        this run's loops ended (and awaited; cancelled after ``grace`` s);
                                           unless stopped, the next run (the supervisor's, after a crash)
                                           starts loops anew
    OffLoop(workers, name)                 blocking calls (a cloud's, a database's) in threads of their own

A failure is logged once per try: one line for the errors a loop expects
(``quiet``), the traceback for any other. The loops are asyncio tasks of
one event loop; only OffLoop's threads run elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .backoff import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")
Call = Callable[[], Awaitable[Any]]
Errors = tuple[type[BaseException], ...]  # the errors a loop expects: logged without their traceback


class Loops:
    """One runnable's loops: periodic, restarting and retrying ones, each failure logged, all ended together."""

    def __init__(self) -> None:
        self._stopped = False  # stop() was called: no run starts loops again
        self._ending = asyncio.Event()  # this run's loops end: set by stop() and join()
        self._wakes: set[asyncio.Event] = set()  # every()'s wake events, set at the end so that a pause ends
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def stopping(self) -> bool:
        """The loops are to end (stopped, or this run joined)."""
        return self._ending.is_set()

    def stop(self) -> None:
        """End the loops for good (from the event loop); each ends after the call in hand."""
        self._stopped = True
        self._end()

    async def wait(self) -> None:
        """Until the loops are to end."""
        await self._ending.wait()

    async def sleep(self, seconds: float, wake: asyncio.Event | None = None) -> bool:
        """At most ``seconds``, less when the loops end (or ``wake`` is set); whether they end."""
        event = self._ending if wake is None else wake
        if not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), seconds)
        return self.stopping

    def start(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """``coroutine`` as a task of the runnable's (a loop below, mostly): join() awaits it."""
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def join(self, grace: float | None = None) -> None:
        """End this run's loops and await their tasks, cancelling those still running after ``grace`` seconds
        (None: awaited however long their call in hand takes). Unless stopped, the loops may start again."""
        self._end()
        tasks = list(self._tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            for task, result in zip(tasks, await asyncio.gather(*tasks, return_exceptions=True), strict=True):
                if isinstance(result, Exception):
                    log.error("%s ended with an error", task.get_name(), exc_info=result)
        if not self._stopped:
            self._ending = asyncio.Event()

    def _end(self) -> None:
        self._ending.set()
        for wake in self._wakes:
            wake.set()

    async def every(
        self,
        period: float,
        call: Call,
        what: str,
        *,
        retry: Backoff | None = None,
        wake: asyncio.Event | None = None,
        first: float = 0.0,
        quiet: Errors = (),
    ) -> None:
        """``call()`` after ``first`` seconds, then ``period`` seconds after each end (or as soon as ``wake`` is
        set), until the loops end. A failure is logged and is not the loop's end: the next call comes after
        ``retry``'s delay when given (the period otherwise), and a success resets it."""
        if wake is not None:
            self._wakes.add(wake)
        try:
            if first and await self.sleep(first):
                return
            while not self.stopping:
                if wake is not None:
                    wake.clear()
                delay = period
                try:
                    await call()
                    if retry is not None:
                        retry.reset()
                except Exception as error:
                    delay = retry.next() if retry is not None else period
                    _failed(what, error, delay, quiet)
                await self.sleep(delay, wake)
        finally:
            if wake is not None:
                self._wakes.discard(wake)

    async def until_stopped(self, call: Call, what: str, backoff: Backoff, *, quiet: Errors = ()) -> None:
        """``call()`` (a loop of its own: a watch) until the loops end, started again after ``backoff``'s delay
        whenever it fails or returns before that; a run that lasted ``backoff.maximum`` seconds or more was
        healthy, and the next failure waits the first delay again."""
        while not self.stopping:
            started = time.monotonic()
            error: Exception | None = None
            try:
                await call()
            except Exception as failed:
                error = failed
            if self.stopping:
                return
            if time.monotonic() - started >= backoff.maximum:
                backoff.reset()
            delay = backoff.next()
            if error is None:
                log.warning("%s ended; started again in %.1f s", what, delay)
            else:
                _failed(what, error, delay, quiet)
            await self.sleep(delay)

    async def retry(
        self, call: Callable[[], Awaitable[T]], what: str, backoff: Backoff, *, quiet: Errors = ()
    ) -> T | None:
        """``call()`` until it succeeds (its result), tried again after each failure after ``backoff``'s delay;
        None once the loops end first."""
        while not self.stopping:
            try:
                return await call()
            except Exception as error:
                delay = backoff.next()
                _failed(what, error, delay, quiet)
                await self.sleep(delay)
        return None


def _failed(what: str, error: Exception, delay: float, quiet: Errors) -> None:
    """One failed try, logged: an expected error in one line, any other with its traceback."""
    if isinstance(error, quiet):
        log.warning("%s failed (%s); again in %.1f s", what, error, delay)
    else:
        log.error("%s failed; again in %.1f s", what, delay, exc_info=error)


class OffLoop:
    """Blocking calls (openstacksdk's, SQLAlchemy's, a subprocess's) off the event loop, in at most ``workers``
    threads of their own: they neither starve nor are starved by other users of the default executor.

    close() ends the threads; a call after it starts new ones, so a runnable the supervisor runs again after a
    crash has threads again. Call it on the event loop.
    """

    def __init__(self, workers: int, name: str) -> None:
        if workers < 1:
            raise ValueError(f"{name}: at least one worker thread, not {workers}")
        self.workers = workers
        self.name = name  # the threads' names' prefix
        self._executor: ThreadPoolExecutor | None = None

    def __call__(self, call: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``call(*args)`` in one of the threads; its result (or error) when it is done."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix=self.name)
        return asyncio.get_running_loop().run_in_executor(self._executor, call, *args)

    def close(self, wait: bool = False) -> None:
        """No more calls in these threads; with ``wait``, the calls not started are dropped and those running
        awaited (blocking)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=wait)
