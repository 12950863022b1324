"""`kuberaven testenv restart`'s requests to the supervisor (testing/restart.py), with a stand-in restart: each
request is served once and answered to its asker, an asker whose supervisor is gone or silent gives up and
leaves nothing to be served later, and a failed restart is the asker's error."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kuberaven.testing.env import STATE_FILE, restart
from kuberaven.testing.restart import (
    REQUEST,
    REQUESTS,
    RESTARTABLE,
    Restarted,
    RestartFailed,
    UnknownComponent,
    answer_requests,
    ask,
)

SERVED = Restarted("apiserver", previous_pid=100, pid=200, down_seconds=1.5)


@contextmanager
def supervisor(directory: Path, restart: Callable[[str], Restarted]) -> Iterator[list[Restarted | str]]:
    """A thread serving requests as the supervisor's loop does, until the block ends: what it served."""
    served: list[Restarted | str] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.05):
            served.extend(answer_requests(directory, restart))

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        yield served
    finally:
        stop.set()
        thread.join()


def test_a_request_is_served_once_and_answered(tmp_path: Path) -> None:
    asked: list[str] = []

    def restart(component: str) -> Restarted:
        asked.append(component)
        return SERVED

    with supervisor(tmp_path, restart) as served:
        assert ask(tmp_path, "apiserver", alive=lambda: True, timeout=10) == SERVED
    assert asked == ["apiserver"] and served == [SERVED]
    assert not list((tmp_path / REQUESTS).iterdir()), "request and answer are gone"


def test_a_failed_restart_is_the_askers_error(tmp_path: Path) -> None:
    def restart(component: str) -> Restarted:
        raise TimeoutError("kube-apiserver not ready within 60s")

    with supervisor(tmp_path, restart), pytest.raises(RestartFailed, match="not ready within 60s"):
        ask(tmp_path, "apiserver", alive=lambda: True, timeout=10)


def test_an_unknown_component_is_refused_naming_those_there_are(tmp_path: Path) -> None:
    with pytest.raises(UnknownComponent) as refused:
        ask(tmp_path, "etcd-typo", alive=lambda: True)
    assert str(refused.value) == f"cannot restart 'etcd-typo': what can be restarted is {', '.join(RESTARTABLE)}"
    assert not (tmp_path / REQUESTS).exists(), "nothing asked"
    # A request written by hand (no asker checked it): answered with the same refusal, nothing restarted.
    (tmp_path / REQUESTS).mkdir()
    (tmp_path / REQUESTS / f"x{REQUEST}").write_text(json.dumps({"component": "etcd-typo"}))
    assert answer_requests(tmp_path, lambda component: pytest.fail("restarted")) == [str(refused.value)]


def test_an_asker_whose_supervisor_is_gone_or_silent_gives_up_and_leaves_no_request(tmp_path: Path) -> None:
    with pytest.raises(RestartFailed, match="stopped before it answered"):
        ask(tmp_path, "apiserver", alive=lambda: False)
    with pytest.raises(RestartFailed, match=r"no answer .* within 0 s"):
        ask(tmp_path, "apiserver", alive=lambda: True, timeout=0.2)
    assert not list((tmp_path / REQUESTS).iterdir())
    assert answer_requests(tmp_path, lambda component: pytest.fail("restarted")) == []


def test_a_request_to_no_environment_says_so(tmp_path: Path) -> None:
    with pytest.raises(RestartFailed, match=re.escape(f"no test environment running in {tmp_path}")):
        restart(tmp_path, "apiserver")
    (tmp_path / STATE_FILE).write_text(json.dumps({"pid": 2**22 + 1}))  # above any pid_max: runs nowhere
    with pytest.raises(RestartFailed, match=re.escape(f"no test environment running in {tmp_path}")):
        restart(tmp_path, "apiserver")
