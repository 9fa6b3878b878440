"""``redcron task show|cancel`` and ``redcron inspect``."""

from __future__ import annotations

from typing import Any

import click

from redcron.app import App
from redcron.cli.common import (
    app_option,
    build_app,
    decode_payload,
    echo_json,
    iso_ms,
    one_line,
    redis_option,
    table,
)
from redcron.states import CANCEL_REQUESTED, TASK_TERMINAL, TaskState

LOG_TAIL_LINES = 20
#: per-tenant counters of Broker.inspect(), in display order
COUNTS = ("ready", "in_flight", "delayed", "dlq")
#: instance-hash and attempt fields holding integers (ms timestamps, counters)
NUMERIC_FIELDS = frozenset(
    {
        "attempt", "epoch", "budget", "max_attempts", "timeout_ms", "retry_base_ms",
        "retry_cap_ms", "result_ttl_s", "created", "ended", "due", "deadline", "leased",
        "started", "exit", "exit_code", "waiters",
    }
)  # fmt: skip


@click.group()
def task() -> None:
    """Look at or cancel one task instance."""


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
    info = task_details(app, task_id, lines)
    if as_json:
        echo_json(info)
    else:
        click.echo(render_task(info))


@task.command()
@click.argument("task_id")
@app_option
@redis_option
def cancel(task_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Cancel a task: at once if waiting, at the next heartbeat if running."""
    broker = build_app(app_path, redis_url).broker
    before = broker.task_info(task_id).get("state", "")
    # dead work is still in the DLQ: cancelling it takes it out
    if before in TASK_TERMINAL and before != TaskState.DEAD:
        click.echo(f"{task_id}: already {before}, nothing to cancel")
        return
    state = broker.cancel(task_id)
    if state == CANCEL_REQUESTED:
        click.echo(f"{task_id}: cancel requested; the worker stops it at its next heartbeat")
    else:
        click.echo(f"{task_id}: {state} (was {before})")


def task_details(app: App, task_id: str, lines: int) -> dict[str, Any]:
    """``task_info`` with payloads decoded, numbers as numbers and the last
    attempt's log tail added (the shape ``--json`` prints)."""
    info = app.broker.task_info(task_id)
    for name in ("args", "result"):
        if name in info:
            info[name] = decode_payload(info[name])
    for name in NUMERIC_FIELDS & info.keys():
        info[name] = _number(info[name])
    for attempt in info["attempts"]:
        for name in NUMERIC_FIELDS & attempt.keys():
            attempt[name] = _number(attempt[name])
    last = info.get("attempt") or 0
    info["log_tail"] = app.broker.log_lines(task_id, last, lines) if last and lines else []
    return info


def _number(value: Any) -> Any:
    """Hash fields are text: '' means unset, digits mean an int."""
    if value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def render_task(info: dict[str, Any]) -> str:
    out = [f"task {info.get('id', '?')}  {info.get('name', '')} ({info.get('kind', 'python')})"]
    fields = [
        ("state", info.get("state", "")),
        ("queue", info.get("queue", "")),
        ("tenant", info.get("tenant", "")),
        ("priority", info.get("prio", "")),
        ("created", iso_ms(info.get("created"))),
        ("due", iso_ms(info.get("due"))),
        ("ended", iso_ms(info.get("ended"))),
        ("attempts", _attempts(info)),
        ("args", info.get("args")),
        ("result", info.get("result") if info.get("state") == TaskState.SUCCEEDED else None),
    ]
    out += [f"  {k:<11} {v}" for k, v in fields if v not in (None, "")]
    attempts = info.get("attempts") or []
    if attempts:
        rows = [
            (
                a.get("attempt"),
                a.get("worker", ""),
                iso_ms(a.get("leased")),
                iso_ms(a.get("started")),
                iso_ms(a.get("ended")),
                a.get("outcome", "running" if not a.get("ended") else ""),
                a.get("exit", ""),
                one_line(a.get("error", "")),
            )
            for a in attempts
        ]
        headers = ("#", "worker", "leased", "started", "ended", "outcome", "exit", "error")
        out += ["", table(headers, rows)]
    failed = [a for a in attempts if a.get("error")]
    if failed:
        out += ["", f"last error (attempt {failed[-1]['attempt']}):"]
        out += [f"  | {line}" for line in str(failed[-1]["error"]).rstrip().splitlines()]
    if info.get("log_tail"):
        out += ["", f"log of attempt {info.get('attempt')} (last {len(info['log_tail'])} lines):"]
        out += [f"  | {line}" for line in info["log_tail"]]
    return "\n".join(out)


def _attempts(info: dict[str, Any]) -> str:
    attempt, budget = info.get("attempt") or 0, info.get("budget") or 0
    allowed = info.get("max_attempts") or "?"
    if not budget:
        return f"{attempt} of {allowed}"
    # a DLQ replay starts a fresh budget at the attempt count it had
    return f"{attempt} ({attempt - budget} of {allowed} since the last DLQ replay)"


@click.command("inspect")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def inspect_cmd(as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """Per-tenant ready / in-flight / delayed / DLQ counts, and lifetime counters."""
    broker = build_app(app_path, redis_url).broker
    tenants: dict[str, dict[str, int]] = {}
    for row in broker.inspect():  # one row per (shard, tenant): sum over shards
        acc = tenants.setdefault(row["tenant"], dict.fromkeys(COUNTS, 0))
        for name in COUNTS:
            acc[name] += int(row[name])
    totals = {name: sum(t[name] for t in tenants.values()) for name in COUNTS}
    stats = broker.stats()
    if as_json:
        echo_json(
            {
                "tenants": [{"tenant": t, **c} for t, c in sorted(tenants.items())],
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
    if stats:
        click.echo("")
        click.echo(table(("counter", "value"), sorted(stats.items())))
