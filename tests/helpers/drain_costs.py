"""Redis CPU (EVALSHA µs) per task of the drain's scripts, replayed by one client:
lease 42 at a time, complete, then the follow-ups and maintenance at the end;
``rounds`` rounds of ``tasks`` no-op tasks against a Redis of its own, medians
and minima.  Runs against another checkout's code with that checkout's venv
(it only uses the public broker API), so two builds alternate on one server.
docs/benchmarks.md, "The lean engine, second pass".

    redis-server --port 6390 --save "" --appendonly no --daemonize yes
    .venv/bin/python tests/helpers/drain_costs.py 6390 3 20000   # FLUSHALLs that server
"""

from __future__ import annotations

import statistics
import sys

import redis

from redcron import App


def main(port: int, rounds: int, tasks: int) -> None:
    r = redis.Redis(port=port)
    app = App(f"redis://127.0.0.1:{port}/0", prefix="p")

    @app.task(name="t.noop")
    def noop() -> None: ...

    b = app.broker
    res: dict[str, list[float]] = {"lease": [], "complete": [], "after": [], "total": []}

    def evalsha_us() -> int:
        return int(r.info("commandstats")["cmdstat_evalsha"]["usec"])

    for _ in range(rounds):
        r.flushall()
        b.ensure_meta()
        for _ in range(tasks // 1000):
            noop.enqueue_many([() for _ in range(1000)])
        lease = complete = done = 0
        while True:
            a = evalsha_us()
            leases = b.leases.lease(0, "w", 42, 60_000, ["default"])
            lease += evalsha_us() - a
            if not leases:
                break
            a = evalsha_us()
            b.leases.complete(0, "w", [(x.iid, x.epoch, b"\xc0") for x in leases])
            complete += evalsha_us() - a
            done += len(leases)
        a = evalsha_us()
        m = b.maintenance
        if hasattr(m, "follow_all"):  # a build with follow-ups applies them here
            m.follow_all(0)
        m.maintain(0)
        after = evalsha_us() - a
        res["lease"].append(lease / done)
        res["complete"].append(complete / done)
        res["after"].append(after / done)
        res["total"].append((lease + complete + after) / done)
    print(" ".join(f"{k} {statistics.median(v):.2f} (min {min(v):.2f})" for k, v in res.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
