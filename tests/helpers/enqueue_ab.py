"""Paired A/B of enqueue.lua's Redis time per task: the positional-row script
of another checkout (before issue 28 §2) and this checkout's msgpack-row one,
loaded into one Redis and called alternately with 256 rows each, EVALSHA
usec from ``INFO commandstats`` around each call (one client, so the delta is
that call's).  Alternating call by call puts both under the same noise, which
on a shared 2-core machine swamps a comparison of separate runs.  It
FLUSHALLs the server every 20 pairs.

    redis-server --port 6414 --save "" --appendonly no --daemonize yes
    .venv/bin/python tests/helpers/enqueue_ab.py /path/to/before/src 6414 [pairs]
"""

from __future__ import annotations

import os
import statistics as st
import subprocess
import sys
from typing import Any

import redis

from redcron import App
from redcron.clock import ulid
from redcron.engine import argv
from redcron.engine.argv import EnqueueRow

ROWS = 256
SOURCE = "from redcron.engine.scripts import full_source; print(full_source('enqueue'), end='')"


def _source(src: str | None) -> str:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    return subprocess.run(
        [sys.executable, "-c", SOURCE], env=env, check=True, capture_output=True, text=True
    ).stdout


def _rows() -> list[EnqueueRow]:
    return [
        EnqueueRow(iid=f"0-{ulid()}", name="t.noop", kind="python", args=b"\x92\x92\x00\xa5x\x80",
                   queue="default", tenant="default", priority="normal", timeout_ms=0,
                   max_attempts=1, retry_base_ms=1000, retry_cap_ms=3_600_000, delay_ms=0,
                   result_ttl_s=0)
        for _ in range(ROWS)
    ]  # fmt: skip


def _positional(rows: list[EnqueueRow]) -> list[Any]:
    """The layout before issue 28 §2: now, F = 16, then 16 fields a row."""
    out: list[Any] = ["", 16]
    for r in rows:
        out += [*r[:13], "", "", ""]
    return out


def main(before_src: str, port: int, pairs: int = 80) -> None:
    r = redis.Redis(port=port)
    sources = {"before": _source(before_src), "after": _source(None)}
    app = App(f"redis://127.0.0.1:{port}/0", prefix="ab")
    key = app.broker.keys.shard(0)
    sha: dict[str, str] = {}
    took: dict[str, list[float]] = {"before": [], "after": []}
    for i in range(pairs):
        if i % 20 == 0:
            r.flushall()
            app.broker.ensure_meta()
            sha = {name: r.script_load(text) for name, text in sources.items()}
        for name in ("before", "after") if i % 2 else ("after", "before"):
            rows = _rows()
            args = _positional(rows) if name == "before" else argv.enqueue(rows)
            u0 = r.info("commandstats")["cmdstat_evalsha"]["usec"]
            assert r.evalsha(sha[name], 1, key, *args) == ROWS
            u1 = r.info("commandstats")["cmdstat_evalsha"]["usec"]
            took[name].append((u1 - u0) / ROWS)
    for name, xs in took.items():
        print(f"{name}: median {st.median(xs):.2f} us/task over {len(xs)} calls")
    print(f"after/before: {st.median(took['after']) / st.median(took['before']):.3f}")
    r.flushall()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *(int(a) for a in sys.argv[3:]))
