"""``--log-format json`` and the masked Redis URL (issue 9), without Redis."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from redcron.cli.common import JsonFormatter
from redcron.redact import masked_url


def record(**extra: object) -> logging.LogRecord:
    rec = logging.LogRecord(
        "redcron.worker.worker", logging.INFO, "w.py", 1, "task %s %s", ("echo", "0-X"), None
    )
    rec.created = 1_796_025_145.25  # 2026-11-30T07:52:25.250Z
    rec.msecs = 250.0  # LogRecord took it from the real clock: keep it the created time's
    for k, v in extra.items():
        setattr(rec, k, v)
    return rec


def test_json_lines_carry_the_standard_fields_and_the_extra_ones() -> None:
    line = JsonFormatter().format(
        record(task_id="0-X", task="echo", attempt=2, max_attempts=4, retry_in_ms=None)
    )
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2026-11-30T07:52:25.250Z",
        "level": "INFO",
        "logger": "redcron.worker.worker",
        "message": "task echo 0-X",
        "task_id": "0-X",
        "task": "echo",
        "attempt": 2,
        "max_attempts": 4,
        "retry_in_ms": None,
    }


def test_json_lines_carry_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.LogRecord("x", logging.ERROR, "x.py", 1, "failed", None, None)
        rec.exc_info = sys.exc_info()
    out = json.loads(JsonFormatter().format(rec))
    assert out["level"] == "ERROR" and out["exc"].endswith("ValueError: boom")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://localhost:6379/0", "redis://localhost:6379/0"),
        ("redis://ops:s3cret@db:6380/2", "redis://ops:***@db:6380/2"),
        ("rediss://:s3cret@db", "rediss://:***@db"),
        ("redis://ops@db", "redis://ops@db"),
        ("unix:///tmp/r.sock?db=1&password=s3cret", "unix:///tmp/r.sock?db=1&password=***"),
    ],
)
def test_masked_url_hides_the_password(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_the_text_formatter_formats_a_shared_time_once_and_a_new_one_anew() -> None:
    from redcron.cli.common import LOG_FORMAT, TextFormatter

    fmt, plain = TextFormatter(), logging.Formatter(LOG_FORMAT)
    first, second, later = record(), record(), record()
    later.created += 1.5
    later.msecs = 750.0
    for rec in (first, second, later, first):
        assert fmt.format(rec) == plain.format(rec)
