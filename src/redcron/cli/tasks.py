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

LOG_TAIL_LINES = 20
#: per-tenant counters of Broker.inspect(), in display order
COUNTS = ("ready", "in_flight", "delayed", "dlq")


@click.group()
def task() -> None:
    """Look at or cancel one task instance."""


@task.command()
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--lines", type=click.IntRange(min=0), default=LOG_TAIL_LINES, show_default=True,
              help="Log lines of the last attempt to show.")
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
    state = build_app(app_path, redis_url).broker.cancel(task_id)
    notes = {
        "cancelled": "cancelled",
        "cancel_requested": "cancel requested; the worker stops it at its next heartbeat",
    }
    click.echo(f"{task_id}: {notes.get(state, f'already {state}, nothing to cancel')}")


def task_details(app: App, task_id: str, lines: int) -> dict[str, Any]:
    """``task_info`` with payloads decoded and the last attempt's log tail added."""
    info = app.broker.task_info(task_id)
    for name in ("args", "result"):
        if name in info:
            info[name] = decode_payload(info[name])
    last = int(info.get("attempt") or 0)
    info["log_tail"] = app.broker.log_lines(task_id, last, lines) if last and lines else []
    return info


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
        ("attempts", f"{info.get('attempt', 0)} of {info.get('max_attempts', '?')}"),
        ("args", info.get("args")),
        ("result", info.get("result") if info.get("state") == "succeeded" else None),
        ("last error", info.get("error")),
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
    if info.get("log_tail"):
        out += ["", f"log of attempt {info.get('attempt')} (last {len(info['log_tail'])} lines):"]
        out += [f"  | {line}" for line in info["log_tail"]]
    return "\n".join(out)



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
    click.echo(table(("tenant", "ready", "in-flight", "delayed", "dlq"), rows) if rows
               else "no tenants yet (nothing was ever enqueued)")
    if stats:
        click.echo("")
        click.echo(table(("counter", "value"), sorted(stats.items())))

