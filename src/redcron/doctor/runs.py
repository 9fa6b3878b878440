"""Runs and the jobs' active sets: an active set lists only active runs, every
active run is in its job's set, has all its tasks, counts them as they are
(``run_recount``) and can move on (``run_progress``).  Repair:
``lua/doctor_run.lua`` (recount, end, fan in, fix the active set)."""

from __future__ import annotations

from typing import Any

from redcron.doctor.exam import Exam, Fix
from redcron.doctor.logic import run_progress, run_recount
from redcron.doctor.scan import Cmd, pipelined, snapshot, tx
from redcron.engine.connection import scan_keys
from redcron.keys import job_of_run
from redcron.model.states import RUN_ACTIVE
from redcron.serde import text as _s

_RUN_WORDS = {
    "recounted": "counters and active set rewritten from the tasks",
    "in_place": "consistent on re-check",
    "gone": "run gone: removed from the job's active set",
    "ended": "run ended: removed from the job's active set",
    "task_missing": "a task has no hash: nothing rewritten",
}

_RUN_FIELDS = [
    "state",
    "job",
    "tasks",
    "total",
    "n_done",
    "n_succeeded",
    "n_failed",
    "n_cancelled",
]


def check_runs(ex: Exam, shard: int) -> None:
    _check_active_sets(ex, shard)
    head = ex.k.run(shard, "")
    for keys in scan_keys(ex.r, ex.k.shard(shard), "run"):
        runs = []
        replies = pipelined(ex.r, [("hmget", key, ["state", "tasks", "mapped"]) for key in keys])
        for key, values in zip(keys, replies, strict=True):
            if isinstance(values, Exception) or values[0] is None:
                continue  # not a hash, or gone
            if _s(values[0]) in RUN_ACTIVE:
                rid = key[len(head) :]
                tasks = [t for t in _s(values[1] or b"").split(",") if t]
                mapped = [t for t in _s(values[2] or b"").split(",") if t]
                runs.append((key, rid, _with_instances(ex, shard, rid, tasks, mapped)))
        for key, rid, tasks in runs:
            ex.counts["runs_active"] += 1
            # a run id is <job id>@...: its job's active set is read in the same snapshot
            active = ex.k.active(shard, job_of_run(rid))
            cmds: list[Cmd] = [("hmget", key, _RUN_FIELDS), ("sismember", active, rid)]
            cmds += [("hmget", ex.k.ti(shard, f"{rid}/{t}"), ["state", "deps"]) for t in tasks]
            run, member, *rows = tx(ex.r, cmds)
            _judge_run(ex, shard, key, rid, run, (active, bool(member)), tasks, rows)


def _check_active_sets(ex: Exam, shard: int) -> None:
    head = ex.k.active(shard, "")
    for keys in scan_keys(ex.r, ex.k.shard(shard), "active"):
        for key in keys:
            job_id = key[len(head) :]
            members = [_s(m) for m in ex.r.smembers(key)]
            groups = [
                [("sismember", key, m), ("hget", ex.k.run(shard, m), "state")] for m in members
            ]
            for rid, (member, state) in zip(members, snapshot(ex.r, groups), strict=True):
                if member and (state is None or _s(state) not in RUN_ACTIVE):
                    what = "gone" if state is None else _s(state)
                    ex.add(
                        "active_run_ended",
                        shard,
                        key,
                        f"{key} lists run {rid}, which is {what}: the job's overlap "
                        f"policy (skip, buffer_one) holds back every fire of {job_id}."
                        " Repair removes it.",
                        _fix_run(ex, shard, rid),
                    )


def _with_instances(
    ex: Exam, shard: int, rid: str, tasks: list[str], mapped: list[str]
) -> list[str]:
    """``tasks`` and the instances its mapped tasks (``mapped``: the run's field)
    have made, ``<task>[<i>]``, before each (issue 32 §2)."""
    if not mapped:
        return tasks
    made = pipelined(ex.r, [("hget", ex.k.ti(shard, f"{rid}/{t}"), "map_made") for t in mapped])
    count = {t: int(n) for t, n in zip(mapped, made, strict=True) if isinstance(n, bytes | str)}
    out: list[str] = []
    for t in tasks:
        out += [f"{t}[{i}]" for i in range(count.get(t, 0))]
        out.append(t)
    return out


def _judge_run(
    ex: Exam,
    shard: int,
    key: str,
    rid: str,
    run: Any,
    listed: tuple[str, bool],
    tasks: list[str],
    rows: list[Any],
) -> None:
    """``listed``: the job's active set, and whether it lists the run."""
    r = [_s(v) if v is not None else "" for v in run]
    state = r[0]
    if state not in RUN_ACTIVE:
        return  # ended meanwhile
    fix = _fix_run(ex, shard, rid)
    active, member = listed
    if not member:
        ex.add(
            "active_run_missing",
            shard,
            active,
            f"Run {rid} is {state} but not in {active}: the job's overlap policy does "
            "not see it. Repair adds it.",
            fix,
        )
    missing = [t for t, row in zip(tasks, rows, strict=True) if row[0] is None]
    if missing:
        ex.add(
            "run_task_missing",
            shard,
            key,
            f"Run {rid} is {state} but its task(s) {', '.join(missing)} have no hash "
            f"({ex.k.ti(shard, rid + '/' + missing[0])}): the run cannot end. "
            f"Cancel the run (redcron runs cancel {rid}) and look at why they went.",
        )
        return
    states = [_s(row[0]) for row in rows]
    want = run_recount(states)
    # a counter at 0 is left out of the hash: absent reads 0 (total is always written)
    have = (r[3], *(v or "0" for v in r[4:8]))
    wanted = (want.total, want.n_done, want.n_succeeded, want.n_failed, want.n_cancelled)
    if have != tuple(str(x) for x in wanted):
        ex.add(
            "run_counters_wrong",
            shard,
            key,
            f"Run {rid} counts (total, done, succeeded, failed, cancelled) = "
            f"({', '.join(v or '?' for v in have)}) but its tasks say "
            f"{wanted}: it may never end, or end wrongly. Repair recounts it "
            "(and ends it if every task has ended).",
            fix,
        )
    graph = {
        t: (s, [d for d in _s(row[1] or b"").split(",") if d])
        for t, s, row in zip(tasks, states, rows, strict=True)
    }
    can, fanin = run_progress(graph)
    if fanin:
        ex.add(
            "run_stuck",
            shard,
            key,
            f"Run {rid}: task(s) {', '.join(fanin)} are pending though every "
            "dependency succeeded (a fan-in that did not happen). Repair makes them "
            "ready.",
            fix,
        )
    elif not can and want.n_done == want.total:
        ex.add(
            "run_stuck",
            shard,
            key,
            f"Run {rid} is {state} though every task has ended: it should have "
            "ended. Repair ends it.",
            fix,
        )
    elif not can:
        ex.add(
            "run_stuck",
            shard,
            key,
            f"Run {rid} is {state} but no task is ready, leased, waiting or able to "
            f"become ready: it can never end. Cancel it (redcron runs cancel {rid}).",
        )


def _fix_run(ex: Exam, shard: int, rid: str) -> Fix:
    def fix() -> tuple[bool, str]:
        word, readied = ex.call("doctor_run", shard, [rid, ex.now_arg()])
        word = _s(word)
        text = _RUN_WORDS.get(word, word)
        if int(readied):
            text += f"; made {int(readied)} pending task(s) ready"
        return word != "task_missing", text

    return fix
