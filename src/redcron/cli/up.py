"""``redcron up``: a whole local deployment in one command.

Starts an embedded ``redis-server`` (unless ``--redis``/``REDCRON_REDIS_URL``
names one) and records its URL in ``.redcron/redis.url`` for the admin
commands run in the same directory, then each child process in :func:`child_specs` (today a worker;
later a beat and the dashboard), and supervises them: Ctrl-C or SIGTERM stops
everything gracefully; a child that dies on its own takes everything down with
a non-zero exit.
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import click

from redcron.cli.common import (
    LOG_LEVELS,
    app_option,
    build_app,
    concurrency_option,
    fail,
    grace_option,
    log_format_option,
    redis_option,
    setup_logging,
    table,
)
from redcron.config import remove_local_url, write_local_url
from redcron.embedded import EmbeddedRedis
from redcron.loader import load_app
from redcron.model.jobfile import load_jobs
from redcron.redact import masked_url

log = logging.getLogger(__name__)

EXAMPLES_APP = "examples.tasks:app"
UP_QUEUES = "default,commands"
#: extra seconds a child gets past its own --grace before SIGKILL
KILL_MARGIN = 5.0


@dataclass
class ChildSpec:
    """One supervised child process."""

    name: str
    argv: list[str]
    where: str
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)


def child_specs(
    app_path: str | None,
    redis_url: str,
    concurrency: int,
    grace: float,
    loglevel: str,
    log_format: str = "text",
) -> list[ChildSpec]:
    """The processes ``up`` runs, in start order (stopped in reverse)."""
    cli = [sys.executable, "-m", "redcron.cli.main"]
    app_args = ["-A", app_path] if app_path else []
    log_args = ["--loglevel", loglevel, "--log-format", log_format]
    return [
        ChildSpec(
            name="beat",
            argv=[*cli, "beat", *app_args, "--redis", redis_url, *log_args],
            where="fires cron jobs; applies the app's declared jobs",
        ),
        ChildSpec(
            name="worker",
            argv=[
                *cli,
                "worker",
                *app_args,
                "--redis",
                redis_url,
                "--allow-commands",
                "-Q",
                UP_QUEUES,
                "-c",
                str(concurrency),
                "--grace",
                str(grace),
                *log_args,
            ],
            where=f"queues {UP_QUEUES}, concurrency {concurrency}, app {app_path or '(none)'}",
        ),
    ]


@click.command()
@app_option
@redis_option
@click.option(
    "--data-dir",
    default="./.redcron",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Embedded Redis data (AOF) and log.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=6399,
    show_default=True,
    help="Embedded Redis port.",
)
@click.option(
    "--fsync",
    type=click.Choice(["everysec", "always"]),
    default="everysec",
    show_default=True,
    help="Embedded Redis appendfsync policy.",
)
@concurrency_option(4, "Worker concurrency.")
@grace_option("How long children may take to stop gracefully.")
@click.option(
    "-f",
    "--jobs-file",
    "job_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Job files (YAML/JSON) to apply at start [default: examples/jobs.yaml with the "
    "example app].",
)
@click.option(
    "--enqueue-examples/--no-enqueue-examples",
    default=None,
    help=f"Enqueue example tasks at start [default: on for {EXAMPLES_APP}].",
)
@click.option(
    "--loglevel",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
)
@log_format_option
def up(
    app_path: str | None,
    redis_url: str | None,
    data_dir: Path,
    port: int,
    fsync: str,
    concurrency: int,
    grace: float,
    job_files: tuple[Path, ...],
    enqueue_examples: bool | None,
    loglevel: str,
    log_format: str,
) -> None:
    """Run Redis (embedded unless --redis), a beat and a worker, until Ctrl-C."""
    setup_logging(loglevel, log_format)
    if app_path is None and (Path.cwd() / "examples" / "tasks.py").is_file():
        app_path = EXAMPLES_APP
    if enqueue_examples is None:
        enqueue_examples = app_path == EXAMPLES_APP
    example_jobs = Path.cwd() / "examples" / "jobs.yaml"
    if not job_files and app_path == EXAMPLES_APP and example_jobs.is_file():
        job_files = (example_jobs,)
    specs = []
    for path in job_files:  # validated before anything starts
        specs += load_jobs(path)
    if app_path is not None:
        load_app(app_path)  # fail here, in one line, rather than in a child later
    stopper = Stopper()
    server: EmbeddedRedis | None = None
    recorded_pid: int | None = None
    children: list[ChildSpec] = []
    code = 1
    try:
        stopper.install()
        if redis_url is None:
            if _port_in_use(port):
                fail(f"port {port} is in use (another `redcron up`?); pass --port or --redis")
            server = EmbeddedRedis(data_dir, port=port, fsync=fsync)
            server.start()
            redis_url = server.url
            # admin commands run here find this server without --redis (config.py)
            assert server.pid is not None
            recorded_pid = server.pid
            write_local_url(redis_url, recorded_pid)
        if specs:
            _apply_jobs(app_path, redis_url, specs)
        children = child_specs(app_path, redis_url, concurrency, grace, loglevel, log_format)
        for child in children:
            child.proc = subprocess.Popen(child.argv, start_new_session=True)
        click.echo(_summary(server, redis_url, children))
        if enqueue_examples and app_path:
            _enqueue_examples(app_path, redis_url)
        click.echo("Ctrl-C to stop.")
        code = _supervise(children, server, stopper)
    finally:
        _terminate(children, grace + KILL_MARGIN, stopper)
        if server is not None:
            server.stop()
        if recorded_pid is not None:
            remove_local_url(recorded_pid)
        stopper.uninstall()
    if code:
        raise click.exceptions.Exit(code)
    click.echo("stopped.")


class Stopper:
    """Counts SIGINT/SIGTERM: the first asks for a graceful stop, the second forces it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.count += 1
        self.event.set()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def _supervise(children: list[ChildSpec], server: EmbeddedRedis | None, stopper: Stopper) -> int:
    """Wait for a stop signal (0) or an unexpected death (1)."""
    while not stopper.event.wait(0.2):
        for child in children:
            assert child.proc is not None
            rc = child.proc.poll()
            if rc is not None:
                click.echo(
                    f"{child.name} (pid {child.proc.pid}) exited unexpectedly "
                    f"with code {rc}; shutting down",
                    err=True,
                )
                return 1
        if server is not None and not server.running():
            click.echo(
                f"redis-server exited unexpectedly (log: {server.log_path}); shutting down",
                err=True,
            )
            return 1
    click.echo("stopping (Ctrl-C again to kill)...")
    return 0


def _terminate(children: list[ChildSpec], timeout: float, stopper: Stopper) -> None:
    """SIGTERM every child (last started first), SIGKILL what outlives ``timeout``."""
    alive = [c for c in reversed(children) if c.proc is not None and c.proc.poll() is None]
    for child in alive:
        assert child.proc is not None
        child.proc.send_signal(signal.SIGTERM)
    stopper.count = min(stopper.count, 1)
    deadline = time.monotonic() + timeout
    while any(c.proc is not None and c.proc.poll() is None for c in alive):
        if time.monotonic() > deadline or stopper.count > 1:
            for child in alive:
                if child.proc is not None and child.proc.poll() is None:
                    log.warning("%s pid=%d did not stop; killing", child.name, child.proc.pid)
                    child.proc.kill()
                    child.proc.wait()
            break
        time.sleep(0.1)


def _summary(server: EmbeddedRedis | None, redis_url: str, children: list[ChildSpec]) -> str:
    redis_url = masked_url(redis_url)
    if server is not None:
        redis_row = [
            "redis",
            server.pid,
            redis_url,
            f"data {server.data_dir}, appendfsync {server.fsync}",
        ]
    else:
        redis_row = ["redis", "-", redis_url, "external"]
    rows = [redis_row] + [
        [c.name, c.proc.pid if c.proc else "-", redis_url, c.where] for c in children
    ]
    return "redcron is up\n" + table(("component", "pid", "redis", "details"), rows)


def _apply_jobs(app_path: str | None, redis_url: str, specs: list[Any]) -> None:
    app = build_app(app_path, redis_url)
    try:
        for spec, res in zip(specs, app.jobs.put_many(specs), strict=True):
            click.echo(f"job {spec.tenant}/{spec.name}: {res.change}")
    finally:
        app.close()


def _enqueue_examples(app_path: str, redis_url: str) -> None:
    app = build_app(app_path, redis_url)
    module = sys.modules.get(app_path.partition(":")[0])
    hook = getattr(module, "enqueue_examples", None)
    if not callable(hook):
        click.echo(f"({app_path} has no enqueue_examples(app); nothing enqueued)")
        return
    handles = hook(app) or []
    ids = [getattr(h, "id", str(h)) for h in handles]
    click.echo(
        f"enqueued {len(ids)} example tasks; look at one with:\n"
        f"  redcron task show {ids[0]} --redis {masked_url(redis_url)}"
        if ids
        else "enqueued the example tasks"
    )


def _port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
