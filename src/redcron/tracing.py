"""OpenTelemetry traces from enqueue to attempt (docs/observability.md).

Optional: everything here works without the ``otel`` extra installed, and does
nothing unless a tracer provider is configured, either by the application
(``opentelemetry.trace.set_tracer_provider``) or by redcron itself when
``REDCRON_OTEL`` is set (:func:`setup`).  Without one the API hands out a
non-recording ``ProxyTracer``: :func:`tracer` sees that and returns None, and
every caller skips all its tracing work (no span, no ``traceparent`` stored),
so the cost when off is one function call per enqueue and per attempt.

What travels: the W3C ``traceparent`` (and ``tracestate`` when there is one) of
the span that enqueued an instance or fired its run, stored in the instance
hash (fields ``traceparent``, ``tracestate``) and handed back with its lease,
always in the W3C format whatever the process's global propagator is: the
stored field is named after it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

try:  # the otel extra: optional
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - the extra is installed in the checkout
    trace = None  # type: ignore[assignment]

from redcron.config import OTEL_MODES

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

log = logging.getLogger(__name__)

#: the instrumentation scope's name
SCOPE = "redcron"
#: ``messaging.system`` of every span
SYSTEM = "redcron"
#: REDCRON_OTEL values (Settings.otel): off, OTLP/HTTP, the console, memory
MODES = OTEL_MODES

_W3C = TraceContextTextMapPropagator() if trace is not None else None
#: a provider set by :func:`use` (tests, the benchmark), used before the global one
_override: Any = None
#: (provider, its tracer): a provider's tracer is made once
_cached: tuple[Any, Any] = (None, None)
_setup_lock = threading.Lock()
_set_up: Any = None


def available() -> bool:
    """Whether the OpenTelemetry API is installed (the ``otel`` extra)."""
    return trace is not None


def tracer() -> Tracer | None:
    """redcron's tracer, or None when tracing is off: OpenTelemetry is not
    installed, or no tracer provider was configured (the API's default proxy,
    or its no-op provider)."""
    global _cached
    if trace is None:
        return None
    provider = _override if _override is not None else trace.get_tracer_provider()
    cached_provider, cached = _cached
    if provider is cached_provider:
        return cached  # type: ignore[no-any-return]
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    made = provider.get_tracer(SCOPE)
    _cached = (provider, made)
    return made


@contextmanager
def use(provider: TracerProvider | None) -> Iterator[None]:
    """Trace with ``provider`` instead of the global one while in the block
    (every thread: a thread worker's slots too); None: the global one.  For
    tests and the benchmark, which switch tracing on and off in one process
    (the global provider can be set only once)."""
    global _override
    before = _override
    _override = provider
    try:
        yield
    finally:
        _override = before


@contextmanager
def producer(name: str, attributes: Mapping[str, Any]) -> Iterator[dict[str, str] | None]:
    """A PRODUCER span named ``name`` around the block, current in it (an
    exception leaving the block is recorded on it); yields its W3C carrier
    (:func:`carrier_of`) for the instances it makes, or None when tracing is off.
    (``start_span`` and an attach by hand: ``start_as_current_span`` cost a
    third more per enqueue.)"""
    t = tracer()
    if t is None:
        yield None
        return
    span = t.start_span(name, kind=SpanKind.PRODUCER, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield carrier_of(span)
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        otel_context.detach(token)
        span.end()


def start_producer(name: str, attributes: Mapping[str, Any]) -> tuple[Any, dict[str, str]] | None:
    """A PRODUCER span the caller ends (``span.end()``), not made current, and
    its carrier; None when tracing is off.  For many at once (a beat's fires)."""
    t = tracer()
    if t is None:
        return None
    span = t.start_span(name, kind=SpanKind.PRODUCER, attributes=attributes)
    return span, carrier_of(span)


def start_fire(
    job: str, tenant: str | None, job_id: str, run_id: str, trigger: str
) -> tuple[Any, dict[str, str]] | None:
    """:func:`start_producer` for one fire of a job: ``fire <job>``, whose
    context every task of the run carries (None: tracing off)."""
    if tracer() is None:
        return None
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "create",
        "messaging.operation": "create",
        "messaging.message.conversation_id": run_id,
        "redcron.job": job,
        "redcron.job_id": job_id,
        "redcron.trigger": trigger,
    }
    if tenant is not None:
        attributes["redcron.tenant"] = tenant
    return start_producer(f"fire {job}", attributes)


def trace_fields(started: tuple[Any, dict[str, str]] | None) -> tuple[str, str]:
    """(traceparent, tracestate) of a started span ("" for none) for a row."""
    if started is None:
        return "", ""
    carrier = started[1]
    return carrier.get("traceparent", ""), carrier.get("tracestate", "")


def end(started: tuple[Any, dict[str, str]] | None) -> None:
    """End a span :func:`start_producer` started (None: nothing)."""
    if started is not None:
        started[0].end()


def start_consumer(
    t: Tracer, name: str, attributes: Mapping[str, Any], traceparent: str, tracestate: str = ""
) -> Span:
    """A CONSUMER span for one attempt: the child of the producer context the
    instance carries (a single message: its trace is the enqueue's) and linked
    to it (the messaging conventions' required relation, which a batch consumer
    would keep when a parent cannot be had); a root span when it carries none."""
    remote = _remote(traceparent, tracestate)
    if remote is None:
        return t.start_span(name, None, SpanKind.CONSUMER, attributes)
    parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    return t.start_span(name, parent, SpanKind.CONSUMER, attributes, (Link(remote),))


def _remote(traceparent: str, tracestate: str) -> Any:
    """The remote SpanContext a stored ``traceparent`` names (None: none, or not
    valid).  The form redcron stores (version 00, 55 characters) is read by
    slicing, a fifth of the propagator's regular expressions per attempt; any
    other goes through the propagator."""
    if not traceparent:
        return None
    tp = traceparent
    if len(tp) == 55 and tp[:3] == "00-" and tp[35] == "-" and tp[52] == "-":
        try:
            trace_id, span_id = int(tp[3:35], 16), int(tp[36:52], 16)
            flags = int(tp[53:], 16)
        except ValueError:
            return None
        if not trace_id or not span_id:
            return None
        state = trace.TraceState.from_header([tracestate]) if tracestate else None
        return trace.SpanContext(trace_id, span_id, True, trace.TraceFlags(flags), state)
    ctx = extract(traceparent, tracestate)
    return None if ctx is None else trace.get_current_span(ctx).get_span_context()


def attach(span: Span) -> object:
    """Make ``span`` the current span of this thread; returns the token for :func:`detach`."""
    return otel_context.attach(trace.set_span_in_context(span))


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]


def record_failure(span: Span, outcome: str, error: str) -> None:
    """Record a failed attempt on its span as an ``exception`` event (the
    attributes ``record_exception`` writes, from the attempt's error text: the
    exception itself was caught where the task ran) and status ERROR."""
    lines = error.strip().splitlines()
    last = lines[-1] if lines else outcome
    kind, sep, message = last.partition(": ")
    if not sep or " " in kind:  # not "Type: message": no exception type to name
        kind, message = outcome, last
    span.add_event(
        "exception",
        {
            "exception.type": kind,
            "exception.message": message,
            "exception.stacktrace": error,
        },
    )
    span.set_status(Status(StatusCode.ERROR, f"{outcome}: {last}"[:300]))


def carrier_of(span: Span) -> dict[str, str]:
    """``{"traceparent": ..., ["tracestate": ...]}`` of ``span``, W3C (version
    00), formatted here: the propagator's ``inject`` costs a context per call."""
    sc = span.get_span_context()
    carrier = {"traceparent": f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}"}
    if sc.trace_state:
        carrier["tracestate"] = sc.trace_state.to_header()
    return carrier


def extract(traceparent: str, tracestate: str = "") -> Any:
    """The OpenTelemetry context a stored ``traceparent`` names (None: no valid
    one); the parent of a consumer span."""
    if not traceparent or _W3C is None:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    ctx = _W3C.extract(carrier)
    span_ctx = trace.get_current_span(ctx).get_span_context()
    return ctx if span_ctx.is_valid else None


@contextmanager
def incoming(headers: Any) -> Iterator[None]:
    """Make the W3C ``traceparent`` of an incoming request (``headers``: a
    mapping, or a request's headers, read with ``.get``) the
    current context while in the block, so what the request enqueues joins the
    caller's trace; nothing when tracing is off or the header is absent."""
    parent = headers.get("traceparent") if tracer() is not None else None
    ctx = extract(parent, headers.get("tracestate") or "") if parent else None
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def ids(span: Any) -> tuple[str, str] | None:
    """(trace_id, span_id) of ``span`` as lowercase hex (32 and 16 digits), as
    log lines carry them; None for no span or an invalid one."""
    if span is None:
        return None
    sc = span.get_span_context()
    if not sc.is_valid:
        return None
    return format(sc.trace_id, "032x"), format(sc.span_id, "016x")


def current_ids() -> tuple[str, str] | None:
    """:func:`ids` of the current span (None: none, or tracing not installed)."""
    if trace is None:
        return None
    return ids(trace.get_current_span())


class TraceFields(logging.Filter):
    """Stamps ``trace_id`` and ``span_id`` of the current span on a record that
    has none (a task's ``ctx.logger`` record, logged inside its attempt's span);
    never drops a record.  The CLI's text format appends them, its JSON format
    carries them as fields (``cli/common.py``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "trace_id", None) is None:
            found = current_ids()
            if found is not None:
                record.trace_id, record.span_id = found
        return True


_TRACE_FIELDS = TraceFields()


def stamp_logger(name: str) -> None:
    """Add :class:`TraceFields` to the logger ``name`` (once)."""
    logger = logging.getLogger(name)
    if _TRACE_FIELDS not in logger.filters:
        logger.addFilter(_TRACE_FIELDS)


def build_provider(mode: str, service_name: str = "redcron") -> TracerProvider:
    """An SDK tracer provider for ``REDCRON_OTEL=mode``: ``1``/``otlp`` export
    over OTLP/HTTP (protobuf) as the standard ``OTEL_EXPORTER_OTLP_*``
    variables say (endpoint ``http://localhost:4318`` by default), in batches;
    ``console`` prints each span; ``memory`` keeps them in an
    ``InMemorySpanExporter`` (the benchmark's).  The resource is the SDK's
    (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), ``service.name``
    ``service_name`` unless those name one.

    Raises:
        ImportError: the ``otel`` extra is not installed.
    """
    # the SDK and its exporters are the optional extra's: imported only here
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider
    from opentelemetry.sdk.trace import export

    named = "OTEL_SERVICE_NAME" in os.environ or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {"service.name": service_name})
    provider = SdkProvider(resource=resource)
    if mode in ("1", "otlp"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )

        provider.add_span_processor(export.BatchSpanProcessor(OTLPSpanExporter()))
    elif mode == "console":
        provider.add_span_processor(export.SimpleSpanProcessor(export.ConsoleSpanExporter()))
    elif mode == "memory":
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        provider.add_span_processor(export.SimpleSpanProcessor(InMemorySpanExporter()))
    else:
        raise ValueError(f"REDCRON_OTEL={mode!r}: expected one of {', '.join(MODES[2:])}")
    return provider


def setup(mode: str, service_name: str = "redcron") -> bool:
    """Set the global tracer provider for ``REDCRON_OTEL=mode`` (:func:`build_provider`)
    once per process; ``""`` or ``"0"``: nothing.  A provider the application
    set already is kept (its configuration wins).  Returns whether tracing is on.
    Without the ``otel`` extra it logs a warning once and returns False."""
    global _set_up
    if mode in ("", "0"):
        return tracer() is not None
    with _setup_lock:
        if _set_up is not None:
            return _set_up is not False
        if trace is None:
            _set_up = False
            log.warning(
                "REDCRON_OTEL=%s but OpenTelemetry is not installed (pip install "
                "'redcron[otel]'): tracing stays off",
                mode,
            )
            return False
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            _set_up = True  # the application configured one: keep it
            return True
        try:
            provider = build_provider(mode, service_name)
        except ImportError as exc:
            _set_up = False
            log.warning("REDCRON_OTEL=%s: %s (pip install 'redcron[otel]')", mode, exc)
            return False
        trace.set_tracer_provider(provider)
        _set_up = provider
        return True
