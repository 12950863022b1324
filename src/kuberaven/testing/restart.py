"""A planned restart of one server of a running test environment (`kuberaven testenv restart`).

The environment's supervisor (testing/env.py) owns its servers: it alone may start them again, and it takes
any server's death for the end of the environment. So the command does not touch the server itself: it writes
a request file into ``<dir>/restart/`` (whole, by a rename) and waits for the answer file the supervisor writes
beside it (also by a rename). The supervisor reads requests in the same loop that checks its servers for death,
one step after the other: while it restarts a server no death check runs, and the next one sees the new process,
so a planned restart is never taken for a death, and a death at any other time still stops the environment.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESTARTABLE = ("apiserver",)  # what `testenv restart` may restart
REQUESTS = "restart"  # in the environment's directory: requests and answers
REQUEST = ".request"  # a request file's suffix: {"component": …}
ANSWER = ".answer"  # an answer file's suffix: {"restarted": {…}} or {"error": "…"}
PARTIAL = ".partial"  # a file being written, renamed once whole (never read)
ANSWER_TIMEOUT = 180.0  # seconds a request waits for its answer: the API server alone may take 60 to be ready
POLL_INTERVAL = 0.1  # seconds between two looks for the answer


class UnknownComponent(ValueError):
    """A name that is none of RESTARTABLE."""


class RestartFailed(RuntimeError):
    """No environment to ask, it stopped while asked, or its restart failed: the reason is the message."""


@dataclass(frozen=True)
class Restarted:
    """One server started again: which, its process ids before and after, and how long it did not serve."""

    component: str
    previous_pid: int
    pid: int
    down_seconds: float


def check_component(component: str) -> None:
    """An UnknownComponent naming the components there are, unless ``component`` is one."""
    if component not in RESTARTABLE:
        raise UnknownComponent(f"cannot restart {component!r}: what can be restarted is {', '.join(RESTARTABLE)}")


def _write_whole(path: Path, content: dict[str, Any]) -> None:
    """``content`` as JSON at ``path``, appearing at once (a reader never sees it half written)."""
    partial = path.with_name(path.name + PARTIAL)
    partial.write_text(json.dumps(content))
    partial.rename(path)


def ask(directory: Path, component: str, alive: Callable[[], bool], timeout: float = ANSWER_TIMEOUT) -> Restarted:
    """Ask the supervisor of ``directory`` to restart ``component`` and wait for its answer. ``alive``: whether
    the supervisor still runs (a supervisor that stops, or stopped before reading the request, never answers)."""
    check_component(component)
    requests = Path(directory) / REQUESTS
    requests.mkdir(exist_ok=True)
    name = uuid.uuid4().hex
    request, answer = requests / (name + REQUEST), requests / (name + ANSWER)
    _write_whole(request, {"component": component})
    deadline = time.monotonic() + timeout
    try:
        while not answer.exists():
            if not alive():
                raise RestartFailed(f"the test environment in {directory} stopped before it answered")
            if time.monotonic() > deadline:
                raise RestartFailed(f"no answer from the test environment in {directory} within {timeout:.0f} s")
            time.sleep(POLL_INTERVAL)
        reply = json.loads(answer.read_text())
    finally:
        request.unlink(missing_ok=True)  # unanswered: not to be served later
        answer.unlink(missing_ok=True)
    if "error" in reply:
        raise RestartFailed(reply["error"])
    return Restarted(**reply["restarted"])


def answer_requests(directory: Path, restart: Callable[[str], Restarted]) -> list[Restarted | str]:
    """Serve every pending request in ``directory`` with ``restart`` (the supervisor's), oldest first, each
    answered beside it: what each did (a Restarted, or the error it answered)."""
    requests = Path(directory) / REQUESTS
    pending = sorted(requests.glob("*" + REQUEST), key=_age) if requests.is_dir() else []
    done: list[Restarted | str] = []
    for request in pending:
        with contextlib.suppress(FileNotFoundError):  # its asker gave up meanwhile
            done.append(_serve(request, restart))
    return done


def _age(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _serve(request: Path, restart: Callable[[str], Restarted]) -> Restarted | str:
    """One request read, removed and answered."""
    text = request.read_text()
    request.unlink()
    answer = request.with_name(request.name.removesuffix(REQUEST) + ANSWER)
    try:
        component = json.loads(text)["component"]
        check_component(component)
        restarted = restart(component)
    except Exception as error:  # whatever went wrong is the asker's answer; the supervisor goes on
        _write_whole(answer, {"error": f"{type(error).__name__}: {error}"})
        return str(error)
    _write_whole(answer, {"restarted": asdict(restarted)})
    return restarted
