"""``redcron worker``: run tasks from one or more queues."""

from __future__ import annotations

import os
import socket

import click

from redcron.cli.common import (
    FiniteFloatRange,
    app_option,
    build_app,
    concurrency_option,
    durability_option,
    grace_option,
    logging_options,
    pool_option,
    prefetch_option,
    redis_option,
    setup_logging,
    split_csv,
)
from redcron.cli.worker_procs import MAX_PROCS, child_argv, run_procs
from redcron.clock import ulid
from redcron.config import WORKER_PREFETCH_PER_SLOT, WORKER_THREADS
from redcron.engine import WorkerRegistry
from redcron.lifeline import forbid_inspection
from redcron.worker import Worker, WorkerOptions


@click.command()
@app_option
@concurrency_option(
    None,
    "Tasks run at once.",
    show=f"{WORKER_THREADS} threads; one per core with --pool processes",
)
@prefetch_option(
    "Leases held beyond -c, waiting for a slot: the next batch is leased while "
    "the slots still have work (held leases count as in flight; handed back at once "
    "on shutdown).  Use 0 for long tasks, so a held lease does not wait behind them.",
    show=f"{WORKER_PREFETCH_PER_SLOT} x concurrency",
)
@pool_option("Run tasks in threads, or in child processes.")
@click.option(
    "-Q",
    "--queues",
    default="default",
    show_default=True,
    metavar="Q1,Q2",
    help="Comma-separated queues to take work from.",
)
@click.option(
    "--tenants",
    default=None,
    metavar="T1,T2",
    help="Only take work of these tenants (default: all): run a tenant's command tasks "
    "on workers of its own (docs/operations.md, Trust boundaries).",
)
@click.option(
    "--lease-ttl",
    type=FiniteFloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Lease lifetime without a heartbeat [default: settings, env REDCRON_LEASE_TTL].",
)
@click.option(
    "--allow-commands",
    is_flag=True,
    default=False,
    help="Run command and container tasks (app.enqueue_command, job tasks with command= "
    "or image=): arbitrary programs, off unless asked for.  Narrow it with --allow-program "
    "and --allow-image.",
)
@click.option(
    "--allow-program",
    "allow_programs",
    multiple=True,
    metavar="PROGRAM",
    help="With --allow-commands: run only command tasks of this program (repeatable).  "
    "A path (/usr/bin/rsync), or a name looked up on this worker's PATH (backup.sh); a "
    "task's program is resolved with this worker's PATH, never the task's, and that file "
    "is run.  Any other program fails permanently.  Not given: any program.",
)
@click.option(
    "--allow-image",
    "allow_images",
    multiple=True,
    metavar="IMAGE",
    help="With --allow-commands: run only container tasks of this image (repeatable); "
    "registry/x:tag exactly, registry/x any tag or digest of it.  Any other image fails "
    "permanently.  Not given: any image.",
)
@click.option(
    "--pass-env",
    "pass_env",
    multiple=True,
    metavar="NAME",
    help="Give command and container tasks this variable of the worker's environment "
    "(repeatable).  They get only PATH, HOME, LANG, these and their own env: never "
    "REDCRON_* (refused), the Redis URL or a token.",
)
@grace_option("On SIGTERM, how long running tasks may finish before they are released.")
@click.option(
    "--cpus",
    type=FiniteFloatRange(min=0, min_open=True),
    default=None,
    help="Cores this worker offers: tasks asking for cpu run only while they fit.",
)
@click.option(
    "--mem",
    default=None,
    metavar="SIZE",
    help="Memory this worker offers (e.g. 16G): tasks asking for mem run only while they fit.",
)
@click.option(
    "--audit",
    is_flag=True,
    help="Record every attempt's start and end of execution (instance, epoch, worker) "
    "in the shard's audit stream, for checks like redcron chaos's.  Costs a write per start "
    "and end.",
)
@click.option(
    "--procs",
    type=click.IntRange(1, MAX_PROCS),
    default=1,
    show_default=True,
    help="Worker processes, each with its own lease loop and -c slots, under one "
    "supervisor that restarts one that dies and stops them all on SIGTERM/Ctrl-C "
    f"(at most {MAX_PROCS}).  1: this process is the worker.",
)
# set by the --procs supervisor for each of its processes (not for users)
@click.option("--name", default=None, hidden=True)
@click.option("--supervisor", default=None, hidden=True)
@redis_option
@durability_option
@logging_options
def worker(
    app_path: str | None,
    concurrency: int,
    prefetch: int | None,
    pool: str,
    queues: str,
    tenants: str | None,
    lease_ttl: float | None,
    allow_commands: bool,
    allow_programs: tuple[str, ...],
    allow_images: tuple[str, ...],
    pass_env: tuple[str, ...],
    grace: float,
    cpus: float | None,
    mem: str | None,
    audit: bool,
    procs: int,
    name: str | None,
    supervisor: str | None,
    redis_url: str | None,
    durability: str | None,
    loglevel: str,
    log_format: str,
) -> None:
    """Run a worker until SIGTERM/SIGINT (then drain gracefully); with --procs N,
    N of them under one supervisor."""
    setup_logging(loglevel, log_format)
    queue_names = split_csv(queues)
    if not queue_names:
        raise click.BadParameter("give at least one queue", param_hint="-Q")
    if (allow_programs or allow_images) and not allow_commands:
        option = "--allow-program" if allow_programs else "--allow-image"
        raise click.UsageError(f"{option} narrows --allow-commands: give --allow-commands too")
    if pass_env and not allow_commands:
        raise click.UsageError("--pass-env is for command tasks: give --allow-commands too")
    app = build_app(app_path, redis_url, durability)
    if allow_commands:
        # a command runs as this user: keep it out of this process's environment
        # and memory (/proc/<pid>/environ holds the Redis URL redcron up passes)
        forbid_inspection()
    options = WorkerOptions(
        concurrency=concurrency,
        pool=pool,
        queues=queue_names,
        tenants=split_csv(tenants),
        lease_ttl=lease_ttl,
        allow_commands=allow_commands,
        allow_programs=allow_programs,
        allow_images=allow_images,
        grace=grace,
        app_path=app_path,
        prefetch=prefetch,
        cpus=cpus,
        mem=mem,
        audit=audit,
        pass_env=pass_env,
        name=name,
        supervisor=supervisor,
    )
    if procs == 1:
        Worker(app, options).run()
        return
    # what a child would refuse at start is refused here, once (the app loaded
    # above, the options checked, the lease TTL against the deployment's minimum)
    options.lease_ttl_ms(app.settings)
    supervisor_id = name or f"{socket.gethostname()}:{os.getpid()}:{ulid()[-6:]}"
    env = {"REDCRON_REDIS_URL": redis_url} if redis_url else {}
    argv = child_argv(click.get_current_context())
    code = run_procs(procs, supervisor_id, argv, env, grace, WorkerRegistry(app.broker))
    if code:
        raise click.exceptions.Exit(code)
