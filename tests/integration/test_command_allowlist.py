"""Command and container tasks: checked at the edge (no NUL, env of strings, no
image read as a runtime option), run only with ``--allow-commands``, and
narrowed by ``--allow-program`` / ``--allow-image``: a task outside the list
fails permanently, naming the option that would allow it.  Arguments a worker
cannot run (written by hand into Redis) fail the task, never the pool thread."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from grants import grant_commands
from worker_procs import thread_workers, wait_for

from redcron import App, serde
from redcron.cli.main import main
from redcron.engine import Lease
from redcron.errors import ConfigError, ValidationError
from redcron.model.jobs import JobSpec, Task
from redcron.worker import Worker
from redcron.worker.capture import LineBuffer
from redcron.worker.execute import Attempt, CommandPolicy, run_command

ECHO = shutil.which("echo") or "/bin/echo"
TERMINAL = ("succeeded", "dead", "failed", "cancelled")


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    """A stand-in container runtime: prints the arguments it was given."""
    script = tmp_path / "fake-docker"
    script.write_text('#!/bin/sh\necho "runtime: $*"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.fixture
def app(redis_url: str, key_prefix: str, runtime: Path) -> Iterator[App]:
    a = App(
        redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5, container_runtime=str(runtime)
    )
    grant_commands(a)  # these tests are about the workers' side (test_command_grant.py: the grant)
    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "allowlist-worker") as start:
        yield start


def ended(app: App, task_id: str) -> Any:
    return wait_for(
        lambda: (i := app.get(task_id).info()).state in TERMINAL and i,
        f"task {task_id} to end",
        timeout=20,
    )


# -- the edge -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "field"),
    [
        (Task(command=["echo", "a\x00b"]), "tasks.t.command"),
        (Task(command=[""]), "tasks.t.command"),
        (Task(command=["echo"], env={"A": 1}), "tasks.t.env.A"),  # type: ignore[dict-item]
        (Task(command=["echo"], env={"A=B": "x"}), "tasks.t.env"),
        (Task(command=["echo"], env=["A"]), "tasks.t.env"),  # type: ignore[arg-type]
        (Task(command=["echo"], cwd=5), "tasks.t.cwd"),  # type: ignore[arg-type]
        (Task(image="--privileged"), "tasks.t.image"),
        (Task(image="alpine --privileged"), "tasks.t.image"),
    ],
)
def test_job_tasks_that_cannot_be_run_are_refused_by_field(task: Task, field: str) -> None:
    # these passed validation, then raised in the worker's pool thread (ValueError
    # "embedded null byte", TypeError for an int in env): the attempt was never reported
    spec = JobSpec(name="j", tasks={"t": task}, cron="* * * * *")
    with pytest.raises(ValidationError) as info:
        spec.validate()
    assert info.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"argv": ["echo", "\x00"]}, "argv"),
        ({"argv": ["echo"], "env": {"A": 1}}, "env.A"),
        ({"argv": ["echo"], "cwd": b"/tmp"}, "cwd"),
    ],
)
def test_enqueue_command_refuses_what_cannot_run(
    app: App, kwargs: dict[str, Any], field: str
) -> None:
    argv = kwargs.pop("argv")
    with pytest.raises(ValidationError) as info:
        app.enqueue_command(argv, **kwargs)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("command", {"argv": ["echo", "a\x00b"]}),
        ("command", {"argv": ["echo"], "env": {"A": 1}}),
        ("command", {"argv": ["echo"], "cwd": 7}),
        ("command", {"argv": []}),
        ("command", ["echo"]),
        ("command", None),
        ("container", {"image": "--privileged"}),
        ("container", {"image": None}),
    ],
)
def test_run_command_never_raises(kind: str, payload: Any) -> None:
    lease = Lease("0-x", "1", 1, "redcron.command", kind, serde.dumps(payload), 0, 0)
    out = run_command(Attempt(lease, LineBuffer(10)), None)
    assert not out.ok and not out.retryable
    assert out.error.startswith(f"malformed {kind} task"), out.error


def test_run_command_reports_undecodable_args() -> None:
    lease = Lease("0-x", "1", 1, "redcron.command", "command", b"\xc1\xff", 0, 0)
    out = run_command(Attempt(lease, LineBuffer(10)), None)
    assert not out.ok and not out.retryable and "malformed command task" in out.error


# -- the allowlist ------------------------------------------------------------------------


def test_policy_needs_allow_commands() -> None:
    with pytest.raises(ConfigError, match="--allow-commands"):
        CommandPolicy.build(False, [ECHO])
    with pytest.raises(ConfigError):
        CommandPolicy.build(True, images=["--privileged"])


@pytest.mark.parametrize(
    ("image", "allowed"),
    [
        ("registry/x:tag", True),
        ("registry/x", True),
        ("registry/x:other", True),
        ("registry/x@sha256:abc", True),
        ("registry/x-evil:tag", False),
        ("registry/y:tag", False),
        ("registry/x:tag/../y", False),
    ],
)
def test_image_matching(image: str, allowed: bool) -> None:
    policy = CommandPolicy.build(True, images=["registry/x", "other:1"])
    refusal, _ = policy.check("container", {"image": image})
    assert (refusal is None) is allowed, refusal
    assert CommandPolicy.build(True, images=["registry"]).check(
        "container", {"image": "registry:5000/other"}
    )[0]


def test_allowed_program_runs_and_another_fails_permanently(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(queues=["commands"], allow_commands=True, allow_programs=[ECHO])
    ok = app.enqueue_command(["echo", "allowed"], retries=3)
    refused = app.enqueue_command([sys.executable, "-c", "print(1)"], retries=3)
    assert ended(app, ok.id).state == "succeeded"
    info = ended(app, refused.id)
    assert info.state == "dead"
    assert len(info.attempts) == 1  # permanent: no retry
    assert f"--allow-program {sys.executable}" in (info.error or "")


def test_allowlist_runs_the_resolved_program_whatever_the_task_path(
    app: App, start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    """A task setting PATH to a directory with its own 'echo' still runs the
    worker's echo: the program is resolved with the worker's PATH."""
    fake = tmp_path / "bin" / "echo"
    fake.parent.mkdir()
    marker = tmp_path / "pwned"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    start_worker(queues=["commands"], allow_commands=True, allow_programs=["echo"])
    handle = app.enqueue_command(["echo", "hi"], env={"PATH": str(fake.parent)})
    assert ended(app, handle.id).state == "succeeded"
    assert not marker.exists()
    # and a path naming the fake directly is not the allowed echo
    other = app.enqueue_command([str(fake)], retries=0)
    assert "--allow-program" in (ended(app, other.id).error or "")
    assert not marker.exists()


def test_allowed_image_runs_and_another_fails_permanently(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(queues=["commands"], allow_commands=True, allow_images=["registry.example/app"])
    app.jobs.put(
        "images",
        tasks={
            "ok": Task(image="registry.example/app:1.2", command=["run"], retries=2),
            "no": Task(image="registry.example/other:1", retries=2),
        },
    )
    run_id = app.jobs.trigger("images")
    ok, no = (f"{run_id}/ok", f"{run_id}/no")
    assert ended(app, ok).state == "succeeded"
    assert "runtime: run --rm registry.example/app:1.2 run" in app.broker.inspection.log_lines(
        ok, 1
    )
    info = ended(app, no)
    assert info.state == "dead" and len(info.attempts) == 1
    assert "--allow-image registry.example/other:1" in (info.error or "")


def test_without_allow_commands_no_command_runs(
    app: App,
    start_worker: Callable[..., Worker],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(ConfigError, match="--allow-commands"):
        Worker(app, queues=["commands"])
    # a worker of another queue does not lease a command task (it does not
    # register redcron.command): the task stays ready, no attempt spent, for a
    # worker started with --allow-commands (issue 29 §3)
    caplog.set_level(logging.WARNING, logger="redcron.worker.worker")
    start_worker(queues=["shell"])
    handle = app.enqueue_command(["touch", str(marker)], queue="shell", retries=0)
    said = "'redcron.command' is not registered"
    wait_for(
        lambda: any(said in r.getMessage() for r in caplog.records),
        "the worker to leave the command task",
    )
    info = handle.info()
    assert info.state == "ready" and info.attempts == () and info.attempt == 0
    assert not marker.exists()


def test_cli_worker_options(redis_url: str) -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["worker", "--help"])
    for option in ("--allow-commands", "--allow-program", "--allow-image"):
        assert option in out.output
    bad = runner.invoke(main, ["worker", "--allow-program", ECHO, "--redis", redis_url])
    assert bad.exit_code == 2
    assert "--allow-program narrows --allow-commands" in bad.output
    assert os.path.isabs(ECHO)
