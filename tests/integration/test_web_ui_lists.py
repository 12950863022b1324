"""The inventory's lists at scale in real headless Chromium: thousands of pods searched, paged and sorted by the
server, bare pods as one list, and the URL that shows a colleague the same view.

The pods are rows written straight into the database (tests/pod_rows.py), served by the daemon's web app on a
real uvicorn, on SQLite and PostgreSQL: what is tested is the listing, not the inventory that writes the rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from kuberaven.model import Database
from kuberaven.web.app import create_app
from tests.helpers import serving
from tests.integration.test_web_ui import browser, click, row_text, screenshot, wait_for
from tests.pod_rows import add_pods

__all__ = ["browser"]  # the fixture, shared with test_web_ui.py

BARE = 3000  # bare pods in one namespace, each its own slice
DEPLOYED = 500  # pods of one Deployment in another
PAGE = 50


@pytest.fixture
def crowded(database: Database) -> Iterator[str]:
    """The web app over BARE bare pods in namespace ``crowd`` and DEPLOYED in ``apps``; yields its URL."""
    add_pods(database, "crowd", BARE, bare=True)
    add_pods(database, "apps", DEPLOYED, bare=False, first=BARE)
    with serving(create_app(database)) as url:
        yield url


def pods_shown(browser: WebDriver) -> list[str]:
    # In one script: the list is drawn again as data arrives, so a row found a moment ago may be gone.
    script = "return [...document.querySelectorAll('#inventory tr[data-instance]')].map((r) => r.dataset.instance)"
    return list(browser.execute_script(script))


def texts(browser: WebDriver, selector: str) -> set[str]:
    return set(
        browser.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((c) => c.textContent)", selector
        )
    )


def total(browser: WebDriver) -> str | None:
    return browser.execute_script("return document.querySelector('#inventory .pager')?.dataset.total ?? null")


def view_state(browser: WebDriver) -> dict[str, list[str]]:
    return parse_qs(urlsplit(browser.current_url).fragment.partition("?")[2])


def answered(browser: WebDriver) -> dict[str, list[str]]:
    """The query the rows on screen answer (the page sets it once they are drawn)."""
    return parse_qs(browser.find_element(By.ID, "inventory").get_attribute("data-query") or "")


def search(browser: WebDriver, text: str) -> None:
    box = browser.find_element(By.ID, "inv-q")
    box.clear()
    box.send_keys(text)


def test_a_search_finds_one_pod_among_thousands_and_the_link_shows_it_again(crowded: str, browser: WebDriver) -> None:
    browser.get(crowded)
    wait_for(browser, lambda: len(pods_shown(browser)) == PAGE, 20, "the first page of pods")
    assert total(browser) == str(BARE + DEPLOYED)

    search(browser, "pod-02345")
    wanted = "kubernetes/crowd/pod-02345"
    wait_for(browser, lambda: pods_shown(browser) == [wanted], 10, "the one pod found")
    assert view_state(browser)["q"] == ["pod-02345"]
    screenshot(browser, "inventory-search")

    # A link: the same view in a new page.
    link = browser.current_url
    browser.get("about:blank")
    browser.get(link)
    wait_for(browser, lambda: pods_shown(browser) == [wanted], 20, "the searched pod from the link")
    assert browser.find_element(By.ID, "inv-q").get_attribute("value") == "pod-02345"

    search(browser, "apps")  # a namespace's name finds its pods
    wait_for(browser, lambda: answered(browser).get("q") == ["apps"], 10, "the namespace's pods")
    assert total(browser) == str(DEPLOYED)
    assert all(name.startswith("kubernetes/apps/") for name in pods_shown(browser))


def test_bare_pods_read_as_one_paged_sorted_list(crowded: str, browser: WebDriver) -> None:
    browser.get(f"{crowded}/#inventory?cluster=kubernetes&namespace=crowd")
    wait_for(browser, lambda: answered(browser).get("namespace") == ["crowd"], 20, "the namespace's pods")
    # One table of PAGE rows and a pager, not one table a bare pod.
    assert len(browser.find_elements(By.CSS_SELECTOR, "#inventory table")) == 1
    assert len(pods_shown(browser)) == PAGE
    assert texts(browser, "#inventory td.slice") == {"bare pod"}
    bare = 'tr[data-trust-domain="kubernetes/crowd"] td.bare'
    wait_for(browser, lambda: (row_text(browser, bare) or "").strip() == str(BARE), 10, "the bare pods counted")
    first_page = pods_shown(browser)
    assert first_page[0] == "kubernetes/crowd/pod-00000"

    click(browser, "#inventory .pager button.next")
    wait_for(browser, lambda: answered(browser).get("offset") == [str(PAGE)], 10, "the second page")
    assert pods_shown(browser)[0] == f"kubernetes/crowd/pod-{PAGE:05d}"
    assert not set(pods_shown(browser)) & set(first_page)
    assert view_state(browser)["offset"] == [str(PAGE)]

    click(browser, '#inventory th button[data-sort="name"]')
    wait_for(browser, lambda: answered(browser).get("sort") == ["name"], 10, "sorted by name")
    click(browser, '#inventory th button[data-sort="name"]')
    wait_for(browser, lambda: answered(browser).get("sort") == ["-name"], 10, "sorted by name, descending")
    assert pods_shown(browser)[0] == f"kubernetes/crowd/pod-{BARE - 1:05d}"
    assert view_state(browser)["sort"] == ["-name"]
    screenshot(browser, "inventory-bare-pods")
