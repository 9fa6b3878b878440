"""``redcron up``: a whole local deployment in one command.

Starts an embedded ``redis-server`` (unless ``--redis``/``REDCRON_REDIS_URL``
names one) and records its URL in ``.redcron/redis.url`` for the admin
commands run in the same directory, then each child process in
:func:`child_specs` (a beat, a worker and, unless ``--no-dashboard``, the
dashboard on 127.0.0.1), and supervises them: Ctrl-C or SIGTERM stops
everything gracefully; a child that dies on its own takes everything down with
a non-zero exit.

The dashboard gets a fresh admin token through its environment only
(``REDCRON_ADMIN_TOKEN``: arguments show in ``ps``); ``up`` writes it to
``.redcron/admin.token`` (mode 0600, removed at stop) for API clients, and
prints a one-time link that opens the dashboard logged in as admin
(:class:`~redcron.broker.logins.LoginLinks`), as Jupyter prints its token URL.
"""

from __future__ import annotations

import logging
import os
import secrets
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

from redcron.broker import LINK_TTL_S, LoginLinks
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
from redcron.config import remove_local_url, write_local_url, write_private_file
from redcron.embedded import EmbeddedRedis
from redcron.lifeline import terminate_with_parent
from redcron.loader import load_app
from redcron.model.jobfile import load_jobs
from redcron.redact import masked_url

log = logging.getLogger(__name__)

EXAMPLES_APP = "examples.tasks:app"
#: tenants whose command tasks the examples run (examples/jobs.yaml's
#: nightly-report, enqueue_examples): up grants them, for the examples only
EXAMPLE_COMMAND_TENANTS = ("default",)
UP_QUEUES = "default,commands"
#: extra seconds a child gets past its own --grace before SIGKILL
KILL_MARGIN = 5.0
#: the dashboard ``up`` starts listens here only: it is a local deployment
DASHBOARD_HOST = "127.0.0.1"
#: seconds the dashboard may take to listen (importing the app included)
DASHBOARD_START_TIMEOUT = 30.0
#: the admin token of the dashboard ``up`` started, for API clients run here
ADMIN_TOKEN_FILE = Path(".redcron") / "admin.token"


@dataclass
class ChildSpec:
    """One supervised child process."""

    name: str
    argv: list[str]
    where: str
    #: set in the child's environment on top of ours (secrets go here, never in argv)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    #: the port it listens on (``up`` waits for it before saying it is up)
    port: int | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        env = {**os.environ, **self.env} if self.env else None
        # its only stdout line says where it listens, which the summary says too
        stdout = subprocess.DEVNULL if self.port is not None else None
        # a session of its own: the terminal's Ctrl-C reaches only up, which stops
        # the children in order; and if up itself is killed, they get SIGTERM
        self.proc = subprocess.Popen(
            self.argv, env=env, stdout=stdout, start_new_session=True,
            preexec_fn=terminate_with_parent,
        )  # fmt: skip


def child_specs(
    app_path: str | None,
    redis_url: str,
    concurrency: int,
    grace: float,
    loglevel: str,
    log_format: str = "text",
    dashboard_port: int | None = None,
    admin_token: str | None = None,
) -> list[ChildSpec]:
    """The processes ``up`` runs, in start order (stopped in reverse); the
    dashboard only with a ``dashboard_port``."""
    cli = [sys.executable, "-m", "redcron.cli.main"]
    app_args = ["-A", app_path] if app_path else []
    log_args = ["--loglevel", loglevel, "--log-format", log_format]
    # the URL through the environment, as the token: a password in argv shows in ps
    redis_env = {"REDCRON_REDIS_URL": redis_url}
    children = [
        ChildSpec(
            name="beat",
            argv=[*cli, "beat", *app_args, *log_args],
            where="fires cron jobs; applies the app's declared jobs",
            env=redis_env,
        ),
        ChildSpec(
            name="worker",
            argv=[
                *cli,
                "worker",
                *app_args,
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
            env=redis_env,
        ),
    ]
    if dashboard_port is not None:
        children.append(
            ChildSpec(
                name="dashboard",
                argv=[
                    *cli,
                    "dashboard",
                    *app_args,
                    "--host",
                    DASHBOARD_HOST,
                    "--port",
                    str(dashboard_port),
                ],
                where=f"{dashboard_url(dashboard_port)} (pages, API /v1, /metrics)",
                env={**redis_env, **({"REDCRON_ADMIN_TOKEN": admin_token} if admin_token else {})},
                port=dashboard_port,
            )
        )
    return children


def dashboard_url(port: int) -> str:
    return f"http://{DASHBOARD_HOST}:{port}/"


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
    "--dashboard-port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    help=f"Port of the dashboard (pages and API), on {DASHBOARD_HOST}.",
)
@click.option(
    "--dashboard/--no-dashboard",
    "with_dashboard",
    default=True,
    help="Run the dashboard [default: on].",
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
    dashboard_port: int,
    with_dashboard: bool,
    fsync: str,
    concurrency: int,
    grace: float,
    job_files: tuple[Path, ...],
    enqueue_examples: bool | None,
    loglevel: str,
    log_format: str,
) -> None:
    """Run Redis (embedded unless --redis), a beat, a worker and the dashboard, until Ctrl-C.

    Prints where each runs, a one-time link that opens the dashboard logged in
    as admin, and where the admin token for the API is (.redcron/admin.token).
    """
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
    admin_token = secrets.token_urlsafe(32) if with_dashboard else None
    token_written = False
    children: list[ChildSpec] = []
    code = 1
    try:
        stopper.install()
        if with_dashboard and _port_in_use(dashboard_port, DASHBOARD_HOST):
            fail(
                f"port {dashboard_port} is in use (another `redcron up`?); "
                "pass --dashboard-port or --no-dashboard"
            )
        if redis_url is None:
            if _port_in_use(port):
                fail(f"port {port} is in use (another `redcron up`?); pass --port or --redis")
            server = EmbeddedRedis(data_dir, port=port, fsync=fsync, die_with_parent=True)
            server.start()
            redis_url = server.url
            # admin commands run here find this server without --redis (config.py)
            assert server.pid is not None
            recorded_pid = server.pid
            write_local_url(redis_url, recorded_pid)
        if app_path == EXAMPLES_APP:
            _grant_commands(app_path, redis_url, EXAMPLE_COMMAND_TENANTS)
        if specs:
            _apply_jobs(app_path, redis_url, specs)
        children = child_specs(
            app_path,
            redis_url,
            concurrency,
            grace,
            loglevel,
            log_format,
            dashboard_port=dashboard_port if with_dashboard else None,
            admin_token=admin_token,
        )
        if admin_token is not None:
            write_admin_token(admin_token)
            token_written = True
        for child in children:
            child.start()
        for child in children:
            _wait_listening(child, stopper)
        if not stopper.event.is_set():  # else Ctrl-C while starting: just stop
            click.echo(_summary(server, redis_url, children))
            if with_dashboard:
                click.echo(_dashboard_access(app_path, redis_url, dashboard_port))
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
        if token_written and admin_token is not None:
            remove_admin_token(admin_token)
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


def _wait_listening(child: ChildSpec, stopper: Stopper) -> None:
    """Return once ``child`` accepts connections on its port (if it has one)."""
    if child.port is None:
        return
    assert child.proc is not None
    deadline = time.monotonic() + DASHBOARD_START_TIMEOUT
    while not _port_in_use(child.port, DASHBOARD_HOST):
        rc = child.proc.poll()
        if rc is not None:
            fail(f"{child.name} (pid {child.proc.pid}) exited with code {rc} before listening")
        if stopper.event.is_set():
            return  # Ctrl-C while starting: stop quietly
        if time.monotonic() > deadline:
            fail(
                f"{child.name} (pid {child.proc.pid}) is not listening on port {child.port} "
                f"after {DASHBOARD_START_TIMEOUT:.0f}s"
            )
        time.sleep(0.05)


def _dashboard_access(app_path: str | None, redis_url: str, port: int) -> str:
    """How to get in: a one-time login link, and the admin token for the API."""
    app = build_app(app_path, redis_url)
    try:
        code = LoginLinks(app.broker).create()
    finally:
        app.close()
    url = dashboard_url(port)
    return (
        f"dashboard  {url}\n"
        f"log in     {url}login/once/{code}\n"
        f"           (opens the dashboard logged in as admin; valid {LINK_TTL_S // 60} "
        "minutes, once)\n"
        f"API        the admin token is in {ADMIN_TOKEN_FILE} (mode 0600):\n"
        f'           curl -H "Authorization: Bearer $(cat {ADMIN_TOKEN_FILE})" {url}v1/jobs'
    )


def write_admin_token(token: str, directory: Path | None = None) -> Path:
    """Write ``token`` to ``.redcron/admin.token``, readable by its owner only."""
    return write_private_file(ADMIN_TOKEN_FILE, f"{token}\n", directory)


def remove_admin_token(token: str, directory: Path | None = None) -> None:
    """Remove the file :func:`write_admin_token` wrote, unless another ``up`` has
    written its own since."""
    path = (Path.cwd() if directory is None else directory) / ADMIN_TOKEN_FILE
    try:
        if path.read_text(encoding="utf-8").strip() == token:
            path.unlink()
    except OSError:
        pass


def _grant_commands(app_path: str | None, redis_url: str, tenants: tuple[str, ...]) -> None:
    """Grant command tasks to the examples' tenants: any other tenant needs an
    admin's ``redcron tenants set T --allow-commands`` (docs/operations.md)."""
    app = build_app(app_path, redis_url)
    try:
        for tenant in tenants:
            app.tenants.set(tenant, allow_commands=True)
            click.echo(
                f"tenant {tenant}: command tasks granted (the examples run one); "
                f"revoke with `redcron tenants set {tenant} --no-allow-commands`"
            )
    finally:
        app.close()


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
