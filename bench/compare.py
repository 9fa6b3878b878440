"""``python -m bench.compare`` (from a checkout): redcron and its peers (Celery, Dramatiq, Huey,
RQ, arq, BullMQ) on one Redis server, in one run, the systems alternating over
rounds (rotated each round), each with the same task body.

Each system, each round, in a key namespace of its own (deleted after):

1. enqueue (after one untimed noop task: connections made, scripts loaded):
   a tenth of the tasks (at most 2,000) one by one, the rest with the
   system's bulk API if it has one (else one by one, untimed);
2. drain: one worker process started on the full queue; the rate is timed
   from the first body run to the last (the INCR counter polled every 10 ms;
   with ``--body noop`` the first and last tasks are INCR markers), with the
   Redis server's INFO commandstats and INFO cpu and the worker's own CPU
   (its processes' with ``--procs``) over the drain;
3. idle latency: ``--samples`` tasks one at a time, enqueue → start, the same
   worker idle between them.

Then the median of each figure over the rounds and every ratio redcron/peer;
with ``--procs 1,2`` redcron is also measured as ``redcron worker --procs 2``
(a row of its own, in every round), with its ratios to redcron and each peer.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import click
import redis

from bench.compare_stats import (
    command_usec,
    medians,
    parse_commandstats,
    ratios,
    round_order,
    table,
)
from bench.peers import SYSTEMS, counter_key, module
from redcron.cli.bench.fixtures import (
    info_cpu_s,
    p99,
    redis_for_bench,
    tree_cpu_s,
    unlink_matching,
)
from redcron.cli.bench.options import json_option, redis_option
from redcron.cli.worker_procs import MAX_PROCS
from redcron.clock import ulid
from redcron.model import serialize

#: how often the drain's counter is read (each read is one GET, taken out of
#: the commandstats figure)
POLL_S = 0.01
#: a drain that makes no progress for this long has failed
STALL_S = 60.0


def _say(text: str) -> None:
    print(f"bench compare: {text}", file=sys.stderr, flush=True)


def parse_systems(text: str) -> list[str]:
    """``--systems``: comma-separated names of :data:`SYSTEMS`, in that order
    (a name given twice counts once)."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise ValueError(
            f"--systems: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {','.join(SYSTEMS)}"
        )
    return [n for n in SYSTEMS if n in names]


def parse_procs(text: str) -> list[int]:
    """``--procs``: comma-separated worker process counts for redcron (each a row
    of its own), ascending, each once."""
    try:
        counts = sorted({int(n) for n in text.split(",") if n.strip()})
    except ValueError:
        counts = []
    if not counts or not all(1 <= n <= MAX_PROCS for n in counts):
        raise ValueError(f"--procs: give counts from 1 to {MAX_PROCS}, comma-separated (1,2)")
    return counts


def label(name: str, procs: int) -> str:
    """A system's row: ``redcron --procs N`` for redcron with N > 1 processes."""
    return f"{name} --procs {procs}" if procs > 1 else name


def _system(row: str) -> tuple[str, int]:
    """(system, worker processes) of a row named by :func:`label`."""
    name, _sep, procs = row.partition(" --procs ")
    return name, int(procs) if procs else 1


def compare(
    systems: Sequence[str], rounds: int, tasks: int, samples: int, body: str,
    redis_url: str | None, procs: Sequence[int] = (1,),
) -> dict[str, Any]:  # fmt: skip
    """The run (module doc); redcron is a row for each of ``procs`` (worker
    processes: ``redcron worker --procs N``), each measured in every round."""
    entries: dict[str, dict[str, Any]] = {}
    runnable: list[str] = []
    for name in systems:
        mod = module(name)
        why = mod.missing()
        if why:
            _say(f"{name}: skipped: {why}")
            entries[name] = {"skipped": why}
            continue
        for n in procs if name == "redcron" else (1,):
            row = label(name, n)
            entries[row] = {
                **(mod.describe(n) if name == "redcron" else mod.describe()),
                "rounds": [],
            }
            runnable.append(row)
    order = round_order(runnable, rounds)
    with redis_for_bench(redis_url) as url:
        client = redis.Redis.from_url(url)
        try:
            server = client.info("server")
            for r, names in enumerate(order, 1):
                for name in names:
                    _say(f"round {r}/{rounds}: {name} ...")
                    entry = entries[name]
                    try:
                        figures = run_system(name, url, client, tasks, samples, body)
                    except Exception as exc:  # a peer that fails is reported, never fatal
                        _say(f"{name}: round {r} failed: {exc}")
                        entry.setdefault("errors", []).append(f"round {r}: {exc}")
                        continue
                    entry["rounds"].append(figures)
                    _say(f"{name}: {_brief(figures)}")
        finally:
            client.close()
    for name in runnable:
        entries[name]["median"] = medians(entries[name]["rounds"])
    ours = entries.get("redcron", {}).get("median")
    variants = [row for row in runnable if _system(row)[0] == "redcron" and row != "redcron"]
    peers = [row for row in runnable if _system(row)[0] != "redcron"]
    return {
        "body": body,
        "tasks": tasks,
        "samples": samples,
        "rounds": rounds,
        "order": order,
        "machine": {"nproc": os.cpu_count(), "cpu": _cpu_model()},
        "redis": {"version": server.get("redis_version"), "given": redis_url is not None},
        "systems": entries,
        "ratios": {
            name: ratios(ours, entries[name]["median"])
            for name in peers
            if ours and entries[name]["rounds"]
        },
        # each redcron --procs N row against plain redcron and every peer
        "procs_ratios": {
            row: {
                other: ratios(entries[row]["median"], entries[other]["median"])
                for other in (["redcron"] if ours else []) + peers
                if entries[other]["rounds"]
            }
            for row in variants
            if entries[row]["rounds"]
        },
    }


def run_system(
    name: str, url: str, client: redis.Redis, tasks: int, samples: int, body: str
) -> dict[str, Any]:
    """One round of one system (a row of :func:`label`): enqueue, drain, idle latency."""
    system, procs = _system(name)
    mod = module(system)
    ns = f"rcpeer{ulid()[-6:].lower()}"
    session = mod.session(url, ns, procs) if system == "redcron" else mod.session(url, ns)
    try:
        with session as peer:
            ns = peer.ns
            # the drain is timed on the INCR counter; with the noop body, on the
            # system's own count of finished tasks if the adapter has one, else
            # on two INCR markers, the first task and the last (FIFO queues)
            finished: Callable[[], int] | None = getattr(peer, "finished", None)
            own = body == "noop" and finished is not None
            marks = body == "noop" and not own
            singles = min(2_000, max(1, tasks // 10))
            rest = tasks - singles - (2 if marks else 0)
            peer.enqueue("noop", 1, False)  # warm: connected, scripts loaded (not timed)
            if marks:
                peer.enqueue("incr", 1, False)
            one_s = peer.enqueue(body, singles, False)
            bulk_s = peer.enqueue(body, rest, peer.has_bulk) if rest > 0 else 0.0
            if marks:
                peer.enqueue("incr", 1, False)
            if own and finished is not None:
                read, target, poll_cmd = finished, tasks + 1, getattr(peer, "finished_cmd", "")
            else:
                read, target, poll_cmd = _counter(client, ns), (2 if marks else tasks), "get"
            with peer.worker() as proc:
                # the Redis and worker CPU figures start at the first task seen
                # done: the worker's start-up (imports, connections) is not a task's
                start: list[Any] = []

                def at_first() -> None:
                    start.extend([*_stats(client), tree_cpu_s(proc.pid)])

                t_first, c_first, t_last, polls = wait_count(read, target, proc.poll, at_first)
                stats1, cpu1 = _stats(client)
                wcpu1 = tree_cpu_s(proc.pid)
                lat = sorted(peer.latency(samples, _blpop(client)))
    finally:
        # every key whose name holds the namespace (each adapter puts it in all
        # of its keys and job ids)
        unlink_matching(client, f"*{ns}*")
    stats0, cpu0, wcpu0 = start
    measured = max(1, tasks - 1 if marks else target - c_first)
    span = max(1e-9, t_last - t_first)
    body_incrs = 1 if marks else 0 if body == "noop" else measured
    cmd_us = command_usec(stats0, stats1, {"incr": body_incrs, poll_cmd: polls, "info": 2})
    return {
        "enqueue_one_per_s": round(singles / max(1e-9, one_s)),
        "enqueue_bulk_per_s": round(rest / max(1e-9, bulk_s)) if peer.has_bulk and rest else None,
        "drain_per_s": round(measured / span),
        "latency_p50_ms": round(statistics.median(lat), 3),
        "latency_p99_ms": round(p99(lat), 3),
        "redis_cmd_us_per_task": round(cmd_us / measured, 1),
        "redis_cpu_us_per_task": round((cpu1 - cpu0) * 1e6 / measured, 1),
        "worker_cpu_us_per_task": round((wcpu1 - wcpu0) * 1e6 / measured, 1),
    }


def wait_count(
    read: Callable[[], int],
    target: int,
    exited: Callable[[], int | None],
    at_first: Callable[[], None],
) -> tuple[float, int, float, int]:
    """Poll ``read()`` until it reaches ``target``: (time it was first seen above
    zero, its value then, time it reached ``target``, reads made after that);
    ``at_first()`` is called when it is first seen above zero."""
    polls = 0
    t_first: float | None = None
    c_first = 0
    last_value, last_change = 0, time.monotonic()
    while True:
        value = read()
        now = time.perf_counter()
        polls += 1
        if value and t_first is None:
            t_first, c_first, polls = now, value, 0
            at_first()
        if value >= target:
            return (t_first if t_first is not None else now), c_first, now, polls
        if value != last_value:
            last_value, last_change = value, time.monotonic()
        elif time.monotonic() - last_change > STALL_S:
            raise TimeoutError(f"the drain stalled at {value} of {target} for {STALL_S:.0f} s")
        code = exited()
        if code is not None:
            raise RuntimeError(
                f"the worker process exited with code {code} at {value} of {target} "
                "(set RCBENCH_VERBOSE=1 to see its output)"
            )
        time.sleep(POLL_S)


def _counter(client: redis.Redis, ns: str) -> Callable[[], int]:
    key = counter_key(ns)

    def read() -> int:
        return int(client.get(key) or 0)

    return read


def _stats(client: redis.Redis) -> tuple[dict[str, tuple[int, float]], float]:
    stats = parse_commandstats(client.info("commandstats"))
    cpu = client.info("cpu")
    return stats, info_cpu_s(cpu)


def _blpop(client: redis.Redis) -> Callable[[str, float], float | None]:
    def blpop(key: str, timeout: float) -> float | None:
        got = client.blpop([key], timeout=timeout)
        return float(got[1]) if got else None

    return blpop


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _brief(f: dict[str, Any]) -> str:
    bulk = f["enqueue_bulk_per_s"]
    return (
        f"drain {f['drain_per_s']}/s, enqueue {f['enqueue_one_per_s']}/s one by one"
        + ("" if bulk is None else f", {bulk}/s bulk")
        + f", p50/p99 {f['latency_p50_ms']}/{f['latency_p99_ms']} ms"
    )


@click.command("compare")
@click.option("--systems", "system_list", default=",".join(SYSTEMS), show_default=True,
              help="Systems to run, comma-separated.")  # fmt: skip
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="Rounds; the systems alternate within each (medians reported).")  # fmt: skip
@click.option("--tasks", default=20_000, show_default=True, type=click.IntRange(min=10),
              help="Tasks enqueued, then drained by one worker process, each round.")  # fmt: skip
@click.option("--samples", default=100, show_default=True, type=click.IntRange(min=1),
              help="Idle enqueue-to-start latency samples, per system and round.")  # fmt: skip
@click.option(
    "--body",
    type=click.Choice(["incr", "noop"]),
    default="incr",
    show_default=True,
    help="Task body: one Redis INCR on the executing thread's own connection, or nothing.",
)
@click.option("--procs", "procs_list", default="1", show_default=True, metavar="N1,N2",
              help="Worker processes for redcron (redcron worker --procs N), comma-separated: "
              "a row each, measured in every round (1 is the plain redcron row).")  # fmt: skip
@redis_option
@json_option
def main(
    system_list: str,
    rounds: int,
    tasks: int,
    samples: int,
    body: str,
    procs_list: str,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """redcron side by side with Celery, Dramatiq, Huey, RQ, arq and BullMQ on one
    Redis: enqueue rates, drain rate of one worker process, idle latency, Redis
    and worker CPU per task, and each ratio redcron/peer.

    Run from a checkout: python -m bench.compare (make bench-compare ARGS=...).
    The Python peers come from the bench extra (pip install -e '.[bench]');
    BullMQ runs when node and npm are on PATH (installed on first use into
    ~/.cache/redcron/bench-node).  A peer that is missing is skipped with a note.
    """

    if redis_url and "+cluster" in redis_url:
        raise click.BadParameter("the peers need one redis-server, not a cluster",
                                 param_hint="--redis")  # fmt: skip
    try:
        systems = parse_systems(system_list)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--systems: "),
                                 param_hint="--systems") from None  # fmt: skip
    try:
        procs = parse_procs(procs_list)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--procs: "),
                                 param_hint="--procs") from None  # fmt: skip
    result = compare(systems, rounds, tasks, samples, body, redis_url, procs)
    if as_json:
        click.echo(serialize.dumps(result, indent=None))
    else:
        click.echo(table(result))


if __name__ == "__main__":
    main()
