"""Waiting for something to show (generous deadlines, short intervals).
Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    pred: Callable[[], Any], what: str, timeout: float = 30.0, interval: float = 0.05
) -> Any:
    """Poll ``pred`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
