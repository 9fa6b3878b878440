"""retry_on / permanent_on (issue 32 §4) on a real worker against real Redis:
a task's lists, a call's (which replace them), subclasses, a name the worker
cannot import, timeouts, and where the lists are shown (``task show``, the
task's JSON and ``GET /v1/tasks/{id}``)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from worker_procs import (  # noqa: F401 (app_fixture, start_worker_fixture: fixtures)
    app_fixture,
    outcomes,
    start_worker_fixture,
    wait_for,
    worker_spawner,
)

from redcron import App, Context, TaskFailed
from redcron.cli.main import main
from redcron.cli.tasks import render_task, task_details
from redcron.dashboard import create_app
from redcron.dashboard.api.openapi import DOCUMENT
from redcron.errors import ValidationError
from redcron.worker import Worker

#: what a task raises, by a short name its call passes
RAISE: dict[str, Callable[[], BaseException]] = {
    "value": lambda: ValueError("bad value"),
    "key": lambda: KeyError("no such key"),
    "json": lambda: json.JSONDecodeError("not json", "", 0),  # a ValueError
}
QUICK = {"retries": 3, "retry_base": 0.01, "retry_cap": 0.02}


def _fails_once(ctx: Context, kind: str) -> int:
    """Raises ``RAISE[kind]`` on its first attempt; then returns its attempt number."""
    if ctx.attempt == 1:
        raise RAISE[kind]()
    return ctx.attempt


@pytest.fixture
def tasks(app: App) -> App:
    app.task(name="ro.plain", **QUICK)(_fails_once)
    app.task(name="ro.retry_value", retry_on=(ValueError,), **QUICK)(_fails_once)
    app.task(name="ro.permanent_key", permanent_on=KeyError, **QUICK)(_fails_once)
    app.task(name="ro.permanent_lookup", permanent_on=(LookupError,), **QUICK)(_fails_once)
    return app


def _dead_after_one(app: App, handle: Any) -> str:
    """Wait for ``handle`` to be dead-lettered after one attempt; its error."""
    with pytest.raises(TaskFailed) as exc:
        handle.result(timeout=30)
    assert exc.value.state == "dead"
    info = handle.info()
    assert outcomes(info) == ["failed"]
    entries = [e for e in app.broker.dlq.list() if e.task_id == handle.id]
    assert [e.attempts for e in entries] == [1]
    return str(info.error)


def _retried_once(handle: Any) -> None:
    assert handle.result(timeout=30) == 2
    assert outcomes(handle.info()) == ["failed", "succeeded"]


def test_retry_on_retries_what_it_lists_and_dead_letters_the_rest(
    tasks: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=4)
    listed = tasks.enqueue("ro.retry_value", "value")
    other = tasks.enqueue("ro.retry_value", "key")
    _retried_once(listed)
    error = _dead_after_one(tasks, other)
    # the last line, the one lists show, says what happened and why it was not retried
    assert error.splitlines()[-1] == (
        "KeyError: 'no such key' (not retried: retry_on lists ValueError only)"
    )


def test_permanent_on_is_the_reverse(tasks: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=4)
    listed = tasks.enqueue("ro.permanent_key", "key")
    other = tasks.enqueue("ro.permanent_key", "value")
    assert "not retried: permanent_on lists KeyError" in _dead_after_one(tasks, listed)
    _retried_once(other)
    # without either list, both retry (today's default)
    _retried_once(tasks.enqueue("ro.plain", "key"))


def test_subclasses_match(tasks: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=4)
    _retried_once(tasks.enqueue("ro.retry_value", "json"))  # JSONDecodeError is a ValueError
    error = _dead_after_one(tasks, tasks.enqueue("ro.permanent_lookup", "key"))  # a LookupError
    assert "permanent_on lists LookupError" in error


def test_a_calls_lists_replace_the_tasks(tasks: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=4)
    # the task retries ValueError only; this call retries KeyError only
    by_call = tasks.enqueue("ro.retry_value", "key", _retry_on=KeyError)
    assert by_call.info().retry_on == ("builtins.KeyError",)
    assert by_call.info().permanent_on is None
    _retried_once(by_call)
    # permanent_on alone: the call has no retry_on, so a KeyError retries
    flipped = tasks.enqueue("ro.retry_value", "value", _permanent_on=[ValueError])
    _dead_after_one(tasks, flipped)
    _retried_once(tasks.enqueue("ro.retry_value", "key", _permanent_on=[ValueError]))
    # enqueue_many takes them for every call
    many = tasks.tasks["ro.plain"].enqueue_many([("key",), ("value",)], _retry_on=["KeyError"])
    _retried_once(many[0])
    _dead_after_one(tasks, many[1])


def test_a_name_the_worker_cannot_import(
    tasks: App, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    # refused at enqueue where this process can tell: nothing is written
    with pytest.raises(ValidationError) as exc:
        tasks.enqueue("ro.plain", "key", _retry_on=("json.NoSuchError",))
    assert exc.value.field == "_retry_on" and "has no attribute" in exc.value.message

    class Local(Exception):
        pass

    with pytest.raises(ValidationError, match="define it at the top level"):
        tasks.enqueue("ro.plain", "key", _permanent_on=Local)
    # a module this process cannot import is the worker's to judge: it matches nothing
    missing = "no_such_module_for_redcron_tests.Boom"
    h = tasks.enqueue("ro.plain", "key", _retry_on=(missing, ValueError))
    also = tasks.enqueue("ro.plain", "value", _retry_on=(missing, ValueError))
    with caplog.at_level(logging.WARNING, logger="redcron.model.error_classes"):
        start_worker(concurrency=2)
        error = _dead_after_one(tasks, h)
        _retried_once(also)
    assert error.splitlines()[-1].endswith(
        f"(not retried: retry_on lists ValueError only ({missing}: not found on this worker))"
    )
    assert f"task {h.id}: exception class '{missing}'" in caplog.text


def test_a_timeout_retries_unless_permanent_on_names_timeout_error(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    @app.task(name="ro.slow", retries=1, retry_base=0.01, retry_cap=0.02,
              permanent_on=(TimeoutError,))  # fmt: skip
    def slow(seconds: float) -> None:
        time.sleep(seconds)

    start_worker(concurrency=2)
    permanent = slow.enqueue(3, _timeout=0.5)
    # a call that gives its own lists (here: none) retries its timeouts again
    retried = slow.enqueue(3, _timeout=0.5, _permanent_on=())
    wait_for(lambda: permanent.state == "dead", "the timeout to dead-letter the task", 20)
    assert outcomes(permanent.info()) == ["timed_out"]
    wait_for(lambda: retried.state == "dead", "the retried timeout to dead-letter", 20)
    assert outcomes(retried.info()) == ["timed_out", "timed_out"]


def test_task_show_and_the_api_name_the_classes(
    tasks: App, redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_call = tasks.enqueue(
        "ro.retry_value", "key", _retry_on=(KeyError, "json.JSONDecodeError"),
        _permanent_on=(),
    )  # fmt: skip
    declared = tasks.enqueue("ro.permanent_key", "key")
    # the CLI, with no app (-A): the call's lists are on the instance
    monkeypatch.setenv("REDCRON_PREFIX", key_prefix.rstrip(":"))
    monkeypatch.delenv("REDCRON_REDIS_URL", raising=False)
    out = CliRunner().invoke(main, ["task", "show", by_call.id, "--redis", redis_url])
    assert out.exit_code == 0, out.output
    assert (
        "  errors      retry on builtins.KeyError, json.JSONDecodeError; permanent on "
        "(nothing); any other exception permanent (this call's)"
    ) in out.output
    out = CliRunner().invoke(main, ["task", "show", by_call.id, "--json", "--redis", redis_url])
    shown = json.loads(out.output)
    assert shown["retry_on"] == ["builtins.KeyError", "json.JSONDecodeError"]
    assert shown["permanent_on"] == []
    # the task's own lists are shown where its registration is at hand (-A)
    text = render_task(task_details(tasks, declared.id, 0))
    assert "  errors      permanent on builtins.KeyError; any other exception retried " in text
    assert "(the task's)" in text
    # the REST API answers the record, and its document describes the fields
    client = create_app(tasks, admin_token="t").test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer t"
    got = client.get(f"/v1/tasks/{by_call.id}").get_json()
    assert got["retry_on"] == ["builtins.KeyError", "json.JSONDecodeError"]
    assert got["permanent_on"] == []
    assert client.get(f"/v1/tasks/{declared.id}").get_json()["retry_on"] is None
    props = DOCUMENT["components"]["schemas"]["Task"]["properties"]
    for field in ("retry_on", "permanent_on"):
        assert props[field] == {"type": ["array", "null"], "items": {"type": "string"}}


def test_a_calls_lists_reach_a_process_pool_child(
    app: App, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    # chaos_app's flaky raises ValueError until its attempt fail_until
    with worker_spawner(redis_url, key_prefix, tmp_path, lease_ttl=2.0, grace=1.0) as spawn:
        spawn(concurrency=1, pool="processes", app_path="chaos_app:app")
        dead = app.enqueue("flaky", 2, _retry_on=[KeyError])
        retried = app.enqueue("flaky", 2, _permanent_on=[KeyError])
        assert retried.result(timeout=30) == 2
        error = _dead_after_one(app, dead)
    assert error.splitlines()[-1] == (
        "ValueError: flaky: attempt 1 fails (not retried: retry_on lists KeyError only)"
    )
