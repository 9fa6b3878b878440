"""``redcron up``: a whole local deployment in one command.

First takes its data directory (``--data-dir``, ``./.redcron``): one ``up``
per directory, a second is refused before anything starts (cli/up_lock.py).
Then starts an embedded ``redis-server`` (unless ``--redis``/``REDCRON_REDIS_URL``
names one) and records its URL in ``<data dir>/redis.url`` (the admin commands
run in the same directory read ``./.redcron/redis.url``), then each child process
in :func:`child_specs` (a beat, a worker, a notifier and, unless
``--no-dashboard``, the dashboard on 127.0.0.1), and supervises them: Ctrl-C, SIGTERM or SIGHUP (the
terminal closed) stops them gracefully, then Redis; a child that dies on its
own takes everything down with a non-zero exit.

The dashboard gets a fresh admin token through its environment only
(``REDCRON_ADMIN_TOKEN``: arguments show in ``ps``); ``up`` writes it to
``<data dir>/admin.token`` (mode 0600, removed at stop) for API clients, and
prints a one-time link that opens the dashboard logged in as admin
(:class:`~redcron.store.logins.LoginLinks`), as Jupyter prints its token URL.

This module is the command and the children it runs; starting, watching and
stopping them is cli/supervise.py, the steps against Redis (grants, job files,
the examples) and admin access are cli/up_setup.py.
"""

from __future__ import annotations

import secrets
import shlex
import sys
from pathlib import Path

import click

from redcron.cli.common import (
    EXIT_USAGE,
    app_option,
    concurrency_option,
    fail,
    grace_option,
    logging_options,
    redis_option,
    setup_logging,
    table,
)
from redcron.cli.supervise import (
    ChildSpec,
    Stopper,
    port_in_use,
    say,
    supervise,
    terminate,
    wait_listening,
)
from redcron.cli.up_lock import DataDirBusy, DataDirLock, busy_message
from redcron.cli.up_setup import (
    apply_jobs,
    dashboard_access,
    enqueue_example_tasks,
    grant_commands,
    remove_admin_token,
    write_admin_token,
)
from redcron.config import DATA_DIR, remove_local_url, write_local_url
from redcron.embedded import EmbeddedRedis
from redcron.loader import load_app
from redcron.model.jobfile import load_jobs
from redcron.model.jobs import JobSpec
from redcron.redact import masked_url

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


def next_free_port(port: int, tries: int = 20) -> int:
    """The first port after ``port`` nothing listens on (of the next ``tries``;
    else ``port + 1``): a second deployment's suggested port is not the first's."""
    for candidate in range(port + 1, min(port + 1 + tries, 65536)):
        if not port_in_use(candidate):
            return candidate
    return port + 1


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
    # the notifier sends to the channels; with nothing configured it only polls
    # (docs/operations.md, Notifications)
    notify_args = ["--dashboard-url", dashboard_url(dashboard_port)] if dashboard_port else []
    children.append(
        ChildSpec(
            name="notifier",
            argv=[*cli, "notifier", *app_args, *log_args, *notify_args],
            where="sends notifications to the channels (redcron channels add)",
            env=redis_env,
        )
    )
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


def flag_hint(flag: str, value: int) -> str:
    """How to pass ``flag``, to ``redcron up`` and through ``make run``."""
    return args_hint(f"{flag} {value}")


def args_hint(args: str) -> str:
    """How to pass ``args``, to ``redcron up`` and through ``make run``."""
    return f'{args} (make run: make run ARGS="{args}")'


def lock_data_dir(
    data_dir: Path, embedded_port: int | None, dashboard_port: int | None
) -> DataDirLock:
    """Take ``data_dir`` for this ``up``, or fail (exit 2) naming who has it and
    the flags of a second deployment: another directory, and the next ports of
    what it would start (the embedded Redis, the dashboard)."""
    lock = DataDirLock(data_dir)
    try:
        lock.acquire()
    except DataDirBusy as busy:
        other = (
            data_dir.with_name(f"{data_dir.name}-2")
            if data_dir.name
            else Path(f"{data_dir.resolve()}-2")
        )
        flags = [f"--data-dir {shlex.quote(str(other))}"]
        if embedded_port is not None:
            flags.append(f"--port {next_free_port(embedded_port)}")
        if dashboard_port is not None:
            flags.append(f"--dashboard-port {next_free_port(dashboard_port)}")
        fail(busy_message(busy, args_hint(" ".join(flags))), EXIT_USAGE)
    return lock


def dashboard_url(port: int) -> str:
    return f"http://{DASHBOARD_HOST}:{port}/"


@click.command()
@app_option
@redis_option
@click.option(
    "--data-dir",
    default=f"./{DATA_DIR}",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="This deployment's directory: the embedded Redis's data (AOF) and log, "
    "redis.url, admin.token. One `redcron up` per directory: for a second, another "
    "directory (and other ports).",
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
@logging_options
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
    """Run Redis (embedded unless --redis), beat, worker, notifier and dashboard, until Ctrl-C.

    Prints where each runs, a one-time link that opens the dashboard logged in
    as admin, and where the admin token for the API is (<data dir>/admin.token).
    """
    setup_logging(loglevel, log_format)
    # first of all, so a second up on this directory is refused before it checks
    # a port or starts anything (and never touches the first one's files)
    lock = lock_data_dir(
        data_dir,
        port if redis_url is None else None,
        dashboard_port if with_dashboard else None,
    )
    if app_path is None and (Path.cwd() / "examples" / "tasks.py").is_file():
        app_path = EXAMPLES_APP
    if enqueue_examples is None:
        enqueue_examples = app_path == EXAMPLES_APP
    example_jobs = Path.cwd() / "examples" / "jobs.yaml"
    if not job_files and app_path == EXAMPLES_APP and example_jobs.is_file():
        job_files = (example_jobs,)
    stopper = Stopper()
    server: EmbeddedRedis | None = None
    recorded_pid: int | None = None
    admin_token = secrets.token_urlsafe(32) if with_dashboard else None
    token_written = False
    children: list[ChildSpec] = []
    code = 1
    try:
        specs: list[JobSpec] = []
        for path in job_files:  # validated before anything starts
            specs += load_jobs(path)
        if app_path is not None:
            load_app(app_path)  # fail here, in one line, rather than in a child later
        stopper.install()
        if with_dashboard and port_in_use(dashboard_port, DASHBOARD_HOST):
            fail(
                f"port {dashboard_port} is in use (another `redcron up`?); pass "
                f"{flag_hint('--dashboard-port', next_free_port(dashboard_port))} or --no-dashboard"
            )
        if redis_url is None:
            if port_in_use(port):
                fail(
                    f"port {port} is in use (another `redcron up`?); pass "
                    f"{flag_hint('--port', next_free_port(port))} or --redis"
                )
            assert lock.fd is not None
            server = EmbeddedRedis(
                data_dir, port=port, fsync=fsync, die_with_parent=True, pass_fds=(lock.fd,)
            )
            server.start()
            redis_url = server.url
            assert server.pid is not None
            lock.record_server(server.pid)
            # admin commands run here find this server without --redis (config.py)
            recorded_pid = server.pid
            write_local_url(redis_url, recorded_pid, data_dir)
        if app_path == EXAMPLES_APP:
            grant_commands(app_path, redis_url, EXAMPLE_COMMAND_TENANTS)
        if specs:
            apply_jobs(app_path, redis_url, specs)
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
            write_admin_token(admin_token, data_dir)
            token_written = True
        for child in children:
            child.start()
        for child in children:
            wait_listening(child, stopper, DASHBOARD_HOST, DASHBOARD_START_TIMEOUT)
        if not stopper.event.is_set():  # else Ctrl-C while starting: just stop
            click.echo(_summary(server, redis_url, children))
            if with_dashboard:
                click.echo(
                    dashboard_access(app_path, redis_url, dashboard_url(dashboard_port), data_dir)
                )
            if enqueue_examples and app_path:
                enqueue_example_tasks(app_path, redis_url)
            click.echo("Ctrl-C to stop.")
        code = supervise(children, server, stopper)
    finally:
        terminate(children, grace + KILL_MARGIN, stopper)
        if server is not None:
            server.stop()
        # only what this up wrote: the lock keeps any other up out of data_dir, and
        # each removal checks the file still holds what was written
        if recorded_pid is not None:
            remove_local_url(recorded_pid, data_dir)
        if token_written and admin_token is not None:
            remove_admin_token(admin_token, data_dir)
        stopper.uninstall()
        lock.release()  # last: the server on the directory has stopped
    if code:
        raise click.exceptions.Exit(code)
    say("stopped.")


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
