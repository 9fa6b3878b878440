"""The chaos checker's pure judgements, on hand-made records (no Redis)."""

from __future__ import annotations

from typing import Any

from redcron.chaos.checker import JobFacts, judge_fires, judge_instance
from redcron.chaos.scenario import plan
from redcron.model import RunRecord, TaskRecord
from redcron.store.audit import AuditEntry

W1, W2 = "w0.1", "w1.2"


def record(attempts: list[dict[str, Any]], state: str = "succeeded") -> TaskRecord:
    fields: dict[str, Any] = {
        "id": "0-T", "name": "chaos.work", "state": state, "queue": "default",
        "tenant": "acme", "priority": "normal", "attempt": str(len(attempts)),
        "max_attempts": "4", "budget": "0",
    }  # fmt: skip
    for n, a in enumerate(attempts, 1):
        for k, v in a.items():
            fields[f"a:{n}:{k}"] = str(v)
    return TaskRecord.from_fields(fields, 0)


def entry(at: int, event: str, attempt: int, worker: str, outcome: str = "") -> AuditEntry:
    return AuditEntry(at, event, "0-T", attempt, attempt, worker, 1, outcome)


def lost_then_retried(retry_leased: int) -> tuple[TaskRecord, list[AuditEntry]]:
    """Attempt 1 on W1 (leased at 1000, lost at 3000), attempt 2 on W2 (leased at
    ``retry_leased``, succeeded at 3500), and the audit of both starts and the retry's end."""
    rec = record([
        {"worker": W1, "leased": 1000, "ended": 3000, "outcome": "lost"},
        {"worker": W2, "leased": retry_leased, "ended": 3500, "outcome": "succeeded"},
    ])  # fmt: skip
    audit = [
        entry(1010, "start", 1, W1),
        entry(retry_leased + 100, "start", 2, W2),
        entry(3400, "end", 2, W2, "succeeded"),
    ]
    return rec, audit


def test_a_zombie_running_past_its_lease_is_allowed() -> None:
    rec, audit = lost_then_retried(3100)
    audit.append(entry(5000, "end", 1, W1, "succeeded"))  # woke up late: its report was rejected
    found, zombies = judge_instance(rec, audit, {})
    assert found == []
    assert zombies == 1


def test_two_valid_leases_overlapping_are_a_violation() -> None:
    rec, audit = lost_then_retried(2000)  # W2 leased while W1's lease still held
    found, _ = judge_instance(rec, audit, {W1: 2500})  # W1 was killed at 2500
    assert any("was leased at" in f for f in found), found
    assert any("both ran with a valid lease" in f for f in found), found


def test_a_success_needs_an_execution_that_ended_within_its_lease() -> None:
    rec = record([{"worker": W1, "leased": 1000, "ended": 2000, "outcome": "succeeded"}])
    audit = [entry(1010, "start", 1, W1), entry(2500, "end", 1, W1, "succeeded")]
    found, _ = judge_instance(rec, audit, {})
    assert any("before its execution ended" in f for f in found), found


def test_a_task_left_running_is_stuck() -> None:
    rec = record([{"worker": W1, "leased": 1000}], state="running")
    found, _ = judge_instance(rec, [entry(1010, "start", 1, W1)], {})
    assert any("is still running" in f for f in found), found


def run(job: JobFacts, ms: int, trigger: str = "every") -> RunRecord:
    fields = {"id": f"{job.id}@{ms}", "job": job.id, "state": "succeeded", "trigger": trigger,
              "scheduled_for": str(ms), "tenant": "acme", "job_name": job.name}  # fmt: skip
    return RunRecord.from_fields(fields)


def test_fires_missing_and_doubled_are_counted() -> None:
    job = JobFacts("0-J1", "acme-1s", "1s", 10_000)
    runs = [run(job, 10_000), run(job, 12_000), run(job, 12_500)]
    found, expected, missing, dups = judge_fires(job, runs, 12_999)
    assert (expected, missing, dups) == (3, 1, 1)
    assert any("no run for the fire" in f for f in found)
    assert any("not a fire time" in f for f in found)


def test_the_plan_is_a_function_of_the_seed() -> None:
    assert plan(5, 30, 500) == plan(5, 30, 500)
    assert plan(5, 30, 500) != plan(6, 30, 500)
    sc = plan(5, 30, 500)
    assert sc.tasks == 500
    assert [e.what for e in sc.events].count("redis") == 1
    assert {w.pool for w in sc.workers} == {"threads", "processes"}
