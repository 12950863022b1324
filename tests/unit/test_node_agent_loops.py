"""The node agent's loops (node/agent.py on kube/loops.py): its watch started again after each failure with
kube/backoff.py's delays, and the stop ending the watch and the sweep."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kuberaven.kube.backoff import Backoff
from kuberaven.node import agent as node_agent
from kuberaven.node.agent import NodeAgent
from kuberaven.node.options import NodeOptions

QUICK = 0.01  # seconds: the first delay, in a unit test
BOUND = 5.0  # seconds a test waits for what should take far less
FAILURES = 3


class Recorded(Backoff):
    """kube/backoff.py's Backoff, without jitter, keeping the delays it gave."""

    made: list[Recorded] = []

    def __init__(self, initial: float, maximum: float) -> None:
        super().__init__(initial, maximum, jitter=0.0)
        self.given: list[float] = []
        Recorded.made.append(self)

    def next(self) -> float:
        delay = super().next()
        self.given.append(delay)
        return delay


async def test_the_watch_is_started_again_after_each_failure_with_kube_backoffs_delays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not hasattr(node_agent, "RESTART_DELAYS")  # no table of its own: kube/backoff.py is the one backoff
    monkeypatch.setattr(node_agent, "Backoff", Recorded)
    monkeypatch.setattr(node_agent, "RESTART_INITIAL", QUICK)
    monkeypatch.setattr(node_agent, "RESTART_MAX", 4 * QUICK)
    agent = NodeAgent(NodeOptions(name="n", socket=tmp_path / "cni.sock", stop_timeout=0), None)  # type: ignore[arg-type]  # no API server: the watch is a stand-in
    runs = 0
    watching = asyncio.Event()

    async def watch() -> None:
        nonlocal runs
        runs += 1
        if runs <= FAILURES:
            raise ConnectionError("the API server went away")
        watching.set()
        await asyncio.Event().wait()  # watches until the agent stops

    agent.factory.run = watch  # type: ignore[method-assign]  # the stand-in watch
    running = asyncio.create_task(agent.run())
    await asyncio.wait_for(watching.wait(), BOUND)
    [restarts] = Recorded.made
    assert runs == FAILURES + 1
    assert restarts.given == [QUICK, 2 * QUICK, 4 * QUICK]  # doubling from RESTART_INITIAL
    agent.stop()
    await asyncio.wait_for(running, BOUND)
    assert runs == FAILURES + 1 and not (tmp_path / "cni.sock").exists()
