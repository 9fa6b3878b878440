"""Jobs and the schedule: an active job with a next fire is scheduled, a
paused one is not, and every schedule entry names a job.  A job the beat
parked (``parked_at`` set: it could not plan or fire it) is off the schedule on
purpose until it is updated or resumed, so it is not a missing entry.  Repair:
``lua/doctor_schedule.lua`` (schedule at the next fire plus the job's jitter,
or drop the entry).  Likewise the open-breaker index (the ``breaker:<job id>``
members of ``attention``) lists exactly the jobs whose breaker is open or in
trial (``lua/doctor_breaker.lua``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from redcron.doctor.exam import Exam, Fix
from redcron.doctor.scan import BATCH, Cmd, snapshot, zpages
from redcron.engine.connection import scan_keys
from redcron.keys import ATTENTION_BREAKER, prefix_range
from redcron.model.jobs import spec_from_json
from redcron.schedule.jitter import due_ms, tenant_jitter_s
from redcron.serde import text as _s

_SCHEDULE_WORDS = {
    "added": "scheduled at the job's next fire",
    "dropped": "removed from the schedule",
    "in_place": "consistent on re-check: nothing written",
    "changed": "the job changed meanwhile: nothing written, run doctor again",
}

_BREAKER_WORDS = {
    "added": "listed in the open-breaker index",
    "dropped": "removed from the open-breaker index",
    "in_place": "consistent on re-check: nothing written",
}

#: "version": every job hash has it (the lean layout has no "id", issue 28)
_JOB_FIELDS = ["version", "tenant", "paused", "next_fire", "spec", "breaker", "parked_at", "name"]
#: breaker states the open-breaker index lists
_OPEN = ("open", "trial")


def check_jobs(ex: Exam, shard: int) -> None:
    k, sk, bk = ex.k, ex.k.schedule(shard), ex.k.attention(shard)
    head = k.job(shard, "")
    for keys in scan_keys(ex.r, k.shard(shard), "job"):
        groups: list[list[Cmd]] = [
            [
                ("hmget", key, _JOB_FIELDS),
                ("zscore", sk, key[len(head) :]),
                ("zscore", bk, ATTENTION_BREAKER + key[len(head) :]),
            ]
            for key in keys
        ]
        for key, (values, score, listed) in zip(keys, snapshot(ex.r, groups), strict=True):
            if isinstance(values, Exception) or values[0] is None:
                continue
            ex.counts["jobs"] += 1
            _version, tenant, paused, nxt, spec, breaker, parked, name = (
                _s(v) if v else "" for v in values
            )
            job_id = key[len(head) :]
            if breaker in _OPEN and listed is None:
                ex.add(
                    "breaker_index_missing",
                    shard,
                    bk,
                    f"Job {job_id} ({key}) has its breaker {breaker} but is not in {bk}: "
                    "the dashboard does not show it among the open breakers. Repair "
                    "lists it.",
                    _fix_breaker(ex, shard, job_id),
                )
            if paused != "1" and nxt and score is None and not parked:
                ex.add(
                    "schedule_entry_missing",
                    shard,
                    sk,
                    f"Job {job_id} ({key}) is active with its next fire at {nxt} ms "
                    f"but is not in {sk}: it will never fire again. Repair schedules "
                    "it at that fire (plus its jitter).",
                    _fix_schedule(ex, shard, job_id, tenant, nxt, spec, name),
                )
            elif paused == "1" and score is not None:
                ex.add(
                    "schedule_entry_paused",
                    shard,
                    sk,
                    f"Job {job_id} ({key}) is paused but still in {sk}. Repair takes "
                    "it off the schedule.",
                    _fix_schedule(ex, shard, job_id, tenant, "", ""),
                )
    for page in zpages(ex.r, sk):
        ex.counts["schedule_entries"] += len(page)
        groups = [[("zscore", sk, m), ("exists", k.job(shard, m))] for m, _sc in page]
        for (job_id, _sc), (score, exists) in zip(page, snapshot(ex.r, groups), strict=True):
            if score is not None and not exists:
                ex.add(
                    "schedule_entry_orphan",
                    shard,
                    sk,
                    f"{sk} schedules job {job_id}, which does not exist "
                    f"({k.job(shard, job_id)}): the beat would try it at every "
                    "pass. Repair removes the entry.",
                    _fix_schedule(ex, shard, job_id, "", "", ""),
                )


def check_breaker_index(ex: Exam, shard: int) -> None:
    """Every entry of the open-breaker index names a job whose breaker is open."""
    k, bk = ex.k, ex.k.attention(shard)
    for page in _lex_pages(ex, bk, ATTENTION_BREAKER):
        groups: list[list[Cmd]] = [
            [("zscore", bk, ATTENTION_BREAKER + job_id), ("hget", k.job(shard, job_id), "breaker")]
            for job_id in page
        ]
        for job_id, (score, breaker) in zip(page, snapshot(ex.r, groups), strict=True):
            if score is not None and (_s(breaker) if breaker else "") not in _OPEN:
                ex.add(
                    "breaker_index_stale",
                    shard,
                    bk,
                    f"{bk} lists job {job_id}, whose breaker is "
                    f"{_s(breaker) if breaker else 'closed (or the job is gone)'}: the "
                    "dashboard shows it among the open breakers. Repair removes the entry.",
                    _fix_breaker(ex, shard, job_id),
                )


def _lex_pages(ex: Exam, key: str, prefix: str) -> Iterator[list[str]]:
    """Pages of the ids after ``prefix`` of the members of ZSET ``key`` (all
    scored 0) that start with it, in order."""
    low, high = prefix_range(prefix)
    while True:
        page = [_s(m) for m in ex.r.zrangebylex(key, low, high, 0, BATCH)]
        if not page:
            return
        yield [m[len(prefix) :] for m in page]
        if len(page) < BATCH:
            return
        low = "(" + page[-1]


def _fix_breaker(ex: Exam, shard: int, job_id: str) -> Fix:
    def fix() -> tuple[bool, str]:
        word = _s(ex.call("doctor_breaker", shard, [job_id]))
        return True, _BREAKER_WORDS.get(word, word)

    return fix


def _fix_schedule(
    ex: Exam, shard: int, job_id: str, tenant: str, nxt: str, spec: str, name: str = ""
) -> Fix:
    """Schedule ``job_id`` at nominal fire ``nxt`` (plus its jitter), or off the
    schedule when ``nxt`` is empty."""

    def fix() -> tuple[bool, str]:
        due: Any = ""
        if nxt:
            default = tenant_jitter_s(ex.r.hget(ex.k.tenant(shard, tenant), "jitter_s"))
            due = due_ms(job_id, spec_from_json(spec, tenant, name).jitter_s, int(nxt), default)
        word = _s(ex.call("doctor_schedule", shard, [job_id, nxt, due]))
        return word != "changed", _SCHEDULE_WORDS.get(word, word)

    return fix
