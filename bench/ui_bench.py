"""The web UI's inventory at 30,000 pods, in real headless Chromium: first rows, a search, memory while paging.

The pods are written straight into SQLite (tests/pod_rows.py: the rows the
inventory writes, without a cluster): one namespace of bare pods (a tenth)
and namespaces of 1,000 pods of one Deployment each. The web app
(web/app.py, the daemon's) serves them on a real uvicorn; Selenium drives
Debian's chromium, as tests/integration/test_web_ui.py does. Measured in the page:

* first rows: from the navigation's start to the pods' first rows (the page's
  ``kuberaven:first-rows`` performance mark);
* a search: from typing a pod's whole name into the search box to that one row shown
  (the 120 ms pause the box waits for the typing to stop included);
* the JavaScript heap (Chromium's, after a forced garbage collection) on page 1 and after paging 20 pages.

The baseline column is the same page with 300 pods (a hundredth).

    python bench/ui_bench.py [--pods 30000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from common import REPOSITORY, print_table
from kuberaven.model import Database
from kuberaven.web.app import create_app

if str(REPOSITORY) not in sys.path:
    sys.path.append(str(REPOSITORY))
from tests.browser import chromium
from tests.helpers import serving
from tests.pod_rows import add_pods, pod_name

BARE_SHARE = 10  # one pod in ten is bare, all in one namespace
PER_NAMESPACE = 1000
PAGES = 20
SCRIPT_TIMEOUT = 30  # seconds a page's script may run (a search among 30,000 pods)
TARGETS = {"first rows (ms)": 1000.0, "search answered (ms)": 300.0}

SEARCH = """
const [q, done] = [arguments[0], arguments[arguments.length - 1]];
const view = document.getElementById("inventory");
const box = document.getElementById("inv-q");
const rows = () => view.querySelectorAll("tr[data-instance]").length;
const answered = () => (new URLSearchParams(view.dataset.query || "").get("q") || "") === q
  && (q ? rows() === 1 : rows() > 1);
const started = performance.now();
new MutationObserver((_, observer) => {
  if (answered()) { observer.disconnect(); done(performance.now() - started); }
}).observe(view, { childList: true, subtree: true, attributes: true });
box.value = q;
box.dispatchEvent(new Event("input", { bubbles: true }));
"""
# The next page; after the last (the baseline has fewer than PAGES), the first again, through the URL.
NEXT_PAGE = """
const done = arguments[arguments.length - 1];
const view = document.getElementById("inventory");
const next = view.querySelector(".pager button.next");
const offset = next.disabled ? 0 : Number(view.querySelector(".pager").dataset.offset) + 50;
const shown = () => view.querySelector(`.pager[data-offset="${offset}"]`);
new MutationObserver((_, observer) => { if (shown()) { observer.disconnect(); done(offset); } })
  .observe(view, { childList: true, subtree: true });
if (next.disabled) location.hash = "#inventory?sort=namespace"; else next.click();
"""


def seed(database: Database, pods: int) -> None:
    bare = pods // BARE_SHARE
    add_pods(database, "bare", bare, bare=True)
    made, index = bare, 0
    while made < pods:
        count = min(max(1, pods // 30), pods - made)
        add_pods(database, f"apps-{index:02d}", count, bare=False, first=made)
        made, index = made + count, index + 1


def heap_mb(driver: WebDriver) -> float:
    driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
    return float(driver.execute_cdp_cmd("Runtime.getHeapUsage", {})["usedSize"]) / 2**20


def first_rows_ms(driver: WebDriver, url: str) -> float:
    driver.get("about:blank")
    driver.get(url)
    mark = "return performance.getEntriesByName('kuberaven:first-rows').map((e) => e.startTime)[0] ?? null"
    WebDriverWait(driver, 30, poll_frequency=0.05).until(lambda d: d.execute_script(mark) is not None)
    return float(driver.execute_script(mark))


def measure(pods: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kuberaven-ui-bench-") as folder:
        database = Database(f"sqlite:///{Path(folder) / 'kuberaven.db'}")
        database.prepare()
        seed(database, pods)
        try:
            with chromium() as driver, serving(create_app(database)) as url:
                driver.set_script_timeout(SCRIPT_TIMEOUT)
                first = [first_rows_ms(driver, url) for _ in range(rounds)]
                wanted = [pod_name(pods * (r + 1) // (rounds + 1)) for r in range(rounds)]
                searches = []
                for name in wanted:
                    searches.append(float(driver.execute_async_script(SEARCH, name)))
                    driver.execute_async_script(SEARCH, "")  # back to every pod (not measured)
                results = {
                    "first rows (ms)": statistics.median(first),
                    "search answered (ms)": statistics.median(searches),
                }
                results.update(paging(driver))
        finally:
            database.dispose()
    return results


def paging(driver: WebDriver) -> dict[str, float]:
    """The heap on page 1 and after PAGES pages (each waited for), after garbage collection."""
    start = heap_mb(driver)
    for _ in range(PAGES):
        driver.execute_async_script(NEXT_PAGE)
    return {"JS heap, page 1 (MiB)": start, f"JS heap, page {PAGES + 1} (MiB)": heap_mb(driver)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    started = time.monotonic()
    big = measure(args.pods, args.rounds)
    small = measure(args.pods // 100, args.rounds)
    print(
        f"\n{args.pods} pods (baseline: {args.pods // 100}), medians of {args.rounds} rounds, "
        f"{time.monotonic() - started:.0f} s in all"
    )
    rows: list[tuple[str, str, str, str]] = []
    for name, value in big.items():
        target = TARGETS.get(name)
        label = f"{name} [target ≤ {target:.0f}]" if target else name
        rows.append((label, f"{value:.1f}", f"{small[name]:.1f}", f"{value / small[name]:.2f}"))
    print_table(rows)


if __name__ == "__main__":
    main()
