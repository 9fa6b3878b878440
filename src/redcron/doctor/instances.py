"""Instances: each in the place its hash records, and the repair that puts one
back (``lua/doctor_place.lua``).  The places: ready in its stream, waiting on a
timer, leased with the lease tracked, dead in its tenant's DLQ, held on its
job's list, waiting on its concurrency key's list, pending in an active run."""

from __future__ import annotations

import random
from typing import Any

from redcron.doctor.exam import Exam, Fix
from redcron.doctor.logic import TIMER_STATES, instance_problem
from redcron.doctor.scan import FIELDS, Cmd, entry_cmds, instance_fields, names, snapshot, tx
from redcron.engine.connection import scan_keys
from redcron.keys import ATTENTION_HELD, Keys, run_of_task
from redcron.model.states import RUN_ACTIVE, TASK_LEASED, TASK_TERMINAL
from redcron.serde import text as _s

_PLACE_WORDS = {
    "in_place": "in its place on re-check: nothing written",
    "requeued": "added to its ready stream again (tenant on its ring, a worker woken)",
    "entry_pending": "not requeued: its entry is delivered or its lease deadline is ahead",
    "timer_added": "timer set at its due time",
    "lease_indexed": "lease added to the tenant's lease set and the reaper's index",
    "lease_live": "left: the lease's deadline is still ahead",
    "lease_ended": "attempt ended 'lost' as the reaper ends an expired lease",
    "dlq_added": "a new DLQ entry written",
    "held_added": "appended to the job's held list",
    "ckq_added": "appended to its concurrency key's waiting list (woken if a slot is free)",
    "missing": "the instance is gone",
}

Hash = tuple[str, str, dict[str, str]]  # key, instance id, fields


def check_instances(ex: Exam, shard: int) -> tuple[set[str], set[str]]:
    """Judge every instance hash of ``shard``; returns the tenants and queues they name."""
    tenants: set[str] = set()
    queues: set[str] = set()
    head = ex.k.ti(shard, "")
    for keys in scan_keys(ex.r, ex.k.shard(shard), "ti"):
        hashes: list[Hash] = []
        replies = tx(ex.r, [("hmget", key, FIELDS) for key in keys])
        for key, values in zip(keys, replies, strict=True):
            if isinstance(values, Exception):  # not a hash: written by hand
                ex.add(
                    "instance_malformed",
                    shard,
                    key,
                    f"{key} is not a hash ({values}); nothing can move it.",
                )
            elif any(v is not None for v in values):  # else expired meanwhile
                hashes.append((key, key[len(head) :], instance_fields(values)))
        ex.counts["instances"] += len(hashes)
        tenants |= {f["tenant"] for _key, _iid, f in hashes if f.get("tenant")}
        queues |= {f["queue"] for _key, _iid, f in hashes if f.get("queue")}
        _place_batch(ex, shard, hashes)
    return tenants, queues


def _run_of(iid: str) -> str:
    """The run a run's instance id names ('' for a one-off): the hash does not."""
    run_task = run_of_task(iid)
    return run_task[0] if run_task else ""


def _lookups(k: Keys, shard: int, iid: str, f: dict[str, str]) -> list[Cmd]:
    """The reads that say whether the instance is where its hash ``f`` says."""
    state, loc, tenant = f.get("state", ""), f.get("loc", ""), f.get("tenant", "")
    stream = k.q(shard, f.get("queue", ""), tenant, f.get("priority", ""))
    if state == "ready":
        return entry_cmds(stream, loc[2:] if loc.startswith("q:") else "0-0")
    if state in TIMER_STATES:
        return [("zscore", k.timers(shard), iid)]
    if state in TASK_LEASED:
        lease = ("zscore", k.leases(shard, tenant), iid)
        return [lease, *entry_cmds(stream, f.get("lease_entry") or "0-0")]
    if state == "dead":
        eid = loc[4:] if loc.startswith("dlq:") else "0-0"
        return [("xrange", k.dlq(shard, tenant), eid, eid)]
    if state == "held":
        return [("zscore", k.attention(shard), ATTENTION_HELD + iid)]
    if state == "waiting":
        return [("lpos", k.ckwaiting(shard, tenant, f.get("name", ""), f.get("ck", "")), iid)]
    if state == "pending":
        return [("hget", k.run(shard, _run_of(iid)), "state")]
    return []


def _place_batch(ex: Exam, shard: int, hashes: list[Hash]) -> None:
    """Verify each instance is where its hash says, in one snapshot (re-reading
    the hash in it, so what moved since the discovery read is judged afresh)."""
    groups = [[("hmget", key, FIELDS), *_lookups(ex.k, shard, iid, f)] for key, iid, f in hashes]
    for (key, iid, first), (values, *got) in zip(hashes, snapshot(ex.r, groups), strict=True):
        if isinstance(values, Exception) or all(v is None for v in values):
            continue  # expired meanwhile
        f = instance_fields(values)
        if f.get("state", "") != first.get("state", "") or f.get("loc") != first.get("loc"):
            continue  # moved meanwhile: the next run of doctor judges it
        _judge(ex, shard, key, iid, f, got)


def _judge(ex: Exam, shard: int, key: str, iid: str, f: dict[str, str], got: list[Any]) -> None:
    why = instance_problem(f)
    if why is not None:
        ex.add(
            "instance_malformed",
            shard,
            key,
            f"Instance {iid} {why}; no script can move it: fix or delete the hash "
            "by hand (HGETALL it first).",
        )
        return
    state, loc = f["state"], f.get("loc", "")
    if state in TASK_TERMINAL and state != "dead":
        return
    tenant, queue, pr = f["tenant"], f["queue"], f["priority"]
    stream = ex.k.q(shard, queue, tenant, pr)
    t = ex.tenant(shard, tenant)
    place = _fix_place(ex, shard, iid)
    if state == "ready":
        t["ready"] += 1
        entry, pending = got
        if not names(entry, iid):
            ex.add(
                "ready_not_in_stream",
                shard,
                key,
                f"Instance {iid} is ready but no entry of {stream} names it (loc "
                f"{loc!r}): no worker can ever lease it. Repair adds it to the "
                "stream again.",
                place,
            )
        elif pending:
            ex.add(
                "ready_entry_delivered",
                shard,
                key,
                f"Instance {iid} is ready but its entry {loc[2:]} of {stream} was "
                "delivered (is pending) with no lease: the reaper drops that entry; "
                "run doctor again afterwards to requeue it.",
            )
    elif state in TIMER_STATES:
        (score,) = got
        if score is None:
            ex.add(
                "timer_missing",
                shard,
                key,
                f"Instance {iid} is {state} but has no entry in "
                f"{ex.k.timers(shard)}: it would wait forever. Repair sets its timer "
                f"at its due time ({f.get('due') or 'now'}).",
                place,
            )
    elif state in TASK_LEASED:
        t["in_flight_recount"] += 1
        score, entry, pending = got
        if not (names(entry, iid) and pending):
            expired = int(float(f.get("deadline") or 0)) <= ex.now
            ex.add(
                "lease_entry_missing",
                shard,
                key,
                f"Instance {iid} is {state} (worker {f.get('worker', '?')}) but its "
                f"lease entry {f.get('lease_entry') or '(none)'} is not pending in "
                f"{stream}: the reaper can never see this lease. "
                + (
                    "Its deadline has passed: repair ends the attempt as the reaper "
                    "would (retry or DLQ)."
                    if expired
                    else "Its deadline is still ahead: the worker may still report; run "
                    "doctor again after the deadline."
                ),
                place if expired else None,
            )
        elif score is None:
            ex.add(
                "lease_missing",
                shard,
                key,
                f"Instance {iid} holds a lease but is not in "
                f"{ex.k.leases(shard, tenant)}: tenant {tenant}'s cap undercounts "
                "its in-flight work. Repair adds it at its deadline.",
                place,
            )
    elif state == "dead":
        (entry,) = got
        if not names(entry, iid):
            ex.add(
                "dlq_entry_missing",
                shard,
                key,
                f"Instance {iid} is dead but {ex.k.dlq(shard, tenant)} has no entry "
                f"{loc[4:] or '?'} for it: dlq list cannot show it. Repair writes a new "
                "DLQ entry.",
                place,
            )
    elif state == "held":
        (score,) = got
        if score is None:
            ex.add(
                "held_missing",
                shard,
                key,
                f"Instance {iid} is held but not in {ex.k.attention(shard)} as "
                f"{ATTENTION_HELD}{iid}: closing the breaker would never release it. "
                "Repair adds it.",
                place,
            )
    elif state == "waiting":
        (pos,) = got
        if pos is None:
            waits = ex.k.ckwaiting(shard, tenant, f.get("name", ""), f.get("ck", ""))
            ex.add(
                "waiting_missing",
                shard,
                key,
                f"Instance {iid} waits for a slot of its concurrency key but is not in "
                f"{waits}: no freed slot would ever wake it. Repair appends it.",
                place,
            )
    elif state == "pending":
        (run_state,) = got
        if run_state is None or _s(run_state) not in RUN_ACTIVE:
            ex.add(
                "pending_without_run",
                shard,
                key,
                f"Instance {iid} is pending but its run {f.get('run') or '?'} is "
                f"{'gone' if run_state is None else _s(run_state)}: it can never "
                "become ready. Cancel it (redcron task cancel) or delete the hash.",
            )


def _fix_place(ex: Exam, shard: int, iid: str) -> Fix:
    def fix() -> tuple[bool, str]:
        word = _s(ex.call("doctor_place", shard, [iid, ex.now_arg(), random.random()]))
        code, colon, now = word.partition(":")
        done = word not in ("entry_pending", "lease_live", "missing")
        return done, _PLACE_WORDS.get(code, word) + (f" (now {now})" if colon else "")

    return fix
