"""Micro-batching (watch/): many concurrent handlers' requests, one blocking call per batch.

    handler ─┐
    handler ─┼─► Batcher.submit(request) ──(≤ size requests or window seconds)──► run(batch) in a worker thread
    handler ─┘        awaits its own result ◄───────────── one result (or error) per request ──┘

The keyed queue runs one handler per object; when each handler's work is a
database transaction, a cold start of thousands of objects is thousands of
transactions. A handler that submits here instead shares one transaction with
the others in flight, and still gets its own answer: an error in ``run``'s
result list fails that request's handler alone (and so only that object is
retried), an exception raised by ``run`` fails the whole batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")


class Batcher(Generic[Request, Result]):
    def __init__(
        self,
        run: Callable[[list[Request]], list[Result | BaseException]],
        blocking: Callable[..., Awaitable[list[Result | BaseException]]],
        *,
        size: int = 256,
        window: float = 0.002,
    ) -> None:
        """``run`` answers a batch in order; ``blocking(run, batch)`` runs it off the event loop."""
        self._run = run
        self._blocking = blocking
        self._size = size
        self._window = window
        self._pending: list[tuple[Request, asyncio.Future[Result]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()

    async def submit(self, request: Request) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        if len(self._pending) >= self._size:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._window, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._answer(batch))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    async def _answer(self, batch: list[tuple[Request, asyncio.Future[Result]]]) -> None:
        try:
            results = await self._blocking(self._run, [request for request, _ in batch])
        except BaseException as error:  # every waiting handler must hear of it
            results = [error] * len(batch)
            if isinstance(error, asyncio.CancelledError):
                for _, future in batch:
                    future.cancel()
                raise
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue  # its handler was cancelled meanwhile
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
