"""``redcron task list|show|cancel`` and ``redcron inspect``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from redcron.app import App
from redcron.cli.audit import audited, record_cli
from redcron.cli.common import (
    app_option,
    build_app,
    echo_json,
    echo_listing,
    iso_ms,
    one_line,
    redis_option,
    table,
)
from redcron.cli.runs import attempts_cell, task_error
from redcron.engine import TaskFilter, WorkerRegistry, list_tasks, queue_loads
from redcron.model import AttemptRecord, QueueLoad, TaskRecord, error_classes
from redcron.model.concurrency import ConcurrencySlots
from redcron.model.error_classes import ErrorClasses
from redcron.model.retry_rule import attempts_long
from redcron.model.serialize import payload, to_json
from redcron.model.states import TaskState

LOG_TAIL_LINES = 20
#: per-tenant counters of Inspection.inspect(), in display order
COUNTS = ("ready", "in_flight", "delayed", "dlq")


@dataclass(frozen=True, slots=True)
class TaskDetails:
    """What ``task show`` prints: the task's record and its last attempt's log tail."""

    task: TaskRecord
    log_tail: tuple[str, ...]
    #: its concurrency key's slots (None: the task has no key)
    concurrency: ConcurrencySlots | None = None
    #: the exception classes its registered task declares (``-A``), shown when
    #: the call gave none (None: none declared, or the task is not registered here)
    declared_errors: ErrorClasses | None = None

    def to_json(self) -> dict[str, Any]:
        """The record's JSON with ``log_tail`` (and ``concurrency``, if keyed) added."""
        out = {**to_json(self.task), "log_tail": list(self.log_tail)}
        if self.concurrency is not None:
            out["concurrency"] = to_json(self.concurrency)
        return out


@click.group()
def task() -> None:
    """List task instances; look at or cancel one."""


@task.command("list")
@click.option(
    "--state", type=click.Choice([s.value for s in TaskState]), default=None,
    help="Only tasks in this state.",
)  # fmt: skip
@click.option("--tenant", default=None, help="Only this tenant's tasks.")
@click.option("--queue", default=None, help="Only tasks of this queue.")
@click.option("--name", default=None, help="Only tasks of this registered name.")
@click.option(
    "--limit", type=click.IntRange(min=1, max=10_000), default=50, show_default=True,
    help="Tasks to show (newest first).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def list_cmd(
    state: str | None,
    tenant: str | None,
    queue: str | None,
    name: str | None,
    limit: int,
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """The newest task instances (of the last 100,000 per shard) matching the filters."""
    broker = build_app(app_path, redis_url).broker
    found = list_tasks(broker, TaskFilter(state, tenant, queue, name), limit)
    echo_listing(found, as_json, "no tasks match", lambda: tasks_table(found))


def tasks_table(found: list[TaskRecord]) -> str:
    rows = [
        (
            t.id,
            t.name,
            t.tenant,
            t.queue,
            t.state,
            attempts_cell(t),
            iso_ms(t.created_at),
            "" if t.exit_code is None else t.exit_code,
            one_line(task_error(t), 40),
        )
        for t in found
    ]
    headers = ("task", "name", "tenant", "queue", "state", "attempts", "created", "exit", "error")
    return table(headers, rows)


@task.command()
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--lines",
    type=click.IntRange(min=0),
    default=LOG_TAIL_LINES,
    show_default=True,
    help="Log lines of the last attempt to show.",
)
@app_option
@redis_option
def show(
    task_id: str, as_json: bool, lines: int, app_path: str | None, redis_url: str | None
) -> None:
    """Show a task: state, attempts, last error and the last attempt's log tail."""
    app = build_app(app_path, redis_url)
    details = task_details(app, task_id, lines)
    if as_json:
        echo_json(details.to_json())
    else:
        click.echo(render_task(details))


@task.command()
@click.argument("task_id")
@app_option
@redis_option
@audited("task.cancel")
def cancel(task_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Cancel a task: it ends cancelled at once, wherever it is (a running one's
    result will be refused; its worker kills it at its next heartbeat)."""
    broker = build_app(app_path, redis_url).broker
    found = broker.inspection.task_info(task_id)
    before = found.state
    done = broker.cancel(task_id)
    record_cli(broker, "task.cancel", found.tenant, [task_id], f"was {before}, now {done.state}")
    if not done.cancelled:
        click.echo(f"{task_id}: already {done.state}, nothing to cancel")
    elif done.may_still_be_running:
        click.echo(
            f"{task_id}: cancelled (was {before}); its code may still be running until the "
            "worker stops it at its next heartbeat (a Python thread runs to its end; its "
            "result is refused)"
        )
    else:
        click.echo(f"{task_id}: cancelled (was {before})")


def task_details(app: App, task_id: str, lines: int) -> TaskDetails:
    """The task's record and the last attempt's log tail."""
    task = app.broker.inspection.task_info(task_id)
    last = task.attempt
    tail = app.broker.inspection.log_lines(task_id, last, lines) if last and lines else []
    registered = app.tasks.get(task.name) if task.kind == "python" else None
    declared = (
        error_classes.of_task(registered.options.retry_on, registered.options.permanent_on)
        if registered is not None
        else None
    )
    return TaskDetails(task, tuple(tail), app.broker.inspection.concurrency(task), declared)


def render_task(details: TaskDetails) -> str:
    t = details.task
    out = [f"task {t.id}  {t.name} ({t.kind})"]
    fields = [
        ("state", t.state),
        ("queue", t.queue),
        ("tenant", t.tenant),
        ("priority", t.priority),
        ("created", iso_ms(t.created_at)),
        ("due", iso_ms(t.due_at)),
        ("unique key", _unique(t)),
        ("debounce", _debounce(t)),
        ("ended", iso_ms(t.ended_at)),
        ("attempts", _attempts(t)),
        ("concurrency", details.concurrency.summary() if details.concurrency else None),
        ("rate", _rate(t)),
        ("mapped", t.mapped.summary() if t.mapped else None),
        ("map index", t.map_index),
        ("element", payload(t.item) if t.item is not None else None),
        ("progress", _progress(t)),
        ("errors", _errors(details)),
        ("args", payload(t.args) if t.args else None),
        ("result", payload(t.result) if t.result and t.state == TaskState.SUCCEEDED else None),
    ]
    out += [f"  {k:<11} {v}" for k, v in fields if v not in (None, "")]
    if t.attempts:
        rows = [
            (
                a.number,
                a.worker or "",
                iso_ms(a.leased_at),
                iso_ms(_started(a)),
                iso_ms(a.ended_at),
                a.outcome or ("running" if a.ended_at is None else ""),
                "" if a.exit_code is None else a.exit_code,
                one_line(a.error or ""),
            )
            for a in t.attempts
        ]
        headers = ("#", "worker", "leased", "started", "ended", "outcome", "exit", "error")
        out += ["", table(headers, rows)]
    # a task that succeeded after a failure has no error to report: the
    # attempts table above still shows how the earlier attempts ended
    failed = [a for a in t.attempts if a.error] if t.state != TaskState.SUCCEEDED else []
    if failed:
        out += ["", f"last error (attempt {failed[-1].number}):"]
        out += [f"  | {line}" for line in str(failed[-1].error).rstrip().splitlines()]
    if t.progress is not None and t.progress.recent:
        out += ["", f"progress messages (last {len(t.progress.recent)}):"]
        out += [
            f"  {iso_ms(n.at)}  #{n.attempt}  {n.done:g}  {one_line(n.message)}"
            for n in t.progress.recent
        ]
    if details.log_tail:
        out += ["", f"log of attempt {t.attempt} (last {len(details.log_tail)} lines):"]
        out += [f"  | {line}" for line in details.log_tail]
    return "\n".join(out)


def _started(a: AttemptRecord) -> datetime | None:
    """When an attempt started: a worker marks that off its hot path (every 50
    ms, start.lua), so an attempt that ended sooner has no mark; it started
    when it was leased, as the engine times it (and the dashboard shows it)."""
    if a.started_at is None and a.ended_at is not None:
        return a.leased_at
    return a.started_at


# -- unique windows and debounce (issue 21 §4) --
def _unique(t: TaskRecord) -> str | None:
    if t.unique_key is None:
        return None
    return f"{t.unique_key} (held until {iso_ms(t.unique_until)} or the task's end)"


def _debounce(t: TaskRecord) -> str | None:
    if t.debounce_key is None:
        return None
    cap = "" if t.max_wait_s is None else f", at most {t.max_wait_s:g}s after the first"
    return (
        f"{t.debounce_key}: starts {t.debounce_s or 0:g}s after the last call{cap}; "
        f"{t.debounce_calls} call(s), first {iso_ms(t.debounce_first_at)}, "
        f"last {iso_ms(t.debounce_last_at)}"
    )


# -- end unique windows and debounce --
def _rate(t: TaskRecord) -> str | None:
    """``10/s (the task as a whole)`` or ``100/m per customer_id ('cust-7')``;
    a task waiting for its turn is ``scheduled``, its turn the ``due`` time."""
    if t.rate is None:
        return None
    if not t.rate_key:
        return f"{t.rate} (the task as a whole)"
    return f"{t.rate} per {t.rate_key} ({t.rate_group!r})"


def _progress(t: TaskRecord) -> str | None:
    """``40/100 (40%) copying rows (attempt 1, 2027-01-04T09:00:00.000Z)``."""
    p = t.progress
    if p is None:
        return None
    said = f" {one_line(p.message)}" if p.message else ""
    return f"{p.summary()}{said} (attempt {p.attempt}, {iso_ms(p.at)})"


def _errors(details: TaskDetails) -> str | None:
    """The call's retry_on/permanent_on, else its registered task's (with -A)."""
    t = details.task
    if t.retry_on is not None or t.permanent_on is not None:
        return f"{ErrorClasses(t.retry_on, t.permanent_on).describe()} (this call's)"
    if details.declared_errors is not None:
        return f"{details.declared_errors.describe()} (the task's)"
    return None


def _attempts(t: TaskRecord) -> str:
    # a retry or a DLQ replay starts a fresh budget at the attempt count it had
    return attempts_long(t)


@click.command("inspect")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def inspect_cmd(as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """Ready / in-flight / delayed / DLQ counts per tenant and per (tenant, queue),
    queues no live worker serves, ready work of tasks no live worker registered
    (unrunnable: the workers leave it ready), and lifetime counters."""
    broker = build_app(app_path, redis_url).broker
    loads = sorted(broker.inspection.inspect(), key=lambda row: (row.tenant, row.shard))
    tenants: dict[str, dict[str, int]] = {}
    for row in loads:  # one row per (shard, tenant): sum over shards
        acc = tenants.setdefault(row.tenant, dict.fromkeys(COUNTS, 0))
        for name in COUNTS:
            acc[name] += getattr(row, name)
    totals = {name: sum(t[name] for t in tenants.values()) for name in COUNTS}
    stats = broker.inspection.stats()
    live = WorkerRegistry(broker).list()
    queues = queue_loads(broker, live)
    if as_json:
        echo_json(
            {
                "tenants": loads,
                "queues": queues,
                "workers": len(live),
                "totals": totals,
                "stats": stats,
            }
        )
        return
    rows: list[list[Any]] = [[t, *(c[n] for n in COUNTS)] for t, c in sorted(tenants.items())]
    if len(rows) > 1:
        rows.append(["(total)", *(totals[n] for n in COUNTS)])
    click.echo(
        table(("tenant", "ready", "in-flight", "delayed", "dlq"), rows)
        if rows
        else "no tenants yet (nothing was ever enqueued)"
    )
    if queues:
        click.echo("")
        qrows = [
            [q.tenant, q.queue, q.ready, q.in_flight, q.delayed, q.dlq, _served(q)] for q in queues
        ]
        headers = ("tenant", "queue", "ready", "in-flight", "delayed", "dlq", "workers")
        click.echo(table(headers, qrows))
    if stats:
        click.echo("")
        click.echo(table(("counter", "value"), sorted(stats.items())))


def _served(q: QueueLoad) -> str:
    if q.served:
        if q.unrunnable:
            # the workers here lease only the tasks they registered: this work waits
            return (
                f"UNRUNNABLE: {q.unrunnable} ready instance{'' if q.unrunnable == 1 else 's'} "
                "of tasks no live worker has registered"
            )
        return "ok"
    # work waits here for nobody: say so where an operator looks
    return "NONE (no live worker serves this queue)" if q.ready or q.delayed else "none"
