"""The supervisor (runtime/): every loop of ``kuberaven run`` runs under it (started by daemon.py).

    Supervisor.start(component) ──► task: component.run()
        raised, or returned while not stopping ──► log the cause (traceback)
            ──► crash_decision(): too many crashes in the window? ──► give up: run() ends, exit 1
            ──► otherwise wait the backoff (1 s doubling to 60 s; reset after a healthy run) ──► run() again
    stopping set ──► stop() every component, wait for each run() to return ──► run() ends, exit 0
    readiness() ──► /readyz: each component's state, restarts and last error, and its watches

A component is anything with run/stop/ready/status (runtime/health.py's
Component); its run() must be callable again after it raised. The rules
(when to restart, how long to wait) are the pure function crash_decision().
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from annotated_types import Ge, Gt

from .. import metrics
from ..component_status import ComponentStatus
from ..kube.backoff import exponential
from .health import Component, readiness

log = logging.getLogger(__name__)


class State(enum.StrEnum):
    WAITING = "waiting"  # not started yet (a standby waiting for the lease)
    RUNNING = "running"
    BACKING_OFF = "backing_off"  # crashed; restarts after its backoff
    FAILED = "failed"  # crashed too often: the daemon ends
    STOPPED = "stopped"


@dataclass(frozen=True)
class SupervisorOptions:
    backoff_initial: Annotated[float, Gt(0)] = 1.0
    backoff_max: Annotated[float, Gt(0)] = 60.0
    healthy_after: Annotated[float, Gt(0)] = 60.0  # a run at least this long resets the backoff
    max_crashes: Annotated[int, Ge(1)] = 5  # this many crashes within crash_window end the daemon
    crash_window: Annotated[float, Gt(0)] = 600.0
    stop_timeout: float = 30.0  # how long stop() may take before the run is cancelled


@dataclass(frozen=True)
class Decision:
    give_up: bool
    delay: float  # seconds before the next run (when not giving up)
    consecutive: int  # crashes since the last healthy run, this one included


def crash_decision(crashes: Sequence[float], ran_for: float, consecutive: int, options: SupervisorOptions) -> Decision:
    """What to do after a crash: ``crashes`` are the crash times (this one last), newest within the window count."""
    now = crashes[-1]
    recent = sum(1 for t in crashes if now - t <= options.crash_window)
    consecutive = 1 if ran_for >= options.healthy_after else consecutive + 1
    delay = exponential(options.backoff_initial, options.backoff_max, consecutive)
    return Decision(recent >= options.max_crashes, delay, consecutive)


class GaveUp(Exception):
    """A component crashed ``max_crashes`` times within the window."""


@dataclass
class _Child:
    name: str
    component: Component
    state: State = State.WAITING
    restarts: int = 0
    consecutive: int = 0
    crashes: deque[float] = field(default_factory=deque)
    last_error: str | None = None
    task: asyncio.Task[None] | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "component": self.name,
            "state": str(self.state),
            "ready": self.state == State.RUNNING and self.component.ready(),
            "restarts": self.restarts,
            "last_error": self.last_error,
        }


def component_name(component: Component) -> str:
    """``inventory/kubernetes``: the class, and the cluster for per-cluster loops."""
    name = getattr(component, "name", None) or type(component).__name__.lower()
    cluster = getattr(component, "cluster", None)
    return f"{name}/{cluster}" if isinstance(cluster, str) else str(name)


class Supervisor:
    """Runs components, restarts crashed ones, and ends when told to or when one crashes too often."""

    def __init__(self, components: Sequence[Component], options: SupervisorOptions | None = None) -> None:
        self.options = options or SupervisorOptions()
        self._children: list[_Child] = []
        for component in components:
            name = component_name(component)
            taken = sum(1 for c in self._children if c.name == name or c.name.startswith(f"{name}#"))
            self._children.append(_Child(f"{name}#{taken + 1}" if taken else name, component))
        self._stopping = asyncio.Event()
        self._failed = asyncio.Event()
        self.gave_up: str | None = None  # the component that crashed too often
        for child in self._children:
            _set_state(child, State.WAITING)

    def start(self, predicate: Callable[[Component], bool] = lambda _: True) -> None:
        """Start the components that ``predicate`` selects and that are not started yet."""
        for child in self._children:
            if child.task is None and predicate(child.component):
                child.task = asyncio.create_task(self._supervise(child), name=f"supervise {child.name}")

    async def run(self, stopping: asyncio.Event) -> None:
        """Until ``stopping`` is set or a component gives up (then GaveUp); every component stopped on return."""
        stop_wait = asyncio.create_task(stopping.wait())
        failed_wait = asyncio.create_task(self._failed.wait())
        try:
            await asyncio.wait({stop_wait, failed_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            failed_wait.cancel()
            await self.shutdown()
        if self.gave_up is not None:
            raise GaveUp(
                f"{self.gave_up} crashed {self.options.max_crashes} times within {self.options.crash_window:.0f}s"
            )

    async def shutdown(self) -> None:
        """Stop every component and wait for its run() to return (cancelled after stop_timeout).

        Components with ``stop_last`` (the relay, the web server) stop after the others,
        so that the events of the inventory's last batch still go out.
        """
        self._stopping.set()
        first = [c for c in self._children if not getattr(c.component, "stop_last", False)]
        await self._stop(first)
        await self._stop([c for c in self._children if c not in first])

    async def _stop(self, children: list[_Child]) -> None:
        for child in children:
            if child.state == State.RUNNING:
                child.component.stop()
        tasks = [c.task for c in children if c.task is not None]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=self.options.stop_timeout)
        for task in late:
            log.warning("%s did not stop within %.0fs; cancelling it", task.get_name(), self.options.stop_timeout)
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- what /readyz and the progress log see ----------------------------------

    def ready(self) -> bool:
        return bool(self._children) and all(c.state == State.RUNNING and c.component.ready() for c in self._children)

    def status(self) -> list[ComponentStatus]:
        return [w for c in self._children for w in c.component.status()]

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        ready, body = readiness([self])
        return ready, {**body, "components": self.describe()}

    def describe(self) -> list[dict[str, Any]]:
        """Each component's state, restarts and last error."""
        return [c.describe() for c in self._children]

    # -- one component's life -----------------------------------------------------

    async def _supervise(self, child: _Child) -> None:
        while not self._stopping.is_set():
            _set_state(child, State.RUNNING)
            started = time.monotonic()
            try:
                await child.component.run()
                if self._stopping.is_set():
                    break
                raise RuntimeError("run() returned without being stopped")
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if not await self._after_crash(child, error, time.monotonic() - started):
                    break
        if child.state != State.FAILED:
            _set_state(child, State.STOPPED)

    async def _after_crash(self, child: _Child, error: Exception, ran_for: float) -> bool:
        """Log and count the crash, wait its backoff; False when giving up or stopping."""
        now = time.monotonic()
        child.crashes.append(now)
        while child.crashes and now - child.crashes[0] > self.options.crash_window:
            child.crashes.popleft()
        decision = crash_decision(child.crashes, ran_for, child.consecutive, self.options)
        child.consecutive = decision.consecutive
        child.last_error = f"{type(error).__name__}: {error}"
        if decision.give_up:
            log.error(
                "%s crashed %d times within %.0fs; giving up, the daemon exits",
                child.name,
                len(child.crashes),
                self.options.crash_window,
                exc_info=error,
            )
            _set_state(child, State.FAILED)
            self.gave_up = child.name
            self._failed.set()
            return False
        log.error("%s crashed after %.1fs; restarting in %.1fs", child.name, ran_for, decision.delay, exc_info=error)
        _set_state(child, State.BACKING_OFF)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), decision.delay)
        if self._stopping.is_set():
            return False
        child.restarts += 1
        metrics.COMPONENT_RESTARTS.labels(child.name).inc()
        return True


def _set_state(child: _Child, state: State) -> None:
    child.state = state
    for each in State:
        metrics.COMPONENT_STATE.labels(child.name, str(each)).set(1 if each == state else 0)
