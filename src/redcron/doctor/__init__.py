"""Reconciliation (``redcron doctor``): recount what the indexes claim from the
instance hashes, streams, runs and jobs they name, report every disagreement
with the key to look at, and (``repair=True``) fix what is safe to fix.

Each check reads in two steps: discover (SCAN the keys of a kind, or read a
page of an index), then verify in one ``MULTI``/``EXEC`` snapshot per batch,
so a live system moving work between the two reads does not show up as a
finding.  Memory stays bounded: instances, stream entries, leases, timers and
DLQ entries are read in batches of ``BATCH``; what is kept across batches is
per tenant, per (queue, class) and per finding.

Repairs are small Lua scripts (``lua/doctor_*.lua``), each re-checking, inside
the script, the condition the finding was made on before it writes, and each
idempotent: running doctor twice never does anything twice.  None hands out
again work that a worker may be running.

- ``report``: :func:`examine`, the order of the checks, the report.
- ``records``: what it returns (``DoctorReport``, ``Finding``...).
- ``exam``: the state one examination passes to every check (``Exam``).
- ``scan``: discovery reads and snapshots.
- ``logic``: the pure comparisons (:func:`instance_problem`,
  :func:`run_recount`, :func:`run_progress`), unit-tested without Redis.
- One module per area, each with its checks and their repairs:
  ``instances`` (each instance where its hash says), ``streams`` (entries
  owned, the reaper's index), ``members`` (lease sets, timers, DLQs),
  ``rings`` (rings, aging, parked tenants), ``schedule`` (jobs and the
  schedule), ``runs`` (runs and the jobs' active sets).
"""

from redcron.doctor.exam import SCRIPTS
from redcron.doctor.logic import (
    RunCounts,
    instance_problem,
    run_progress,
    run_recount,
)
from redcron.doctor.records import DoctorReport, DoctorSummary, Finding, TenantRecount
from redcron.doctor.report import examine

__all__ = [
    "SCRIPTS",
    "DoctorReport",
    "DoctorSummary",
    "Finding",
    "RunCounts",
    "TenantRecount",
    "examine",
    "instance_problem",
    "run_progress",
    "run_recount",
]
