"""Batcher (watch/batcher.py): concurrent requests share one blocking call, each gets its own answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kuberaven.watch.batcher import Batcher


async def in_thread(run: Any, batch: list[Any]) -> Any:
    return await asyncio.to_thread(run, batch)


async def test_concurrent_requests_are_answered_from_few_calls_each_with_its_own_result() -> None:
    calls: list[list[int]] = []

    def square(batch: list[int]) -> list[int | BaseException]:
        calls.append(batch)
        return [ValueError(f"{n} is odd and 7") if n == 7 else n * n for n in batch]

    batcher: Batcher[int, int] = Batcher(square, in_thread, size=40, window=0.01)
    results = await asyncio.gather(*(batcher.submit(n) for n in range(100)), return_exceptions=True)
    assert [r for r in results if not isinstance(r, BaseException)] == [n * n for n in range(100) if n != 7]
    assert isinstance(results[7], ValueError) and "7 is odd" in str(results[7])  # only that request failed
    assert sorted(n for batch in calls for n in batch) == list(range(100))
    assert len(calls) == 3 and max(len(b) for b in calls) == 40  # full batches go at once, the rest on the timer


async def test_a_failing_call_fails_every_request_of_its_batch() -> None:
    def broken(batch: list[int]) -> list[int | BaseException]:
        raise RuntimeError("database is locked")

    batcher: Batcher[int, int] = Batcher(broken, in_thread, window=0.001)
    results = await asyncio.gather(*(batcher.submit(n) for n in range(5)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    with pytest.raises(RuntimeError, match="locked"):
        await batcher.submit(9)
