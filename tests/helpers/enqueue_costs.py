"""Redis CPU and client CPU per enqueued task on the ``enqueue_many`` path,
against a Redis of its own (it FLUSHALLs that server): ``INFO commandstats``
EVALSHA time (enqueue_check + enqueue) over ``tasks`` tasks enqueued 1,000 a
call, the client process's CPU for the same calls, and the client CPU of
building one row's script arguments alone (``argv.enqueue`` and redis-py
packing the EVALSHA), per row.  One JSON line per run.

    redis-server --port 6411 --save "" --appendonly no --daemonize yes
    .venv/bin/python tests/helpers/enqueue_costs.py 6411
    # the code of another checkout, with the same venv:
    PYTHONPATH=/path/to/other/src .venv/bin/python tests/helpers/enqueue_costs.py 6411
"""

from __future__ import annotations

import json
import sys
import time

import redis
from redis.connection import Connection

import redcron
from redcron import App
from redcron.engine import argv


def _evalsha_usec(r: redis.Redis) -> tuple[int, int]:
    s = r.info("commandstats").get("cmdstat_evalsha", {})
    return int(s.get("usec", 0)), int(s.get("calls", 0))


def main(port: int, tasks: int = 20_000, per_call: int = 1000) -> dict[str, float]:
    r = redis.Redis(port=port)
    r.flushall()
    app = App(f"redis://127.0.0.1:{port}/0", prefix="p")

    @app.task(name="t.noop")
    def noop(n: int, label: str) -> None: ...

    app.broker.ensure_meta()
    noop.enqueue_many([(0, "warm")])  # scripts loaded, connection made
    r.config_resetstat()
    usec0, calls0 = _evalsha_usec(r)
    cpu0 = time.process_time()
    for b in range(tasks // per_call):
        noop.enqueue_many([(b * per_call + i, "label") for i in range(per_call)])
    cpu = time.process_time() - cpu0
    usec, calls = _evalsha_usec(r)
    # the rows alone: build the ARGV of 256 rows (one enqueue call) and pack it
    rows = [app._row("t.noop", "python", [[i, "label"], {}], noop.options, {}) for i in range(256)]
    conn = Connection()
    rounds = 40
    t0 = time.process_time()
    for _ in range(rounds):
        conn.pack_command("EVALSHA", "0" * 40, 1, "p:{s0}:", *argv.enqueue(rows))
    row_us = (time.process_time() - t0) / (rounds * len(rows)) * 1e6
    packed = conn.pack_command("EVALSHA", "0" * 40, 1, "p:{s0}:", *argv.enqueue(rows))
    out = {
        "code": redcron.__file__,
        "tasks": tasks,
        "redis_evalsha_us_per_task": (usec - usec0) / tasks,
        "evalsha_calls": calls - calls0,
        "client_cpu_us_per_task": cpu / tasks * 1e6,
        "client_argv_us_per_row": row_us,
        "bytes_per_row": sum(len(x) for x in packed) / len(rows),
    }
    r.flushall()
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), *(int(a) for a in sys.argv[2:]))))
