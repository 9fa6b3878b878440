"""Driving headless Chromium (Selenium) in the browser tests: starting it, and
:class:`Browser`, which waits explicitly, keeps a screenshot of each page and
collects console errors.  Imported by name (``tests/helpers`` is on ``sys.path``).

Without a browser or a chromedriver the tests skip, except when ``CI`` is set:
there they fail, so a CI image that lost its browser cannot pass silently.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

# selenium is a dev extra: without it the tests skip (fail under CI), see no_browser
try:
    from selenium import webdriver
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        WebDriverException,
    )
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as e:
    SELENIUM_MISSING: str | None = str(e)
else:
    SELENIUM_MISSING = None

#: every explicit wait: generous, a loaded CI machine is slow
WAIT_S = 30.0


def no_browser(why: str) -> NoReturn:
    message = f"browser tests need headless Chromium and chromedriver: {why}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(message)


def _chromedriver() -> str:
    path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not os.access(path, os.X_OK):
        no_browser("no chromedriver on PATH (make test installs chromium-driver with apt-get)")
    return path


def _chromium() -> str | None:
    """The browser binary, when it is not where chromedriver looks by default."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def start_chromium() -> Any:
    """A headless Chromium whose console messages can be read (``get_log('browser')``)."""
    if SELENIUM_MISSING:
        no_browser(f"selenium is not installed ({SELENIUM_MISSING}); pip install -e '.[dev]'")
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1280,900"):  # fmt: skip
        options.add_argument(arg)
    binary = _chromium()
    if binary:
        options.binary_location = binary
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        drv = webdriver.Chrome(service=Service(_chromedriver()), options=options)
    except WebDriverException as e:
        no_browser(f"chromedriver could not start Chromium: {e.msg}")
    drv.set_page_load_timeout(WAIT_S)
    return drv


@dataclass
class Browser:
    """The driver, the dashboard's base URL, and what the test saw on the way:
    console errors per page, and a screenshot of each page."""

    driver: Any
    base: str
    shots: Path
    severe: list[str] = field(default_factory=list)
    _shot_count: int = 0

    def url(self, path: str) -> str:
        return self.base + path

    def path(self) -> str:
        current: str = self.driver.current_url
        return current[len(self.base) :] if current.startswith(self.base) else current

    def visit(self, path: str) -> None:
        self.driver.get(self.url(path))

    def wait(self, until: Callable[[Any], Any], what: str, timeout: float = WAIT_S) -> Any:
        """Wait for ``until(driver)`` to be truthy; elements that went stale (a live
        refresh swapped them out) are looked up again on the next try."""
        return WebDriverWait(
            self.driver,
            timeout,
            poll_frequency=0.1,
            ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
        ).until(until, f"timed out after {timeout}s waiting for {what} on {self.path()}")

    def css(self, selector: str) -> Any:
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def css_all(self, selector: str) -> list[Any]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def h1(self) -> str:
        return str(self.wait(lambda d: self.css("h1").text.strip(), "an <h1>"))

    def settle(self, name: str, expected_error: str | None = None) -> None:
        """A page is shown: keep its screenshot and its console errors (but those
        matching the regex ``expected_error``, e.g. the 401 of a refused login, which
        Chromium logs as a failed resource)."""
        self.h1()
        self._shot_count += 1
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        self.driver.save_screenshot(str(self.shots / f"{self._shot_count:02d}-{slug}.png"))
        self.read_console(expected_error)

    def read_console(self, expected_error: str | None = None) -> None:
        """Keep the SEVERE console entries since the last read (reading drains them)."""
        for entry in self.driver.get_log("browser"):
            message = str(entry.get("message"))
            if entry.get("level") != "SEVERE":
                continue
            if expected_error and re.search(expected_error, message):
                continue
            self.severe.append(f"{self.path()}: {message}")
