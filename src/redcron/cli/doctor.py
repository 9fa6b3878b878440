"""``redcron doctor``: reconcile the indexes with the instances, runs and jobs
they name (``redcron.doctor``), and with ``--repair`` fix what is safe."""

from __future__ import annotations

import sys

import click

from redcron.cli.audit import audited, record_cli
from redcron.cli.common import build_app, echo_json, redis_option
from redcron.doctor import DoctorReport, Finding, examine


def _line(f: Finding, repair: bool) -> str:
    if f.repaired:
        status = f"repaired: {f.action}"
    elif repair and f.repairable:
        status = f"NOT repaired: {f.action or 'no action'}"
    elif f.repairable:
        status = "repairable (--repair)"
    else:
        status = "not repairable: fix by hand"
    return f"{f.kind}  shard {f.shard}  {f.key}\n    {f.detail}\n    [{status}]"


def _summary(report: DoctorReport) -> str:
    s = report.summary
    looked = (
        f"{s.instances} instances, {s.streams} streams ({s.stream_entries} entries), "
        f"{s.leases} leases, {s.timers} timers, {s.dlq_entries} DLQ entries, {s.jobs} jobs, "
        f"{s.schedule_entries} schedule entries, {s.runs_active} active runs"
    )
    if not s.findings:
        return f"no findings: {looked} checked on {report.shards} shard(s)"
    head = f"{s.findings} finding(s)"
    if report.repair:
        head += f", {s.repaired} repaired"
    return f"{head}, {s.remaining} remaining: {looked} checked on {report.shards} shard(s)"


@click.command()
@click.option("--repair", is_flag=True, help="Fix what is safe to fix, and say what was done.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
@redis_option
@audited("doctor.repair")
def doctor(repair: bool, as_json: bool, quiet: bool, redis_url: str | None) -> None:
    """Recount the indexes from the instances, runs and jobs; report each finding.

    Exit status 0 when nothing is found (or everything found was repaired), 1
    when findings remain.  See docs/operations.md, "Reconciliation".
    """
    app = build_app(None, redis_url)

    def progress(line: str) -> None:
        if not quiet:
            print(f"doctor: {line}", file=sys.stderr, flush=True)

    report = examine(app.broker, repair=repair, progress=progress)
    if repair:  # a report alone changes nothing
        s = report.summary
        detail = f"{s.findings} finding(s), {s.repaired} repaired, {s.remaining} remaining"
        record_cli(app.broker, "doctor.repair", None, (), detail)
    if as_json:
        echo_json(report)
    else:
        for f in report.findings:
            click.echo(_line(f, repair))
        click.echo(_summary(report))
    if not report.clean:
        raise click.exceptions.Exit(1)
