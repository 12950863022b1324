"""Watermark and backoff: the arithmetic the engine's guarantees rest on."""

from __future__ import annotations

from kuberaven.kube.backoff import Backoff
from kuberaven.watch.positions import Watermark


def test_watermark_moves_only_over_a_done_prefix() -> None:
    mark = Watermark()
    for seq in range(1, 6):
        mark.issue(seq)
    assert not mark.done([2, 3])
    assert mark.value == 0  # 1 still outstanding: resuming from 3 would skip it
    assert mark.done([1])
    assert mark.value == 3
    mark.done([5])
    assert mark.value == 3
    mark.done([4])
    assert mark.value == 5


def test_reconnect_backoff_doubles_to_the_cap_with_jitter() -> None:
    backoff = Backoff(0.8, 30.0)
    delays = [backoff.next() for _ in range(10)]
    assert 0.8 * 0.8 <= delays[0] <= 0.8 * 1.2
    assert 1.6 * 0.8 <= delays[1] <= 1.6 * 1.2
    assert all(d <= 30 * 1.2 for d in delays)
    assert delays[-1] >= 30 * 0.8
    backoff.reset()
    assert backoff.peek() == 0.8
