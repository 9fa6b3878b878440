"""Records parse decoded hashes without Redis; one serializer prints them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import msgpack

from redcron.model import (
    AttemptRecord,
    DlqEntry,
    Event,
    ExpiredTask,
    JobChange,
    JobRecord,
    RunRecord,
    TaskRecord,
    TenantLoad,
    to_json,
)
from redcron.model.fields import TI_DEFAULTS
from redcron.model.records import epoch_ms, from_ms
from redcron.model.serialize import dumps, iso
from redcron.model.states import RunState, TaskState

T0 = 1_796_013_506_183  # 2026-11-30T04:38:26.183Z
T0_DT = datetime.fromtimestamp(T0 / 1000, tz=UTC)


def ti_hash(**extra: str | bytes) -> dict[str, str | bytes]:
    fields: dict[str, str | bytes] = {
        "id": "0-01ABC", "name": "t.add", "kind": "python",
        "args": msgpack.packb([[2, 3], {}]), "queue": "default", "tenant": "acme",
        "priority": "high", "timeout_ms": "1500", "max_attempts": "3", "retry_base_ms": "1000",
        "retry_cap_ms": "60000", "result_ttl_s": "86400", "created": str(T0), "attempt": "2",
        "epoch": "2", "budget": "0", "state": "succeeded", "loc": "", "due": "",
        "worker": "w2", "deadline": "", "ended": str(T0 + 2000), "error": "ValueError: boom",
        "result": msgpack.packb(5),
        "a:1:worker": "w1", "a:1:leased": str(T0), "a:1:started": str(T0 + 1),
        "a:1:ended": str(T0 + 10), "a:1:outcome": "failed", "a:1:error": "ValueError: boom",
        "a:1:exit": "1",
        "a:2:worker": "w2", "a:2:leased": str(T0 + 1000), "a:2:ended": str(T0 + 2000),
        "a:2:outcome": "succeeded",
    }  # fmt: skip
    fields.update(extra)
    return fields


def test_task_record_from_fields() -> None:
    rec = TaskRecord.from_fields(ti_hash(), shard=0)
    assert (rec.id, rec.name, rec.kind, rec.queue, rec.tenant) == (
        "0-01ABC", "t.add", "python", "default", "acme",
    )  # fmt: skip
    assert rec.state is TaskState.SUCCEEDED and rec.state == "succeeded"
    assert (rec.priority, rec.attempt, rec.max_attempts, rec.budget) == ("high", 2, 3, 0)
    assert rec.created_at == T0_DT
    assert rec.created_at.tzinfo is UTC
    assert rec.due_at is None and rec.deadline_at is None  # '' is unset
    assert rec.timeout_s == 1.5
    assert rec.cpu is None and rec.mem is None
    assert rec.run_id is None and rec.task is None and rec.depends_on == ()
    assert rec.decoded_args() == [[2, 3], {}]
    assert rec.decoded_result() == 5
    first, second = rec.attempts
    assert first == AttemptRecord(
        number=1,
        worker="w1",
        leased_at=T0_DT,
        started_at=datetime.fromtimestamp((T0 + 1) / 1000, tz=UTC),
        ended_at=datetime.fromtimestamp((T0 + 10) / 1000, tz=UTC),
        outcome="failed",
        error="ValueError: boom",
        exit_code=1,
    )
    assert (second.number, second.outcome, second.started_at) == (2, "succeeded", None)


def test_a_lean_hash_reads_as_the_full_one_an_older_version_wrote() -> None:
    """The instance hash leaves out its id (the key's), fields at their default,
    and once succeeded its place, lease, holder and its last attempt's outcome and
    end (the instance's state and ended): read with the id its key names, it
    gives the record the full hash (still in a deployed Redis) gives."""
    full = ti_hash(timeout_ms="0", retry_base_ms="1000", retry_cap_ms="3600000",
                   result_ttl_s="0", deadline="", lease_entry="")  # fmt: skip
    gone = ("id", "worker", "loc", "due", "deadline", "lease_entry", *TI_DEFAULTS,
            "a:2:outcome", "a:2:ended")  # fmt: skip
    lean = {k: v for k, v in full.items() if k not in gone}
    old, new = TaskRecord.from_fields(full, 0), TaskRecord.from_fields(lean, 0, "0-01ABC")
    assert new == old
    assert (new.id, new.worker, new.budget, new.timeout_s) == ("0-01ABC", "w2", 0, None)
    assert (new.attempts[1].outcome, new.attempts[1].ended_at) == ("succeeded", new.ended_at)
    # a run's task: its id says its run and its name in the DAG
    iid = "0-J@1000/load"
    old = TaskRecord.from_fields({**full, "id": iid, "run": "0-J@1000", "task": "load"}, 0)
    assert TaskRecord.from_fields(lean, 0, iid) == old
    assert (old.run_id, old.task) == ("0-J@1000", "load")


def test_only_a_succeeded_instances_last_attempt_takes_its_outcome_from_the_state() -> None:
    """An attempt without an outcome is one still running, unless it is the last
    of a succeeded instance (whose state and ended say its outcome and end)."""
    last = ("a:2:outcome", "a:2:ended")
    running = {k: v for k, v in ti_hash(state="running").items() if k not in last}
    rec = TaskRecord.from_fields(running, 0)
    assert (rec.attempts[1].outcome, rec.attempts[1].ended_at) == (None, None)
    # an earlier attempt of a succeeded instance keeps what it recorded
    lean = {k: v for k, v in ti_hash().items() if k not in last}
    rec = TaskRecord.from_fields(lean, 0)
    assert [a.outcome for a in rec.attempts] == ["failed", "succeeded"]
    assert [a.ended_at for a in rec.attempts] == [from_ms(T0 + 10), from_ms(T0 + 2000)]


def test_short_attempt_field_names_read_as_the_long_ones_an_older_version_wrote() -> None:
    """a:<n>:w, :l, :s are a:<n>:worker, :leased, :started (issue 19 §4)."""
    long = ti_hash()
    renames = {"worker": "w", "leased": "l", "started": "s"}
    short: dict[str, str | bytes] = {}
    for k, v in long.items():
        head, _, name = k.rpartition(":")
        short[f"{head}:{renames[name]}" if head.startswith("a:") and name in renames else k] = v
    assert "a:1:w" in short and "a:1:worker" not in short
    assert TaskRecord.from_fields(short, 0) == TaskRecord.from_fields(long, 0)
    a1 = TaskRecord.from_fields(short, 0).attempts[0]
    assert (a1.worker, a1.leased_at, a1.started_at) == ("w1", from_ms(T0), from_ms(T0 + 1))


def test_task_record_accepts_bytes_fields_and_run_fields() -> None:
    raw = {k: v if isinstance(v, bytes) else v.encode() for k, v in ti_hash().items()}
    raw.update({"run": b"0-J@1", "task": b"load", "deps": b"a,b", "cpu": b"0.5", "mem": b"1024"})
    rec = TaskRecord.from_fields(raw, shard=3)
    assert (rec.run_id, rec.task, rec.depends_on) == ("0-J@1", "load", ("a", "b"))
    assert (rec.cpu, rec.mem, rec.shard) == (0.5, 1024, 3)
    assert rec.attempts[0].worker == "w1"


def test_task_record_without_result_or_timeout() -> None:
    rec = TaskRecord.from_fields(ti_hash(result="", timeout_ms="0", state="ready"), shard=0)
    assert rec.result is None and rec.decoded_result() is None
    assert rec.timeout_s is None
    assert rec.state is TaskState.READY


def test_a_hand_edited_state_or_attempt_field_is_shown_not_raised() -> None:
    # TaskState("bogus") raised ValueError: task show, the API and the dashboard failed
    rec = TaskRecord.from_fields(ti_hash(state="bogus", **{"a:x:outcome": "?", "a:": "?"}), 0)
    assert rec.state == "bogus" and not isinstance(rec.state, TaskState)
    assert [a.number for a in rec.attempts] == [1, 2]
    assert json.loads(dumps(rec))["state"] == "bogus"
    assert TaskRecord.from_fields(ti_hash(state=""), 0).state == ""
    run = RunRecord.from_fields(run_hash(state="weird"))
    assert run.state == "weird" and json.loads(dumps(run))["state"] == "weird"


def test_to_json_formats() -> None:
    rec = TaskRecord.from_fields(ti_hash(), shard=0)
    data = to_json(rec)
    assert data["created_at"] == iso(T0_DT) == "2026-11-30T04:38:26.183Z"
    assert data["state"] == "succeeded"
    assert data["attempt"] == 2 and data["timeout_s"] == 1.5
    assert data["args"] == [[2, 3], {}] and data["result"] == 5
    assert data["due_at"] is None
    assert data["attempts"][0]["exit_code"] == 1
    assert data["attempts"][1]["ended_at"].endswith("Z")
    assert json.loads(dumps(rec)) == data  # JSON-able as it is


def test_to_json_marks_undecodable_payloads() -> None:
    rec = TaskRecord.from_fields(ti_hash(args=b"\xc1\xc1"), shard=0)
    assert to_json(rec)["args"] == {"undecodable": "2 bytes"}


def test_to_json_spells_non_finite_floats_as_strings_so_output_stays_json() -> None:
    """msgpack keeps inf and NaN (from the Python API); JSON has no number for them."""
    odd = [float("inf"), float("-inf"), float("nan"), 1.5]
    rec = TaskRecord.from_fields(ti_hash(result=msgpack.packb({"r": odd})), shard=0)
    want = ["Infinity", "-Infinity", "NaN", 1.5]
    assert to_json(rec)["result"] == {"r": want}
    assert to_json({"plain": odd}) == {"plain": want}
    text = dumps(rec)  # strict: json.dumps(allow_nan=False) would raise on a float left over
    assert json.loads(text, parse_constant=lambda word: 1 / 0)["result"] == {"r": want}


def test_to_json_times_always_have_milliseconds() -> None:
    assert iso(datetime(2026, 11, 30, 7, tzinfo=UTC)) == "2026-11-30T07:00:00.000Z"


def run_hash(**extra: str) -> dict[str, str]:
    fields = {
        "id": "0-J@1000", "job": "0-J", "job_name": "nightly", "tenant": "default",
        "state": "running", "scheduled_for": str(T0), "trigger": "manual",
        "created": str(T0), "started": str(T0 + 500), "total": "3", "n_done": "1",
        "n_succeeded": "1", "n_failed": "0", "n_cancelled": "0",
        "tasks": "extract,transform,load", "keep_s": "0", "params": '{"n": 3}',
    }  # fmt: skip
    fields.update(extra)
    return fields


def test_a_lean_run_hash_reads_as_the_full_one_an_older_version_wrote() -> None:
    """A run hash leaves out its id and job (its key's ``<job id>@...`` says both),
    empty params and counters at 0: read with the id its key names, it is the
    full hash's record."""
    full = run_hash(params="")
    gone = ("id", "job", "params", "n_failed", "n_cancelled")
    lean = {k: v for k, v in full.items() if k not in gone}
    new = RunRecord.from_fields(lean, run_id="0-J@1000")
    assert new == RunRecord.from_fields(full)
    assert (new.id, new.job_id, new.params) == ("0-J@1000", "0-J", None)


def test_run_record_from_fields() -> None:
    run = RunRecord.from_fields(run_hash())
    assert run.state is RunState.RUNNING
    assert (run.job_id, run.job_name, run.trigger) == ("0-J", "nightly", "manual")
    assert (run.total, run.done, run.succeeded, run.failed) == (3, 1, 1, 0)
    assert run.task_names == ("extract", "transform", "load")
    assert run.tasks is None  # a listing does not read the tasks
    assert run.ended_at is None and run.duration_s is None
    assert run.decoded_params() == {"n": 3}
    assert not run.cancel_requested
    ended = RunRecord.from_fields(run_hash(ended=str(T0 + 2500), state="succeeded"))
    assert ended.duration_s == 2.0


def test_run_record_json_holds_params_and_tasks() -> None:
    task = TaskRecord.from_fields(ti_hash(task="extract"), shard=0)
    run = RunRecord.from_fields(run_hash(), tasks=(task, ExpiredTask("load")))
    data = to_json(run)
    assert data["params"] == {"n": 3}
    assert data["started_at"] == iso(datetime.fromtimestamp((T0 + 500) / 1000, tz=UTC))
    assert [t["state"] for t in data["tasks"]] == ["succeeded", "expired"]
    assert data["tasks"][1] == {"task": "load", "state": "expired"}


def job_hash(**extra: str) -> dict[str, str]:
    fields = {
        "id": "0-J", "tenant": "default", "name": "nightly", "version": "2",
        "spec": json.dumps({"cron": "0 2 * * *", "name": "nightly"}),
        "template": json.dumps([{"task": "extract"}, {"task": "load"}]),
        "trigger_sig": json.dumps(["0 2 * * *", None, None, "Europe/Berlin"]),
        "next_fire": str(T0), "paused": "0", "overlap": "skip", "keep_runs": "100",
        "keep_s": "604800", "pause_after_failures": "0", "consecutive_failures": "1",
        "created": str(T0 - 1000), "updated": str(T0 - 1000), "args:extract": "\x90",
        "breaker_ratio": "0.5", "breaker_min": "10", "breaker_window_s": "300",
        "breaker_cooldown_s": "60",
    }  # fmt: skip
    fields.update(extra)
    return fields


def test_job_record_from_fields() -> None:
    job = JobRecord.from_fields(job_hash(), shard=0, scheduled_due_ms=T0 + 7)
    assert (job.id, job.name, job.version, job.paused) == ("0-J", "nightly", 2, False)
    assert (job.trigger, job.cron, job.every, job.at, job.tz) == (
        "cron 0 2 * * *", "0 2 * * *", None, None, "Europe/Berlin",
    )  # fmt: skip
    assert job.task_order == ("extract", "load")
    assert job.next_fire == T0_DT
    assert job.scheduled_due == datetime.fromtimestamp((T0 + 7) / 1000, tz=UTC)
    assert job.breaker == "closed" and job.breaker_until is None
    assert (job.breaker_ratio, job.breaker_min_attempts) == (0.5, 10)
    assert job.consecutive_failures == 1 and job.fires_skipped == 0
    data = to_json(job)
    assert data["spec"] == {"cron": "0 2 * * *", "name": "nightly"}
    assert data["next_fire"] == iso(T0_DT)


def test_job_record_paused_has_no_next_fire() -> None:
    job = JobRecord.from_fields(job_hash(paused="1", paused_reason="3 failed runs"), shard=0)
    assert job.paused and job.paused_reason == "3 failed runs"
    assert job.parked_reason is None and job.parked_at is None
    parked = JobRecord.from_fields(job_hash(parked_reason="bad tz", parked_at="1000"), shard=0)
    assert parked.parked_reason == "bad tz" and parked.parked_at == from_ms(1000)
    assert job.next_fire is None and job.scheduled_due is None


def test_job_record_triggers() -> None:
    every = JobRecord.from_fields(
        job_hash(trigger_sig=json.dumps([None, "30s", None, "UTC"])), shard=0
    )
    assert every.trigger == "every 30s"
    manual = JobRecord.from_fields(job_hash(trigger_sig=json.dumps([None, None, None, "UTC"])), 0)
    assert manual.trigger == "manual"
    naive = JobRecord.from_fields(
        job_hash(trigger_sig=json.dumps([None, None, "2026-07-01T12:00:00", "Europe/Berlin"])), 0
    )
    assert naive.at == datetime(2026, 7, 1, 10, tzinfo=UTC)  # CEST is UTC+2
    assert naive.trigger == "at 2026-07-01T10:00:00Z"


def test_job_change_parse() -> None:
    change = JobChange.parse("acme", "j", [b"0-J", 3, b"updated"])
    assert change == JobChange("0-J", "acme", "j", 3, "updated")
    assert to_json(change) == {
        "id": "0-J", "tenant": "acme", "name": "j", "version": 3, "change": "updated",
    }  # fmt: skip


def test_dlq_entry_event_and_load() -> None:
    entry = DlqEntry.from_fields(
        f"{T0}-0",
        "acme",
        0,
        {"i": "0-01ABC", "name": "t.add", "queue": "default", "attempts": "3",
         "outcome": "failed", "error": "boom", "tail": "a\nb", "at": str(T0)},
    )  # fmt: skip
    assert (entry.task_id, entry.attempts, entry.log_tail) == ("0-01ABC", 3, ("a", "b"))
    data = to_json(entry)
    assert data["dead_at"] == iso(T0_DT) and data["attempts"] == 3
    assert "i" not in data

    event = Event.from_fields(f"{T0}-1", 0, {"type": "breaker_opened", "job": "0-J",
                                             "at": str(T0), "detail": ""})  # fmt: skip
    assert (event.type, event.job_id, event.at, event.detail) == (
        "breaker_opened", "0-J", T0_DT, None,
    )  # fmt: skip
    assert to_json(TenantLoad("acme", 0, 2, 1, 0, 0)) == {
        "tenant": "acme", "shard": 0, "ready": 2, "in_flight": 1, "delayed": 0, "dlq": 0,
    }  # fmt: skip


def test_epoch_ms_is_the_exact_inverse_of_from_ms() -> None:
    for ms in (0, 1, T0, T0 + 999, 4_102_444_800_001):
        dt = from_ms(ms)
        assert dt is not None and epoch_ms(dt) == ms
