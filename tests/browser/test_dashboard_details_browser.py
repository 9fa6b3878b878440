"""A task's "Cancel task" button goes when the task ends while its page is open:
the button is in the page's live part, which app.js swaps in without a reload
(issue 20 §6: no Cancel on an ended task).  Headless Chromium against a live
``redcron dashboard``; the task waits on a queue no worker serves, and the
test cancels it from Python."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from browser_page import Browser

from redcron import App
from redcron.store.logins import LoginLinks

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CANCEL = "form.cancel button.cancel-button"


def test_the_cancel_button_goes_when_the_task_ends(browser: Browser, client: App) -> None:
    b = browser
    code = LoginLinks(client.broker).create()
    b.visit(f"/login/once/{code}")
    b.wait(lambda d: urlsplit(d.current_url).path == "/", "the overview, logged in")
    handle = client.tasks["browser.step"].enqueue(_queue="nobody-serves-this")
    b.visit(f"/tasks/{handle.id}")
    b.wait(lambda d: b.css_all(CANCEL), "the Cancel task button of a ready task")
    assert b.css(CANCEL).text == "Cancel task"
    b.settle("task-ready")
    b.driver.execute_script("window.redcronNoReload = true")
    assert handle.cancel().cancelled
    b.wait(lambda d: not b.css_all(CANCEL), "the button to go with the live refresh")
    b.wait(lambda d: b.css_all("#live .badge.state-cancelled"), "the cancelled state")
    assert b.driver.execute_script("return window.redcronNoReload === true"), "the page reloaded"
    b.settle("task-cancelled")
    b.read_console()
    assert not b.severe, "console errors:\n" + "\n".join(b.severe)
