"""What registering idle cron jobs costs, on the ``app.jobs.put_many`` path
(``bench midnight``'s set-up), against a Redis of its own (it FLUSHALLs that
server): wall seconds, the client process's CPU per job, Redis's CPU per job
(``INFO cpu``: the server process's user + system CPU, which counts a script
and any command beside it once; ``INFO commandstats`` counts a command a
script calls both in the script's usec and in its own, so it is given only as
``evalsha_us_per_job``, the scripts' time) and Redis memory per job (``INFO memory`` ``used_memory``
after minus before, over the jobs).  One JSON line per run.

    redis-server --port 6474 --save "" --appendonly no --daemonize yes
    .venv/bin/python tests/helpers/job_put_costs.py 6474 20000
    # the code of another checkout, with the same venv:
    PYTHONPATH=/path/to/other/src .venv/bin/python tests/helpers/job_put_costs.py 6474 20000

``--ab OTHER_SRC`` alternates this checkout's code and OTHER_SRC's, one fresh
process each, ``--rounds`` times per size, and prints each run and then the
medians (what docs/benchmarks.md reports): separate runs on a shared machine
differ by more than some changes do, so the two are measured in turns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FIGURES = (
    "wall_s", "client_cpu_us_per_job", "redis_us_per_job", "evalsha_us_per_job",
    "redis_bytes_per_job",
)  # fmt: skip


def _server_cpu(r: Any) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def measure(port: int, jobs: int, tenants: int = 1000) -> dict[str, float | int | str]:
    # imported here: the --ab driver runs without loading either checkout's code
    import redis

    import redcron
    from redcron import App
    from redcron.cli.bench.midnight import idle_jobs

    r = redis.Redis(port=port)
    r.flushall()
    app = App(f"redis://127.0.0.1:{port}/0")
    app.broker.ensure_meta()
    warm = idle_jobs(1, 1)[0]
    warm.name = "warm-up"
    app.jobs.put_many([warm])  # scripts loaded, connection made
    specs = idle_jobs(jobs, tenants)
    r.config_resetstat()
    mem0 = int(r.info("memory")["used_memory"])
    rcpu0 = _server_cpu(r)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    app.jobs.put_many(specs)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    mem = int(r.info("memory")["used_memory"])
    rcpu = _server_cpu(r) - rcpu0
    evalsha = int(r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))
    out: dict[str, float | int | str] = {
        "code": str(Path(redcron.__file__).parent.parent),
        "jobs": jobs,
        "wall_s": round(wall, 3),
        "client_cpu_us_per_job": round(cpu / jobs * 1e6, 1),
        "redis_us_per_job": round(rcpu / jobs * 1e6, 1),
        "evalsha_us_per_job": round(evalsha / jobs, 1),
        "redis_bytes_per_job": round((mem - mem0) / jobs),
    }
    r.flushall()
    return out


def ab(port: int, other: str, sizes: list[int], rounds: int) -> None:
    here = str(Path(__file__).resolve().parents[2] / "src")
    codes = {"before": other, "after": here}
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for size in sizes:
        for i in range(rounds):
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            for label in order:
                env = {**os.environ, "PYTHONPATH": codes[label]}
                line = subprocess.run(
                    [sys.executable, __file__, str(port), str(size)],
                    env=env, check=True, capture_output=True, text=True,
                ).stdout.strip().splitlines()[-1]  # fmt: skip
                got = json.loads(line)
                print(label, line, flush=True)
                runs.setdefault((label, size), []).append(got)
    for (label, size), got in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0] != "before")):
        med = {f: statistics.median(float(g[f]) for g in got) for f in FIGURES}
        print(json.dumps({"median": label, "jobs": size, "rounds": len(got), **med}))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("jobs", type=int, nargs="*", default=[20_000])
    p.add_argument("--ab", metavar="OTHER_SRC")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    if a.ab:
        ab(a.port, a.ab, a.jobs, a.rounds)
    else:
        for n in a.jobs:
            print(json.dumps(measure(a.port, n)))
