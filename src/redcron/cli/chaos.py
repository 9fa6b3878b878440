"""``redcron chaos``: run the chaos scenario of a seed against an embedded Redis
it starts (AOF, ``appendfsync always``), or with ``--cluster`` a local 3-master
Redis Cluster, then check the invariants (``redcron.chaos``).  Exit status 1
when a task was lost or an invariant broke."""

from __future__ import annotations

import sys

import click

from redcron.chaos import plan, run_scenario
from redcron.chaos.checker import ChaosReport
from redcron.chaos.outage import describe
from redcron.cli.common import FiniteFloatRange
from redcron.model import serialize


def _text(report: ChaosReport) -> str:
    r = report
    lines = [
        f"seed {r.seed}: {r.duration_s:g}s of chaos, {r.tasks} tasks, {r.runs} runs "
        f"({r.run_tasks} run tasks), {r.attempts} attempts ({r.audited_executions} executions "
        "audited)",
        f"kills {r.kills} (workers SIGKILLed {r.worker_kills}, SIGSTOPped {r.worker_stops}, "
        f"beats SIGKILLed {r.beat_kills}), "
        f"{'master' if r.cluster else 'redis'} restarts {r.redis_restarts}, "
        f"cancels {r.cancels}",
        f"fires expected {r.fires_expected}, missing {r.missing_fires}, duplicates in window "
        f"{r.duplicates_in_window}; zombie overlaps (allowed) {r.zombie_overlaps}",
        f"outcomes {r.outcomes}; dead {r.dead}; stuck {r.stuck}; doctor findings "
        f"{r.doctor_findings}",
        f"lost {r.lost}, invariant violations {r.invariant_violations}"
        f"  (took {r.elapsed_s:g}s, settled in {r.settle_s:g}s)",
    ]
    if r.outage is not None:
        lines.append(describe(r.outage))
    lines += [f"  - {v}" for v in r.violations]
    if not r.ok:
        lines.append(f"data (AOF, process logs): {r.data_dir}; rerun: {r.rerun}")
    return "\n".join(lines)


@click.command()
@click.option("--seed", type=int, default=1, show_default=True, help="The scenario's seed.")
@click.option(
    "--duration",
    type=FiniteFloatRange(min=5),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds of chaos (then the system settles and is checked).",
)
@click.option(
    "--tasks",
    type=click.IntRange(min=0),
    default=10_000,
    show_default=True,
    help="One-off tasks submitted over the first two thirds of the run.",
)
@click.option(
    "--cluster",
    is_flag=True,
    help="Run on a local 3-master Redis Cluster (12 shards) and kill one master instead "
    "of the server: only its shards may pause.",
)
@click.option("--keep", is_flag=True, help="Keep the data directory (AOF, logs) even when clean.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON line.")
def chaos(seed: int, duration: float, tasks: int, cluster: bool, keep: bool, as_json: bool) -> None:
    """Run one reproducible chaos scenario and check the invariants after it.

    Starts its own embedded Redis, 4 workers (both pools) and 2 beats; kills or
    freezes a worker about every 2 s, a beat about every 5 s, and the Redis server
    once; then checks that every task and run ended exactly once, no two valid
    leases overlapped, every fire time ran once, the counters match a recount and
    nothing acknowledged was lost.  Progress goes to stderr.

    With --cluster: a local 3-master Redis Cluster (AOF, appendfsync always),
    12 shards, one tenant on each master; one master is SIGKILLed for 4-8 s and
    restarted.  Also checked: while it was down, attempts kept ending on the
    live masters' shards and none on its own; after, its shards' work resumed.
    """
    report = run_scenario(
        plan(seed, duration, tasks, cluster=cluster),
        say=lambda line: click.echo(line, err=True),
        keep=keep,
    )
    if as_json:
        click.echo(serialize.dumps(report, indent=None))
    else:
        click.echo(_text(report))
    sys.exit(0 if report.ok else 1)
