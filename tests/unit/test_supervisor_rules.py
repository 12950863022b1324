"""The supervisor's crash rule (runtime/supervisor.py crash_decision) driven with plain data."""

from __future__ import annotations

import pytest

from kuberaven.runtime.supervisor import SupervisorOptions, crash_decision

OPTIONS = SupervisorOptions(backoff_initial=1.0, backoff_max=60.0, healthy_after=60.0, max_crashes=5, crash_window=600)


@pytest.mark.parametrize(
    ("crashes", "ran_for", "consecutive", "give_up", "delay", "after"),
    [
        ([100.0], 5.0, 0, False, 1.0, 1),  # first crash: 1 s
        ([100.0, 101.0], 0.1, 1, False, 2.0, 2),  # doubling
        ([100.0, 101.0, 103.0], 0.1, 2, False, 4.0, 3),
        ([1.0, 2.0, 3.0, 4.0], 0.1, 4, False, 16.0, 5),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 0.1, 5, True, 32.0, 6),  # the fifth within the window ends the daemon
        ([1.0, 2.0, 3.0, 4.0, 700.0], 0.1, 5, False, 32.0, 6),  # four of them are older than the window
        ([100.0, 900.0], 800.0, 7, False, 1.0, 1),  # ran healthily for long: backoff starts over
        ([100.0], 0.1, 9, False, 60.0, 10),  # capped at backoff_max
    ],
)
def test_crash_decision(
    crashes: list[float], ran_for: float, consecutive: int, give_up: bool, delay: float, after: int
) -> None:
    decision = crash_decision(crashes, ran_for, consecutive, OPTIONS)
    assert (decision.give_up, decision.delay, decision.consecutive) == (give_up, delay, after)
