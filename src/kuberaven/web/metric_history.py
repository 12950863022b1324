"""The last hour of the daemon's own metrics, for the Health tab's plots (web/): a bounded ring in the process.

    prometheus_client's registry ──every N s──► a reading (sample name → label value → number)
        two readings ──► a point of each plot (gauges as read; counters as rates; histograms as mean times)
        ──► a ring of SAMPLES points ──► GET /api/v1/metrics/history ──► uPlot (static/health.js)

The plots, what they draw and from which metric, are PLOTS below: plain data.
The ring holds the last SAMPLES points (an hour at the default 10 s); for
more, and for alerts, Prometheus scrapes /metrics. The daemon starts one
sampler with the process (daemon.py), so the hour is there before anyone
opens the page. Only prometheus_client is imported: the daemon loads FastAPI
on the first web request, not for this.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.registry import Collector

SAMPLES = 360  # points kept: an hour at one every 10 s
EVERY = 10.0  # seconds between points (settings.metrics_sample_every)
TOTAL = "(all)"  # the one line of a series not split by a label

Reading = dict[str, dict[str, float]]  # sample name → label value (TOTAL when summed) → value


@dataclass(frozen=True)
class Series:
    """Lines of one plot from one metric: ``gauge`` as read, ``rate`` a counter's increase a second, ``mean``
    a histogram's mean of the interval (ms); one line per value of label ``by``, or one summed line named ``line``."""

    kind: str
    metric: str
    by: str | None = None
    line: str | None = None


@dataclass(frozen=True)
class Plot:
    id: str
    title: str
    unit: str
    series: tuple[Series, ...]


PLOTS = (
    Plot(
        "lag",
        "Watch lag: age of the oldest event not handled",
        "s",
        (Series("gauge", "kuberaven_watch_lag_seconds", "watcher"),),
    ),
    Plot(
        "backlog",
        "Backlog: work queues' depth, and outbox events Kafka has not acknowledged",
        "objects",
        (
            Series("gauge", "kuberaven_workqueue_depth", "watcher"),
            Series("gauge", "kuberaven_outbox_pending", line="outbox (not relayed)"),
        ),
    ),
    Plot(
        "events",
        "Pod events written and relayed, watch events received",
        "per second",
        (
            Series("rate", "kuberaven_events_written_total", line="written"),
            Series("rate", "kuberaven_events_published_total", line="relayed"),
            Series("rate", "kuberaven_watch_events_total", "resource"),
        ),
    ),
    Plot(
        "handlers",
        "Handler time (translate(); the network's include its backend calls), mean",
        "ms",
        (Series("mean", "kuberaven_handler_duration_seconds", "watcher"),),
    ),
    Plot(
        "openstack",
        "Neutron / Octavia / Keystone requests, mean time by method",
        "ms",
        (Series("mean", "kuberaven_openstack_request_seconds", "method"),),
    ),
    Plot(
        "wiring",
        "Pod wiring: from creation to VIF written, and to port ACTIVE, mean",
        "ms",
        (Series("mean", "kuberaven_network_pod_wiring_seconds", "step"),),
    ),
    Plot(
        "apply",
        "Time to apply a row to Kubernetes, mean",
        "ms",
        (Series("mean", "kuberaven_sync_apply_seconds", "model"),),
    ),
)
WANTED = {s.metric for p in PLOTS for s in p.series}


def read(collector: Collector = REGISTRY) -> Reading:
    """The samples of the metrics PLOTS draws, each split by every label it has (joined) and summed (TOTAL)."""
    reading: Reading = {}
    for family in collector.collect():
        for sample in family.samples:
            base = sample.name.removesuffix("_sum").removesuffix("_count")
            if sample.name not in WANTED and base not in WANTED:
                continue
            values = reading.setdefault(sample.name, {})
            values[TOTAL] = values.get(TOTAL, 0.0) + sample.value
            for name, value in sample.labels.items():
                key = f"{name}={value}"
                values[key] = values.get(key, 0.0) + sample.value
    return reading


def point(before: Reading | None, now: Reading, seconds: float) -> dict[str, dict[str, float | None]]:
    """Each plot's lines at ``now``: rates and means over the ``seconds`` since ``before`` (None: no rate yet)."""
    return {plot.id: {k: v for s in plot.series for k, v in _lines(s, before, now, seconds).items()} for plot in PLOTS}


def _lines(series: Series, before: Reading | None, now: Reading, seconds: float) -> dict[str, float | None]:
    if series.kind == "mean":
        sums, counts = (_split(series, now, f"{series.metric}{end}") for end in ("_sum", "_count"))
        old_sums, old_counts = (_split(series, before or {}, f"{series.metric}{end}") for end in ("_sum", "_count"))
        return {
            line: _ratio(sums[line] - old_sums.get(line, 0.0), counts[line] - old_counts.get(line, 0.0), 1000)
            for line in counts
        }
    current = _split(series, now, series.metric)
    if series.kind == "gauge":
        return dict(current.items())
    if before is None or seconds <= 0:
        return {line: None for line in current}
    previous = _split(series, before, series.metric)
    return {line: max(0.0, value - previous.get(line, 0.0)) / seconds for line, value in current.items()}


def _split(series: Series, reading: Reading, sample: str) -> dict[str, float]:
    values = reading.get(sample, {})
    if series.by is None:
        return {series.line or series.metric: values[TOTAL]} if TOTAL in values else {}
    prefix = f"{series.by}="
    return {key.removeprefix(prefix): value for key, value in values.items() if key.startswith(prefix)}


def _ratio(part: float, whole: float, scale: float) -> float | None:
    return part / whole * scale if whole > 0 else None


def as_plots(points: Iterable[tuple[float, Mapping[str, Mapping[str, float | None]]]]) -> list[dict[str, Any]]:
    """The ring as uPlot draws it: per plot, the times and one list of values a line (null where it had none)."""
    kept = list(points)
    times = [t for t, _ in kept]
    plots = []
    for plot in PLOTS:
        lines = sorted({line for _, values in kept for line in values.get(plot.id, {})})
        values = [[values.get(plot.id, {}).get(line) for _, values in kept] for line in lines]
        plots.append({"id": plot.id, "title": plot.title, "unit": plot.unit, "lines": lines, "values": values})
    return [{"times": times, **plot} for plot in plots]


class MetricHistory:
    """Reads the registry every ``every`` seconds in a thread of its own and keeps the last SAMPLES points."""

    def __init__(self, every: float = EVERY, samples: int = SAMPLES, collector: Collector = REGISTRY) -> None:
        self.every = every
        self._collector = collector
        self._points: collections.deque[tuple[float, dict[str, dict[str, float | None]]]] = collections.deque(
            maxlen=samples
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metric-history", daemon=True)

    def start(self) -> MetricHistory:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def plots(self) -> dict[str, Any]:
        with self._lock:
            kept = list(self._points)
        return {"every": self.every, "samples": self._points.maxlen, "plots": as_plots(kept)}

    def _run(self) -> None:
        before, then = None, time.monotonic()
        while True:
            now_reading, now = read(self._collector), time.monotonic()
            added = point(before, now_reading, now - then)
            with self._lock:
                self._points.append((time.time(), added))
            before, then = now_reading, now
            if self._stop.wait(self.every):
                return
