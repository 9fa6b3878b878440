"""BullMQ 5 (Node): one worker process at concurrency 32, the jobs' bodies on
one ioredis connection of the worker's own (Node runs them on one thread),
``Queue.add`` and ``Queue.addBulk``; completed jobs kept (removeOnComplete
off, the default).

Runs whenever ``node`` and ``npm`` are on PATH: the first use installs the
``bullmq`` package from the npm registry into a cache folder
(``$XDG_CACHE_HOME/redcron/bench-node``, else ``~/.cache/redcron/bench-node``)
and writes this module's own producer/worker script (:data:`SCRIPT`) beside
it.  Enqueue rates and latencies are timed inside Node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from bench.peers import PEER_SLOTS, Blpop
from bench.peers._proc import process

NAME = "bullmq"
PACKAGE = "bullmq@5"

#: the producer and worker, in one script: ``node bench.mjs MODE URL NS [ARGS]``
SCRIPT = """\
// written by python -m bench.compare (bench/peers/bullmq_peer.py in the redcron checkout)
import { Queue, Worker } from "bullmq";
import IORedis from "ioredis";

const [mode, url, ns, ...args] = process.argv.slice(2);
const QUEUE = "bench";
const counter = `${ns}:bench:counter`;
const stamps = `${ns}:bench:stamps`;
const conn = () => new IORedis(url, { maxRetriesPerRequest: null });
const nowS = () => (performance.timeOrigin + performance.now()) / 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

if (mode === "worker") {
  const body = conn();
  const worker = new Worker(
    QUEUE,
    async (job) => {
      if (job.name === "incr") await body.incr(counter);
      else if (job.name === "now") await body.rpush(stamps, String(nowS()));
    },
    { connection: conn(), prefix: ns, concurrency: Number(args[0]) },
  );
  const stop = async () => { await worker.close(); await body.quit(); process.exit(0); };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
} else if (mode === "enqueue") {
  const [kind, count, bulk] = [args[0], Number(args[1]), args[2] === "1"];
  const queue = new Queue(QUEUE, { connection: conn(), prefix: ns });
  await queue.waitUntilReady();
  const t0 = performance.now();
  if (bulk) {
    for (let i = 0; i < count; i += 1000) {
      const n = Math.min(1000, count - i);
      await queue.addBulk(Array.from({ length: n }, () => ({ name: kind, data: {} })));
    }
  } else {
    for (let i = 0; i < count; i++) await queue.add(kind, {});
  }
  const seconds = (performance.now() - t0) / 1000;
  await queue.close();
  console.log(JSON.stringify({ seconds }));
  process.exit(0);
} else if (mode === "latency") {
  const samples = Number(args[0]);
  const queue = new Queue(QUEUE, { connection: conn(), prefix: ns });
  const blk = conn();
  const one = async () => {
    const t0 = nowS();
    await queue.add("now", {});
    const got = await blk.blpop(stamps, 60);
    if (!got) throw new Error("no task started within 60 s");
    return (Number(got[1]) - t0) * 1000;
  };
  await one();  // warm up
  const out = [];
  for (let i = 0; i < samples; i++) { await sleep(5); out.push(await one()); }
  await queue.close();
  await blk.quit();
  console.log(JSON.stringify(out));
  process.exit(0);
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
"""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "redcron" / "bench-node"


def _installed(folder: Path) -> str | None:
    """bullmq's version in ``folder``, None if not installed there."""
    try:
        meta = json.loads((folder / "node_modules" / "bullmq" / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return str(meta.get("version"))


def missing() -> str | None:
    """None once node, npm and bullmq are ready (installing bullmq on first use)."""
    if not shutil.which("node") or not shutil.which("npm"):
        return "node and npm are not on PATH (BullMQ runs on Node)"
    folder = cache_dir()
    if _installed(folder) is None:
        folder.mkdir(parents=True, exist_ok=True)
        print(f"installing {PACKAGE} from the npm registry into {folder} ...", file=sys.stderr)
        try:
            done = subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), PACKAGE],
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"npm install {PACKAGE} failed: {exc}"
        if done.returncode != 0 or _installed(folder) is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"npm install {PACKAGE} into {folder} failed: {tail[0]}"
    return None


def describe() -> dict[str, str]:
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return {
        "version": f"bullmq {_installed(cache_dir())}, node {node.stdout.strip()}",
        "config": f"one worker process (Node), concurrency {PEER_SLOTS}, bodies on one ioredis "
        "connection of the worker's, Queue.add / Queue.addBulk, default job options",
        "guarantee": "at least once: a job is locked with a token the worker renews while it "
        "runs (lockDuration 30 s); a stalled job goes back to wait and a completion with a "
        "stale token is refused (fenced); completed jobs kept (removeOnComplete off)",
    }


def _script() -> Path:
    path = cache_dir() / "redcron-bench.mjs"
    if not path.exists() or path.read_text() != SCRIPT:
        path.write_text(SCRIPT)
    return path


class _BullMQ:
    has_bulk = True

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns
        self.script = str(_script())

    def _run(self, *args: str) -> Any:
        done = subprocess.run(
            ["node", self.script, args[0], self.url, self.ns, *args[1:]],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"node {args[0]} failed: {done.stderr.strip()[-500:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        return float(self._run("enqueue", kind, str(count), "1" if bulk else "0")["seconds"])

    def worker(self) -> AbstractContextManager[Any]:
        argv = ["node", self.script, "worker", self.url, self.ns, str(PEER_SLOTS)]
        return process(argv, self.url, self.ns)

    def latency(self, samples: int, blpop: Blpop) -> list[float]:
        return [float(x) for x in self._run("latency", str(samples))]


@contextmanager
def session(url: str, ns: str) -> Iterator[_BullMQ]:
    yield _BullMQ(url, ns)
