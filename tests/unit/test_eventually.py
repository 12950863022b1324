"""tests/helpers.eventually, the wait of every integration test: a check that is not met yet is retried until
its deadline, whether it asserts or returns a predicate's False, and none of its callers can pass at once."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import openstack.exceptions
import pytest

from kuberaven.network.backend import BackendError
from tests.helpers import eventually

TESTS = Path(__file__).resolve().parent.parent
WAITS = {"eventually", "eventually_off_loop"}


async def test_a_predicate_is_waited_for_until_it_holds() -> None:
    calls: list[int] = []

    def third_time() -> bool:
        calls.append(1)
        return len(calls) >= 3

    assert await eventually(third_time, timeout=5, interval=0.001) is True
    assert len(calls) == 3


@pytest.mark.parametrize("falsy", [False, 0, "", []])
async def test_a_check_that_never_holds_fails_at_its_deadline(falsy: object) -> None:
    with pytest.raises(AssertionError, match="the check returned"):
        await eventually(lambda: falsy, timeout=0.05, interval=0.01)


def _failing(errors: list[Exception]) -> tuple[Callable[[], str], list[int]]:
    """A check that raises each of ``errors`` in turn, then answers "found"; and the list of its calls."""
    calls: list[int] = []

    def check() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "found"

    return check, calls


def _wrapped(cause: Exception) -> BackendError:
    """A BackendError as the openstack backend's ``_call`` raises it."""
    try:
        raise BackendError(f"pool p: {cause}") from cause
    except BackendError as error:
        return error


NOT_FOUND = openstack.exceptions.NotFoundException("No SecurityGroup found for g")


@pytest.mark.parametrize("gone", [NOT_FOUND, _wrapped(NOT_FOUND)], ids=["as is", "in a BackendError"])
async def test_an_openstack_object_not_found_is_not_yet_and_raised_at_the_deadline(gone: Exception) -> None:
    check, calls = _failing([gone, gone])
    assert await eventually(check, timeout=5, interval=0.001) == "found"
    assert len(calls) == 3
    never, _ = _failing([gone] * 1000)
    with pytest.raises(type(gone), match="No SecurityGroup"):
        await eventually(never, timeout=0.05, interval=0.01)


@pytest.mark.parametrize(
    "error",
    [ValueError("not a not-yet"), _wrapped(openstack.exceptions.ConflictException("quota exceeded"))],
    ids=["another error", "a BackendError of another cause"],
)
async def test_any_other_error_is_raised_at_once(error: Exception) -> None:
    check, calls = _failing([error])
    with pytest.raises(type(error)):
        await eventually(check, timeout=5, interval=0.001)
    assert len(calls) == 1


async def test_an_asserting_check_passes_with_none_and_returns_what_it_found() -> None:
    assert await eventually(lambda: None, timeout=0.05) is None
    assert await eventually(lambda: ["found"], timeout=0.05) == ["found"]


def _waits_with_or_none(path: Path) -> list[str]:
    """``eventually(lambda: <test> or None)``: None whenever the test fails, which eventually takes as passed."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in WAITS and node.args):
            continue
        check = node.args[0]
        body = check.body if isinstance(check, ast.Lambda) else None
        if isinstance(body, ast.BoolOp) and isinstance(body.op, ast.Or):
            last = body.values[-1]
            if isinstance(last, ast.Constant) and last.value is None:
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    return found


def test_no_wait_turns_a_failed_test_into_none() -> None:
    found = [where for path in sorted(TESTS.rglob("*.py")) for where in _waits_with_or_none(path)]
    assert found == []
