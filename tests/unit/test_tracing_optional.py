"""OpenTelemetry is an optional extra (``redcron[otel]``): without it installed
redcron imports, builds rows and runs a worker's hooks as ever, and
``REDCRON_OTEL`` only warns.  The absence is simulated in a fresh interpreter
(``sys.modules["opentelemetry"] = None`` makes every import of it fail).  No
Redis."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider

from redcron import tracing
from redcron.config import Settings
from redcron.errors import ConfigError

WITHOUT_OTEL = textwrap.dedent(
    """
    import logging, sys
    for name in ("opentelemetry", "opentelemetry.trace", "opentelemetry.context",
                 "opentelemetry.sdk", "opentelemetry.sdk.trace"):
        sys.modules[name] = None  # import opentelemetry... raises ImportError
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")

    import redcron
    from redcron import tracing
    from redcron.app import App
    from redcron.worker import Worker  # the worker and its tracing hook import
    from redcron.worker.tracing import Tracing
    from redcron.cli.main import main  # the CLI too
    import redcron.dashboard

    assert not tracing.available()
    assert tracing.tracer() is None
    with tracing.producer("send q", {}) as carrier:
        assert carrier is None
    assert tracing.start_fire("j", "t", "j1", "j1@1", "cron") is None
    assert tracing.current_ids() is None
    with tracing.incoming({"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}):
        pass
    # REDCRON_OTEL without the extra: a warning, tracing stays off
    app = App("redis://127.0.0.1:1/0", otel="1")
    assert tracing.tracer() is None
    print("OK")
    """
)


def test_redcron_works_without_opentelemetry_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "OK"
    assert any("OpenTelemetry is not installed" in line for line in lines), out.stdout


def test_otel_setting_is_checked() -> None:
    assert Settings.from_env({"REDCRON_OTEL": "1"}).otel == "1"
    with pytest.raises(ConfigError, match="otel"):
        Settings(otel="yes")


def test_off_unless_a_provider_is_configured() -> None:
    # the API's default (a proxy handing out non-recording spans): off, nothing made
    assert tracing.tracer() is None
    with tracing.producer("send q", {}) as carrier:
        assert carrier is None


def test_record_failure_names_the_exception_from_the_error_text() -> None:
    provider = TracerProvider()
    with tracing.use(provider):
        t = tracing.tracer()
        assert t is not None
        span = t.start_span("x")
        tracing.record_failure(span, "failed", "Traceback...\n  ...\nKeyError: 'k'\n")
        span.end()
        other = t.start_span("y")
        tracing.record_failure(other, "timed_out", "killed after timeout of 1.0s")
        other.end()
    assert tracing.tracer() is None  # use() put the default back
    [event] = span.events  # type: ignore[attr-defined]
    assert (event.attributes["exception.type"], event.attributes["exception.message"]) == (
        "KeyError",
        "'k'",
    )
    [event] = other.events  # type: ignore[attr-defined]
    assert event.attributes["exception.type"] == "timed_out"
    assert event.attributes["exception.message"] == "killed after timeout of 1.0s"


def test_trace_fields_stamps_only_inside_a_span(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("redcron.test.tracefields")
    log.addFilter(tracing.TraceFields())
    caplog.set_level(logging.INFO)
    provider = TracerProvider()
    log.info("outside")
    with tracing.use(provider), tracing.producer("send q", {}) as carrier:
        assert carrier is not None
        log.info("inside")
    outside, inside = caplog.records
    assert not hasattr(outside, "trace_id")
    trace_id = carrier["traceparent"].split("-")[1]
    assert inside.trace_id == trace_id  # type: ignore[attr-defined]
    assert len(inside.span_id) == 16  # type: ignore[attr-defined]
