"""OpenTelemetry traces from enqueue to attempt (docs/observability.md), on real
Redis with in-process thread workers, spans kept by the SDK's in-memory
exporter: one trace from an API enqueue through its attempt, a task that
enqueues another continues it, a failed attempt records its error, a run's
tasks share their fire's trace (manual and beat), the HTTP worker's lease
carries the context, and the log lines of an attempt carry its ids.  Off (no
tracer provider): no span and no ``traceparent`` in the hash."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import flask
import pytest
from beats import runs_of, tick_until  # tests/helpers
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from polling import wait_for
from receiver import receiver
from worker_procs import thread_workers

from redcron import App, Context, tracing
from redcron.beat.beat import Beat
from redcron.cli.common import JsonFormatter, TextFormatter
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.model.jobs import Task
from redcron.worker import Worker

ADMIN = "test-admin-token"
TENANT = "acme"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test: a provider of its own with an in-memory exporter
    (the global provider can be set once per process: ``tracing.use``)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing.use(provider):
        yield exporter
    provider.shutdown()


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name="tr.add", tenant=TENANT)
    def add(x: int, y: int = 0) -> int:
        return x + y

    @a.task(name="tr.fan", tenant=TENANT)
    def fan(ctx: Context, x: int) -> str:
        ctx.logger.info("fanning out %d", x)
        return add.enqueue(x, 1).id

    @a.task(name="tr.boom", tenant=TENANT, retries=0)
    def boom() -> None:
        raise ValueError("boom went the task")

    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "trace-worker") as start:
        yield start


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def _hex(n: int, width: int) -> str:
    return format(n, f"0{width}x")


def finished(exporter: InMemorySpanExporter, name: str, n: int = 1) -> list[ReadableSpan]:
    """The spans named ``name`` once ``n`` of them ended."""

    def found() -> list[ReadableSpan]:
        got = [s for s in exporter.get_finished_spans() if s.name == name]
        return got if len(got) >= n else []

    return wait_for(found, f"{n} span(s) {name!r}")  # type: ignore[no-any-return]


def only(spans: list[ReadableSpan], **attrs: Any) -> ReadableSpan:
    got = [s for s in spans if all((s.attributes or {}).get(k) == v for k, v in attrs.items())]
    assert len(got) == 1, [s.attributes for s in spans]
    return got[0]


def assert_consumer_of(consumer: ReadableSpan, producer: ReadableSpan) -> None:
    """The attempt's span is the producer's child, in its trace, and linked to it."""
    assert consumer.kind is SpanKind.CONSUMER and producer.kind is SpanKind.PRODUCER
    assert consumer.context.trace_id == producer.context.trace_id
    assert consumer.parent is not None and consumer.parent.span_id == producer.context.span_id
    assert [link.context.span_id for link in consumer.links] == [producer.context.span_id]


def test_one_trace_from_an_api_enqueue_through_its_attempt(
    app: App, web: flask.Flask, spans: InMemorySpanExporter, start_worker: Callable[..., Worker]
) -> None:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    resp = client.post(
        "/v1/tasks", json={"name": "tr.add", "args": [2, 3]}, headers={"traceparent": CALLER}
    )
    assert resp.status_code == 201, resp.get_data(as_text=True)
    task_id = resp.get_json()["id"]
    start_worker()
    assert app.get(task_id).result(timeout=30) == 5

    [producer] = finished(spans, "send default")
    [consumer] = finished(spans, "default process")
    # the caller's trace goes on: the API's producer span is its traceparent's child
    assert _hex(producer.context.trace_id, 32) == CALLER_TRACE
    assert producer.parent is not None and _hex(producer.parent.span_id, 16) == CALLER[36:52]
    assert producer.attributes == {
        "messaging.system": "redcron",
        "messaging.destination.name": "default",
        "messaging.operation.type": "send",
        "messaging.operation": "publish",
        "messaging.message.id": task_id,
        "redcron.tenant": TENANT,
        "redcron.task": "tr.add",
    }
    assert_consumer_of(consumer, producer)
    assert consumer.attributes == {
        "messaging.system": "redcron",
        "messaging.destination.name": "default",
        "messaging.operation.type": "process",
        "messaging.operation": "process",
        "messaging.message.id": task_id,
        "redcron.tenant": TENANT,
        "redcron.task": "tr.add",
        "redcron.attempt": 1,
        "redcron.outcome": "succeeded",
    }
    assert consumer.status.status_code is StatusCode.UNSET
    # the instance hash carries the producer's context, W3C
    stored = app.broker.client.hget(app.broker.keys.ti(0, task_id), "traceparent")
    assert stored == f"00-{CALLER_TRACE}-{_hex(producer.context.span_id, 16)}-01".encode()


def test_a_task_that_enqueues_another_continues_its_trace(
    app: App, spans: InMemorySpanExporter, start_worker: Callable[..., Worker]
) -> None:
    parent = app.enqueue("tr.fan", 7)
    start_worker()
    child_id = parent.result(timeout=30)
    assert app.get(child_id).result(timeout=30) == 8

    sends = finished(spans, "send default", 2)
    processes = finished(spans, "default process", 2)
    first = only(sends, **{"redcron.task": "tr.fan"})
    fan = only(processes, **{"redcron.task": "tr.fan"})
    second = only(sends, **{"redcron.task": "tr.add"})
    add = only(processes, **{"redcron.task": "tr.add"})
    assert_consumer_of(fan, first)
    # enqueued inside the attempt: the second producer is the attempt's child
    assert second.parent is not None and second.parent.span_id == fan.context.span_id
    assert_consumer_of(add, second)
    assert len({s.context.trace_id for s in (first, fan, second, add)}) == 1


def test_a_failed_attempt_records_its_error_on_its_span(
    app: App, spans: InMemorySpanExporter, start_worker: Callable[..., Worker]
) -> None:
    handle = app.enqueue("tr.boom")
    start_worker()
    wait_for(lambda: handle.state == "dead", "the task to be dead-lettered")
    [consumer] = finished(spans, "default process")
    assert consumer.attributes is not None
    assert consumer.attributes["redcron.outcome"] == "failed"
    assert consumer.status.status_code is StatusCode.ERROR
    [event] = consumer.events
    assert event.name == "exception"
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "boom went the task"
    assert "Traceback" in str(event.attributes["exception.stacktrace"])


def _dag_job(app: App, name: str, **trigger: Any) -> str:
    return app.jobs.put(
        name,
        tasks={"a": Task("tr.add", args=[1]), "b": Task("tr.add", args=[2], depends_on=["a"])},
        tenant=TENANT,
        **trigger,
    ).id


def _run_tasks_share_the_fire(
    app: App, spans: InMemorySpanExporter, run_id: str, job: str, trigger: str
) -> None:
    [fire] = [
        s
        for s in finished(spans, f"fire {job}")
        if (s.attributes or {}).get("messaging.message.conversation_id") == run_id
    ]
    assert fire.kind is SpanKind.PRODUCER
    assert fire.attributes is not None and fire.attributes["redcron.trigger"] == trigger
    consumers = [
        s
        for s in finished(spans, "default process", 2)
        if (s.attributes or {}).get("messaging.message.conversation_id") == run_id
    ]
    assert {(s.attributes or {})["messaging.message.id"] for s in consumers} == {
        f"{run_id}/a",
        f"{run_id}/b",
    }
    for consumer in consumers:
        assert_consumer_of(consumer, fire)


def test_a_manual_runs_tasks_share_its_fires_trace(
    app: App, spans: InMemorySpanExporter, start_worker: Callable[..., Worker]
) -> None:
    _dag_job(app, "traced")
    run_id = app.jobs.trigger("traced", tenant=TENANT)
    start_worker()
    wait_for(lambda: app.jobs.run(run_id).state == "succeeded", "the run to succeed")
    _run_tasks_share_the_fire(app, spans, run_id, "traced", "manual")


def test_a_beat_fires_runs_tasks_share_its_trace(
    app: App, spans: InMemorySpanExporter, start_worker: Callable[..., Worker]
) -> None:
    job_id = _dag_job(app, "ticking", every="1s")
    beat = Beat(app, name="b1")
    tick_until([beat], lambda: runs_of(app, job_id), "a run")
    app.jobs.pause("ticking", tenant=TENANT)
    run_id = runs_of(app, job_id)[0].id
    start_worker()
    wait_for(lambda: app.jobs.run(run_id).state == "succeeded", "the run to succeed")
    _run_tasks_share_the_fire(app, spans, run_id, "ticking", "every")


def test_an_http_workers_lease_carries_the_trace_context(
    app: App, web: flask.Flask, spans: InMemorySpanExporter
) -> None:
    handle = app.enqueue("tr.add", 1)
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    resp = client.post("/v1/worker/lease", json={"worker_id": "hw-1"})
    [item] = resp.get_json()
    [producer] = finished(spans, "send default")
    assert item["task_id"] == handle.id
    sc = producer.context
    want = f"00-{_hex(sc.trace_id, 32)}-{_hex(sc.span_id, 16)}-{_hex(sc.trace_flags, 2)}"
    assert item["traceparent"] == want
    assert item["tracestate"] is None


def test_the_attempts_log_lines_carry_its_trace_and_span_ids(
    app: App,
    spans: InMemorySpanExporter,
    start_worker: Callable[..., Worker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    handle = app.enqueue("tr.fan", 1)
    start_worker()
    app.get(handle.result(timeout=30)).result(timeout=30)
    fan = only(finished(spans, "default process", 2), **{"redcron.task": "tr.fan"})
    ids = (_hex(fan.context.trace_id, 32), _hex(fan.context.span_id, 16))
    [task_record] = [r for r in caplog.records if r.name == "redcron.task"]
    assert (task_record.trace_id, task_record.span_id) == ids  # type: ignore[attr-defined]
    [line] = wait_for(
        lambda: [
            r
            for r in caplog.records
            if r.name == "redcron.worker.worker" and getattr(r, "task_id", None) == handle.id
        ],
        "the attempt's line",
    )
    assert (line.trace_id, line.span_id) == ids  # type: ignore[attr-defined]
    text = TextFormatter().format(line)
    assert text.endswith(f" trace_id={ids[0]} span_id={ids[1]}"), text
    as_json = JsonFormatter().format(task_record)
    assert f'"trace_id": "{ids[0]}"' in as_json and f'"span_id": "{ids[1]}"' in as_json


def test_off_no_span_and_no_trace_context_stored(
    app: App, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    assert tracing.tracer() is None  # no provider configured: the API's proxy
    handle = app.enqueue("tr.fan", 1)
    start_worker()
    child = app.get(handle.result(timeout=30))
    assert child.result(timeout=30) == 2
    for iid in (handle.id, child.id):
        fields = app.broker.client.hkeys(app.broker.keys.ti(0, iid))
        assert b"traceparent" not in fields and b"tracestate" not in fields
    assert not [r for r in caplog.records if hasattr(r, "trace_id")]


#: a process that sets tracing up as REDCRON_OTEL=1 says, enqueues a task and runs
#: it on an in-process worker, then exits (the SDK's exit hook flushes the batch)
OTLP_PROCESS = textwrap.dedent(
    """
    import threading
    from redcron import App
    from redcron.worker import Worker

    app = App()  # REDCRON_REDIS_URL, REDCRON_PREFIX and REDCRON_OTEL from the environment

    @app.task(name="otlp.add")
    def add(x, y):
        return x + y

    worker = Worker(app, lease_ttl=2.0, grace=1.0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert app.enqueue("otlp.add", 2, 3).result(timeout=30) == 5
    worker.stop()
    thread.join(15)
    """
)


def test_redcron_otel_exports_the_trace_to_an_otlp_http_receiver(
    redis_url: str, key_prefix: str
) -> None:
    with receiver() as rec:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("REDCRON_", "OTEL_"))}
        env.update(
            REDCRON_REDIS_URL=redis_url,
            REDCRON_PREFIX=key_prefix.rstrip(":"),
            REDCRON_MIN_LEASE_TTL="0.5",
            REDCRON_OTEL="1",
            OTEL_EXPORTER_OTLP_ENDPOINT=rec.url.removesuffix("/hook"),
        )
        done = subprocess.run(
            [sys.executable, "-c", OTLP_PROCESS], env=env, capture_output=True, timeout=90
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        posts = [got for got in rec.got if got.path == "/v1/traces"]
    assert posts, [got.path for got in rec.got]
    types = {v for got in posts for k, v in got.headers.items() if k.lower() == "content-type"}
    assert types == {"application/x-protobuf"}
    spans: dict[str, Any] = {}
    for got in posts:
        request = ExportTraceServiceRequest()
        request.ParseFromString(got.body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert resource["service.name"] == "redcron"
            for scope in resource_spans.scope_spans:
                assert scope.scope.name == "redcron"
                spans.update({span.name: span for span in scope.spans})
    producer, consumer = spans["send default"], spans["default process"]
    assert consumer.trace_id == producer.trace_id
    assert consumer.parent_span_id == producer.span_id
    assert [link.span_id for link in consumer.links] == [producer.span_id]


def test_bench_throughput_otel_measures_off_and_on_side_by_side(redis_url: str) -> None:
    result = CliRunner().invoke(
        main,
        ["bench", "throughput", "--otel", "memory", "--tasks", "200", "--rounds", "1",
         "--redis", redis_url, "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["otel"], out["rounds"], out["tasks"]) == ("memory", 1, 200)
    for mode in ("off", "on"):
        assert set(out[mode]) == {"enqueue_single_per_s", "enqueue_per_s", "drain_per_s"}
        assert all(rate > 0 for rate in out[mode].values())
        assert len(out["drain_per_s_rounds"][mode]) == 1
    assert out["on_vs_off"]["drain_per_s"] > 0
    assert tracing.tracer() is None  # the benchmark's provider was for its rounds only
    refused = CliRunner().invoke(
        main, ["bench", "throughput", "--otel", "memory", "--procs", "2", "--redis", redis_url]
    )
    assert refused.exit_code == 2 and "--otel" in refused.output
