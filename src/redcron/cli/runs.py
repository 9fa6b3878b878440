"""``redcron runs list|show|watch|cancel|retry``: the runs of jobs, and their DAGs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from redcron.cli.audit import audited, record_cli
from redcron.cli.common import (
    FiniteFloatRange,
    app_option,
    build_app,
    echo_json,
    echo_listing,
    fail,
    one_line,
    redis_option,
    table,
)
from redcron.engine import JobStore
from redcron.errors import NotFound
from redcron.keys import shard_of_id
from redcron.model import RunRecord, TaskRecord
from redcron.model.retry_rule import attempts_short
from redcron.model.states import RUN_ACTIVE, TASK_LEASED, RunState, TaskState

#: sorts a run without a time last (newest first)
_NEVER = datetime.min.replace(tzinfo=UTC)
#: above this many tasks a progress line counts states instead of naming tasks
WATCH_NAMED_TASKS = 12
RECENT_RUNS = 20


# -- shared helpers (``redcron jobs`` uses them too) ---------------------------


def iso_utc(dt: datetime | None) -> str | None:
    """A time for people: ISO-8601 UTC (``2026-11-29T02:00:00Z``; milliseconds
    only when there are any); None when unset."""
    if dt is None:
        return None
    dt = dt.astimezone(UTC)
    spec = "seconds" if dt.microsecond // 1000 == 0 else "milliseconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


def seconds(value: float | None) -> str:
    """A duration for people: 0.25s, 12.3s, 4m05s, 2h03m."""
    if value is None:
        return ""
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    if value < 3600:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"


def dag_tree(
    order: Sequence[str], deps: Mapping[str, Sequence[str]]
) -> list[tuple[str, str, bool]]:
    """The DAG as an indented tree: children (downstream tasks) under parents.

    Returns ``(line, task, repeated)`` rows in display order.  A task with
    several parents is drawn in full under the first one and as a
    ``repeated`` one-liner under the others, so the output grows with the
    edges, not the paths.  Iterative: a 1000-task chain is fine.
    """
    known = set(order)
    children: dict[str, list[str]] = {t: [] for t in order}
    for t in order:
        for d in deps.get(t, ()):
            if d in known:
                children[d].append(t)
    roots = [t for t in order if not any(d in known for d in deps.get(t, ()))]
    rows: list[tuple[str, str, bool]] = []
    shown: set[str] = set()
    # (task, prefix of its line, prefix of its children's lines)
    stack: list[tuple[str, str, str]] = [(r, "", "") for r in reversed(roots)]
    while stack:
        task, prefix, child_prefix = stack.pop()
        repeated = task in shown
        rows.append((prefix + task, task, repeated))
        if repeated:
            continue
        shown.add(task)
        kids = children[task]
        for i in range(len(kids) - 1, -1, -1):
            last = i == len(kids) - 1
            stack.append(
                (
                    kids[i],
                    child_prefix + ("└─ " if last else "├─ "),
                    child_prefix + ("   " if last else "│  "),
                )
            )
    for t in order:  # unreachable only if the DAG had a cycle (validation forbids it)
        if t not in shown:
            rows.append((t, t, False))
    return rows


def runs_table(runs: Sequence[RunRecord], with_job: bool = False) -> str:
    """Runs as a table; ``with_job`` adds a job column (runs of several jobs)."""
    rows = [
        (
            *((r.job_name,) if with_job else ()),
            r.id,
            r.trigger,
            iso_utc(r.scheduled_for) or "",
            state_cell(r),
            f"{r.done}/{r.total}",
            seconds(r.duration_s),
        )
        for r in runs
    ]
    headers = ("run", "trigger", "scheduled for", "state", "done", "took")
    return table((("job",) if with_job else ()) + headers, rows)


def state_cell(run: RunRecord) -> str:
    """A run's state, marked ``late`` when it was still going past its job's
    deadline (``running late``, ``succeeded late``)."""
    return f"{run.state} late" if run.late else str(run.state)


def late_line(run: RunRecord) -> str | None:
    """``runs show``'s deadline line: when the run was to end by, and whether
    and when it was found late; None without a deadline."""
    if run.deadline_at is None:
        return None
    if run.late_at is None:
        return f"{iso_utc(run.deadline_at)}"
    return f"{iso_utc(run.deadline_at)} (late: still going at {iso_utc(run.late_at)})"


def task_seconds(task: TaskRecord, now: datetime) -> float | None:
    """Time spent in attempts (queueing and backoff waits excluded); the
    current attempt of a busy task counts up to ``now``."""
    total: float | None = None
    for i, a in enumerate(task.attempts):
        begin = a.started_at or a.leased_at
        end = a.ended_at
        if end is None and i == len(task.attempts) - 1 and task.state in TASK_LEASED:
            end = now
        if begin is not None and end is not None:
            total = (total or 0.0) + max(0.0, (end - begin).total_seconds())
    return total


def load_run(store: JobStore, run_id: str) -> RunRecord:
    """The run with its tasks (``runs show``); a malformed id is not found."""
    return store.run(checked_run_id(run_id))


def render_run(run: RunRecord, now: datetime) -> str:
    out = [f"run {run.id}  job {run.job_name} (tenant {run.tenant})"]
    params = run.decoded_params()
    fields = [
        ("state", state_cell(run) + (f" ({run.reason})" if run.reason else "")),
        ("trigger", run.trigger),
        ("scheduled for", iso_utc(run.scheduled_for)),
        ("deadline", late_line(run)),
        ("created", iso_utc(run.created_at)),
        ("started", iso_utc(run.started_at)),
        ("ended", iso_utc(run.ended_at)),
        ("took", seconds(run.duration_s)),
        (
            "progress",
            f"{run.done}/{run.total} done ({run.succeeded} succeeded, "
            f"{run.failed} failed, {run.cancelled} cancelled)",
        ),
        ("params", json.dumps(params) if params else None),
    ]
    out += [f"  {k:<14} {v}" for k, v in fields if v not in (None, "")]
    tasks = {t.task or "": t for t in run.tasks or ()}
    if not tasks:
        return "\n".join(out)
    rows: list[tuple[str, ...]] = []
    deps = {name: t.depends_on if isinstance(t, TaskRecord) else () for name, t in tasks.items()}
    for line, name, repeated in dag_tree(list(tasks), deps):
        t = tasks[name]
        if repeated:
            rows.append((f"{line} (see above)", "", "", "", ""))
            continue
        if not isinstance(t, TaskRecord):
            rows.append((line, t.state, "", "", ""))
            continue
        rows.append(
            (
                line,
                t.state,
                attempts_cell(t),
                seconds(task_seconds(t, now)),
                # a mapped task: its instances' counts (issue 32 §2)
                t.mapped.summary() if t.mapped and not t.error else one_line(task_error(t), 50),
            )
        )
    out += ["", table(("task", "state", "attempts", "took", "error"), rows)]
    return "\n".join(out)


def attempts_cell(t: TaskRecord) -> str:
    """``used/allowed``: a DLQ replay or run retry starts a fresh budget, so the
    attempts before it are not counted (``attempt`` alone, against
    ``max_attempts``, once showed "6/4"); those are added as ``+N earlier``
    (``model.retry_rule.attempts_short``, as the dashboard shows them)."""
    return attempts_short(t)


def task_error(t: TaskRecord) -> str:
    """The error worth showing next to a task's state: none once it succeeded
    (an earlier failed attempt's error is history, in ``task show``)."""
    if t.state == TaskState.SUCCEEDED:
        return ""
    errors = [a.error for a in t.attempts if a.error]
    return errors[-1] if errors else (t.error or "")


def checked_run_id(run_id: str) -> str:
    try:
        shard_of_id(run_id)
    except NotFound:
        raise NotFound(f"no run {run_id!r}: run ids look like '<shard>-<ulid>@<fire>'") from None
    return run_id


def progress_line(run: RunRecord) -> str:
    """One line of progress: run state, tasks done/total, and each task's state."""
    tasks = run.tasks or ()
    head = f"{run.state}  {run.done}/{run.total} done"
    if not tasks:
        return head
    if len(tasks) <= WATCH_NAMED_TASKS:
        return head + "  " + " ".join(f"{t.task}={t.state}" for t in tasks)
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.state] = counts.get(t.state, 0) + 1
    return head + "  " + ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))


# -- commands ------------------------------------------------------------------


@click.group()
def runs() -> None:
    """List, show, watch, cancel and retry runs of jobs."""


@runs.command("list")
@click.option("--job", "job_name", default=None, help="Only runs of this job (by name).")
@click.option("--tenant", default="default", show_default=True, help="The job's tenant.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=RECENT_RUNS, show_default=True,
    help="Runs to show (newest first).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def list_cmd(
    job_name: str | None,
    tenant: str,
    limit: int,
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """List runs, newest first: of one job (--job), or of every job of --tenant."""
    store = build_app(app_path, redis_url).jobs
    if job_name is not None:
        job_ids = [store.job_id(job_name, tenant=tenant)]
    else:
        job_ids = [j.id for j in store.list_jobs(tenant)]
    found = [r for jid in job_ids for r in store.runs(jid, limit)]
    found.sort(key=lambda r: (r.scheduled_for or _NEVER, r.created_at or _NEVER), reverse=True)
    found = found[:limit]
    empty = "no runs yet" + (f" of job {job_name}" if job_name else f" in tenant {tenant}")
    echo_listing(found, as_json, empty, lambda: runs_table(found, with_job=not job_name))


@runs.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def show(run_id: str, as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """Show a run: its state and its DAG with each task's state, attempts and time."""
    store = build_app(app_path, redis_url).jobs
    run = load_run(store, run_id)
    if as_json:
        echo_json(run)
    else:
        click.echo(render_run(run, store.server_now()))


@runs.command()
@click.argument("run_id")
@click.option(
    "--interval", type=FiniteFloatRange(min=0.05), default=0.5, show_default=True,
    help="Seconds between polls.",
)  # fmt: skip
@click.option(
    "--timeout", type=FiniteFloatRange(min=0), default=0, show_default=True,
    help="Give up (exit 1) after this many seconds; 0 = wait until the run ends.",
)  # fmt: skip
@app_option
@redis_option
def watch(
    run_id: str, interval: float, timeout: float, app_path: str | None, redis_url: str | None
) -> None:
    """Follow a run until it ends: a line per change; exit 0 if it succeeded, else 1."""
    store = build_app(app_path, redis_url).jobs
    exit_code = watch_run(store, run_id, interval, timeout, click.echo, time.sleep)
    raise click.exceptions.Exit(exit_code)


def watch_run(
    store: JobStore,
    run_id: str,
    interval: float,
    timeout: float,
    echo: Callable[[str], Any],
    sleep: Callable[[float], Any],
) -> int:
    """Poll until the run ends; print a timestamped line whenever progress changes."""
    deadline = time.monotonic() + timeout if timeout else None
    last = ""
    header = False
    while True:
        run = load_run(store, run_id)
        if not header:
            echo(f"run {run.id}  job {run.job_name} (tenant {run.tenant})")
            header = True
        line = progress_line(run)
        if line != last:
            stamp = datetime.now(UTC).strftime("%H:%M:%SZ")
            echo(f"{stamp}  {line}")
            last = line
        if run.state not in RUN_ACTIVE:
            return 0 if run.state == RunState.SUCCEEDED else 1
        if deadline is not None and time.monotonic() >= deadline:
            fail(f"run {run_id} still {run.state} after {timeout:g}s")
        sleep(interval)


@runs.command()
@click.argument("run_id")
@app_option
@redis_option
@audited("run.cancel")
def cancel(run_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Cancel a run: every task not yet ended ends cancelled at once, and the run."""
    store = build_app(app_path, redis_url).jobs
    run = load_run(store, run_id)  # a clear "no run" first
    done = store.cancel_run(run_id)
    record_cli(store.broker, "run.cancel", run.tenant, [run_id], f"run {done.state}")
    if not done.cancelled:
        click.echo(f"run {run_id}: already {done.state}, nothing to cancel")
    elif done.running:
        n = len(done.running)
        click.echo(
            f"run {run_id}: {done.state}; the code of {n} task{'' if n == 1 else 's'} "
            f"({', '.join(done.running)}) may still be running until their workers stop "
            "them at their next heartbeat (their results are refused)"
        )
    else:
        click.echo(f"run {run_id}: {done.state}")


@runs.command()
@click.argument("run_id")
@click.option(
    "--task", "tasks", multiple=True, metavar="TASK",
    help="Retry this task (repeatable); default: every dead task of the run.",
)  # fmt: skip
@app_option
@redis_option
@audited("run.retry")
def retry(run_id: str, tasks: tuple[str, ...], app_path: str | None, redis_url: str | None) -> None:
    """Retry the failed part of a run: failed tasks ready again, their downstream reset."""
    store = build_app(app_path, redis_url).jobs
    n = store.retry_run(checked_run_id(run_id), list(tasks))
    ids = [f"{run_id}/{t}" for t in tasks] or [run_id]
    record_cli(store.broker, "run.retry", store.run(run_id).tenant, ids, f"{n} retried")
    if n == 0:
        click.echo(f"run {run_id}: nothing to retry (no dead tasks)")
        return
    state = store.run(run_id).state
    click.echo(f"run {run_id}: retried {n} task{'' if n == 1 else 's'}; run is {state}")
