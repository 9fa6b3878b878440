"""The dashboard in a real browser (headless Chromium), against a live
``redcron dashboard`` and a real worker: log in, trigger a job and watch its
DAG go live without reloading, replay a dead-lettered task, visit every page;
no console errors anywhere.  Screenshots go to ``test-artifacts/browser/``.

The HTML contract these selectors follow is the dashboard's (``#token``,
``form.trigger``, ``g.node[data-task][data-state]``, ``#live``,
``tr.dlq-entry[data-task-id]``, ``button.replay``, ``nav#nav``).
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import browser_app
import pytest
from browser_page import Browser
from polling import wait_for

from redcron import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LIVE_STATES = {"leased", "running"}


def node_state(b: Browser, task: str) -> str | None:
    nodes = b.css_all(f'svg.dag g.node[data-task="{task}"]')
    return nodes[0].get_attribute("data-state") if nodes else None


def refreshes(b: Browser) -> int:
    return int(b.driver.execute_script("return Number(document.body.dataset.refreshes || 0)"))


def test_dashboard_in_a_browser(
    browser: Browser, client: App, admin_token: str, worker_process: None
) -> None:
    b = browser
    job = browser_app.put_job(client)

    # -- any page without a session goes to the login form, which keeps ?next=
    b.visit("/jobs")
    b.wait(lambda d: urlsplit(d.current_url).path == "/login", "the redirect to /login")
    assert "next=" in b.driver.current_url
    b.settle("login")
    b.css("#token").send_keys("not-the-token")
    b.css("#login-submit").click()
    b.wait(lambda d: b.css(".error").is_displayed(), "the login error")
    b.settle("login-refused", expected_error=r"/login - .* status of 401")
    b.css("#token").clear()
    b.css("#token").send_keys(admin_token)
    b.css("#login-submit").click()
    b.wait(lambda d: urlsplit(d.current_url).path == "/jobs", "the page asked for, after login")
    b.settle("jobs")

    b.visit("/")
    assert b.h1() == "Overview"
    b.settle("overview")

    # -- jobs → the job → trigger → its run's page
    b.visit("/jobs")
    b.wait(lambda d: b.css(f'a[href$="/jobs/{job.id}"]'), f"a link to job {job.id}").click()
    b.wait(lambda d: unquote(urlsplit(d.current_url).path) == f"/jobs/{job.id}", "the job page")
    b.settle("job")
    b.css("form.trigger button").click()
    b.wait(lambda d: urlsplit(d.current_url).path.startswith("/runs/"), "the new run's page")
    run_id = unquote(urlsplit(b.driver.current_url).path.removeprefix("/runs/"))
    assert run_id.startswith(f"{job.id}@"), run_id
    b.wait(lambda d: node_state(b, browser_app.SLOW_TASK), "the DAG node of the slow task")
    first = node_state(b, browser_app.SLOW_TASK)
    b.settle("run")

    # -- the live refresh (not a reload) shows the slow task running, then done
    b.driver.execute_script("window.redcronNoReload = true")
    start = refreshes(b)
    b.wait(
        lambda d: node_state(b, browser_app.SLOW_TASK) in LIVE_STATES | {"succeeded"},
        "the slow task to start",
    )
    seen_live = node_state(b, browser_app.SLOW_TASK)
    b.settle("run-live")
    b.wait(
        lambda d: node_state(b, browser_app.SLOW_TASK) == "succeeded",
        "the slow task to succeed",
    )
    b.wait(lambda d: node_state(b, "report") == "succeeded", "the last task to succeed")
    b.settle("run-succeeded")
    assert b.driver.execute_script("return window.redcronNoReload === true"), "the page reloaded"
    assert refreshes(b) > start, "the states changed without a live refresh?"
    # it takes ~3 s, and the page polls every ~1.5 s: the browser saw it run
    assert first not in {"succeeded"} and seen_live in LIVE_STATES, (first, seen_live)

    # -- a permanently failing task lands in the DLQ; replay takes it out of the list
    handle = client.enqueue("browser.broken")
    wait_for(lambda: handle.state == "dead", f"task {handle.id} to be dead-lettered")
    b.visit("/dlq")
    row = f'tr.dlq-entry[data-task-id="{handle.id}"]'
    b.wait(lambda d: b.css(row), f"the DLQ row of {handle.id}")
    b.settle("dlq")
    client.broker.client.set(browser_app.fixed_key(client), "1")  # the bug is fixed
    b.css(f"{row} button.replay").click()
    b.wait(lambda d: urlsplit(d.current_url).path == "/dlq", "the DLQ list again")
    b.wait(lambda d: not b.css_all(row), f"the DLQ row of {handle.id} to leave")
    b.settle("dlq-replayed")
    assert handle.result(timeout=30) == "fixed"

    # -- every page in the nav
    links = {
        urlsplit(a.get_attribute("href")).path: a.text.strip()
        for a in b.css_all("nav#nav a[href]")
        if urlsplit(a.get_attribute("href")).netloc == urlsplit(b.base).netloc
    }
    for page in ("/", "/jobs", "/runs", "/dlq", "/tenants", "/workers", "/tasks"):
        assert page in links, f"{page} is not in the nav: {links}"
    for path, label in sorted(links.items()):
        b.visit(path)
        b.wait(lambda d, path=path: urlsplit(d.current_url).path == path, f"the page {path}")
        b.settle(f"nav-{label or path}")

    b.read_console()
    assert not b.severe, "console errors:\n" + "\n".join(b.severe)
