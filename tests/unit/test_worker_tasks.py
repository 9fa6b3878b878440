"""What a worker says it runs (issue 29 §3): the task names it publishes and
leases, and the error left for an attempt whose task its process cannot find."""

from __future__ import annotations

import pytest

from redcron import App
from redcron.config import Settings
from redcron.engine import Lease
from redcron.engine.argv import task_set
from redcron.errors import ValidationError
from redcron.worker.capture import LineBuffer
from redcron.worker.crew import registered_tasks
from redcron.worker.execute import Attempt, run_python
from redcron.worker.options import WorkerOptions


def app_with(*names: str) -> App:
    app = App(settings=Settings())
    for name in names:
        app.task(name=name)(lambda: None)
    return app


def test_a_worker_runs_its_apps_tasks_and_commands_only_when_allowed() -> None:
    app = app_with("shop.resize", "shop.echo")
    assert registered_tasks(app, WorkerOptions()) == {"shop.resize", "shop.echo"}
    commands = registered_tasks(app, WorkerOptions(allow_commands=True))
    assert commands == {"shop.resize", "shop.echo", "redcron.command", "redcron.container"}


def test_the_lease_argument_delimits_every_name() -> None:
    assert task_set(None) == ""  # any task (an HTTP worker's lease)
    assert task_set([]) == "\n"  # none
    assert task_set(["b", "a", "a"]) == "\na\nb\n"


def test_a_leased_task_the_process_cannot_find_is_still_an_error() -> None:
    # leased as registered (the worker's app has it) but missing where it runs
    # (a processes pool's child importing another app): a failed attempt, retried
    app = app_with("shop.echo")
    lease = Lease("0-x", "1", 1, "shop.resize", "python", b"\x92\x90\x80", 0, 0)
    out = run_python(app, Attempt(lease, LineBuffer(10)))
    assert not out.ok and out.retryable
    assert "unknown task 'shop.resize'" in out.error and "shop.echo" in out.error


def test_a_task_name_holds_no_newline() -> None:
    app = App(settings=Settings())
    with pytest.raises(ValidationError, match=r"name: a task name .* holds no newline"):
        app.task(name="a\nb")(lambda: None)
