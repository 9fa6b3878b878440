"""Redis CPU per task of each script of the drain path, from one client replaying
a drain (lease 32, start, complete; maintenance every 3,200 tasks) against a
Redis of its own: ``INFO commandstats`` EVALSHA time read around each call, so
each script's share is its own.  docs/benchmarks.md, "The lean engine".

    redis-server --port 6390 --save "" --appendonly no --daemonize yes
    .venv/bin/python tests/helpers/script_costs.py 6390   # FLUSHALLs that server
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import redis

from redcron import App


def main(port: int, tasks: int = 20_000) -> None:
    r = redis.Redis(port=port)
    r.flushall()
    app = App(f"redis://127.0.0.1:{port}/0", prefix="p")

    @app.task(name="t.noop")
    def noop() -> None: ...

    app.broker.ensure_meta()
    for _ in range(tasks // 1000):
        noop.enqueue_many([() for _ in range(1000)])
    b = app.broker
    cost: dict[str, list[int]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        before = r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0)
        out = fn()
        after = r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0)
        c = cost.setdefault(name, [0, 0])
        c[0] += after - before
        c[1] += 1
        return out

    done = 0
    while done < tasks:
        leases = timed("lease", lambda: b.leases.lease(0, "w", 32, 60_000, ["default"]))
        if not leases:
            break
        pairs = [(x.iid, x.epoch) for x in leases]
        timed("start", lambda: b.leases.start(0, "w", pairs))  # noqa: B023 (called at once)
        items = [(x.iid, x.epoch, b"\xc0") for x in leases]
        timed("complete", lambda: b.leases.complete(0, "w", items))  # noqa: B023
        done += len(leases)
        if done % 3200 == 0:
            timed("maintain", lambda: b.maintenance.maintain(0))
    timed("maintain", lambda: b.maintenance.maintain(0))
    for name, (us, n) in cost.items():
        print(f"{name:10s} calls {n:5d}  us/call {us / n:8.1f}  us/task {us / done:6.1f}")
    print(f"all scripts: {sum(v[0] for v in cost.values()) / done:.1f} us/task over {done} tasks")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6390)
