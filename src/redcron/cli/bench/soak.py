"""``redcron bench soak``: does memory stay flat with retention on?

Jobs fire about ``runs_per_minute`` runs a minute (a beat and a worker
process, each run a two-task DAG of no-op tasks), every job keeping its runs
``retention_s`` seconds.  Once a minute the benchmark records Redis's
``used_memory`` (less the script cache and client buffers) and the finished
task instances still retained (their hashes, counted with SCAN: this is a
benchmark, not a production path).  After the
first retention period, expiry removes as much as each minute adds, so memory
should be flat; ``bytes_per_instance`` is the memory above the idle baseline
divided by the retained instances (the run hashes, run indexes and logs they
bring along included); ``instance_hash_bytes`` is the mean ``MEMORY USAGE`` of
one finished instance hash alone; ``bytes_by_kind`` splits the last sample's
memory by key kind (the ``MEMORY USAGE`` of every key of the benchmark's prefix,
summed per kind and divided by the retained instances: where the bytes go) and
``instance_encodings`` counts the finished instance hashes' ``OBJECT ENCODING``
(a hash past ``hash-max-listpack-*`` turns into a hashtable, several times larger).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from typing import Any

from redcron.app import App
from redcron.cli.bench.fixtures import beat_process, bench_run, worker_process
from redcron.engine import scan_keys
from redcron.model.jobs import JobSpec, Task
from redcron.serde import text as _s

#: seconds between two runs of one soak job
EVERY_S = 3
#: finished instance hashes whose MEMORY USAGE is averaged each sample
HASH_SAMPLE = 100
#: a minute's memory is "flat" within this fraction of the post-retention mean
FLAT_TOLERANCE = 0.10


def soak(
    minutes: int,
    runs_per_minute: int = 1000,
    retention_s: int = 120,
    redis_url: str | None = None,
    sample_s: float = 60.0,
) -> dict[str, Any]:
    """Run the soak for ``minutes`` samples of ``sample_s`` seconds; print a
    line per sample on stderr; the figures as a dict."""
    jobs = max(1, round(runs_per_minute * EVERY_S / 60))
    with bench_run(redis_url, "rcsoak") as run:
        bapp = run.app
        specs = [
            JobSpec(
                name=f"soak{i}",
                tenant=f"t{i % 10}",
                every=f"{EVERY_S}s",
                keep_days=retention_s / 86_400,
                keep_runs=100_000,
                tasks={
                    "a": Task("bench.noop"),
                    "b": Task("bench.noop", depends_on=["a"]),
                },
            )
            for i in range(jobs)
        ]
        bapp.jobs.put_many(specs)
        baseline = _used_memory(bapp)
        samples: list[dict[str, Any]] = []
        fires0 = _fires(bapp)
        with beat_process(run.url, run.prefix), worker_process(run.url, run.prefix, 8, "threads"):
            for minute in range(1, minutes + 1):
                time.sleep(sample_s)
                retained, hash_bytes, encodings = _finished_instances(bapp)
                sample = {
                    "minute": minute,
                    "used_memory": _used_memory(bapp),
                    "retained_instances": retained,
                    "instance_hash_bytes": hash_bytes,
                    "instance_encodings": encodings,
                    "runs": _fires(bapp) - fires0,
                }
                samples.append(sample)
                print(
                    f"soak: minute {minute}/{minutes}: {sample['used_memory']:,} bytes, "
                    f"{sample['retained_instances']:,} finished instances retained, "
                    f"{sample['runs']:,} runs so far",
                    file=sys.stderr,
                    flush=True,
                )
            if samples:
                samples[-1]["by_kind"] = _by_kind(bapp)
        return _figures(samples, baseline, runs_per_minute, retention_s, sample_s)


def _figures(
    samples: list[dict[str, Any]],
    baseline: int,
    runs_per_minute: int,
    retention_s: int,
    sample_s: float,
) -> dict[str, Any]:
    """Summarize: flat after the first retention period, bytes per instance."""
    settle = int(retention_s // sample_s) + 1  # samples before memory can level off
    after = samples[settle:]
    mean = statistics.fmean(s["used_memory"] for s in after) if after else None
    flat = (
        all(abs(s["used_memory"] - mean) <= FLAT_TOLERANCE * mean for s in after) if mean else None
    )
    last = samples[-1] if samples else None
    per_instance = (
        round((last["used_memory"] - baseline) / last["retained_instances"])
        if last and last["retained_instances"]
        else None
    )
    elapsed_min = len(samples) * sample_s / 60
    return {
        "minutes": len(samples),
        "runs_per_minute_target": runs_per_minute,
        "runs_per_minute": round(last["runs"] / elapsed_min) if last and elapsed_min else 0,
        "retention_s": retention_s,
        "baseline_memory": baseline,
        "used_memory": [s["used_memory"] for s in samples],
        "retained_instances": [s["retained_instances"] for s in samples],
        "flat_after_retention": flat,
        "bytes_per_retained_instance": per_instance,
        "instance_hash_bytes": last["instance_hash_bytes"] if last else None,
        "instance_encodings": last["instance_encodings"] if last else {},
        "bytes_by_kind": (
            {
                kind: round(size / last["retained_instances"])
                for kind, size in sorted(last.get("by_kind", {}).items(), key=lambda kv: -kv[1])
            }
            if last and last["retained_instances"]
            else {}
        ),
    }


def _used_memory(bapp: App) -> int:
    """``used_memory`` less the script cache and client buffers, which do not
    grow with the data (scripts load on first use, after the baseline)."""
    info = bapp.broker.client.info("memory")
    extra = int(info.get("used_memory_scripts", 0)) + int(info.get("mem_clients_normal", 0))
    return int(info["used_memory"]) - extra


def _fires(bapp: App) -> int:
    return bapp.broker.inspection.stats().get("fires", 0)


def _finished_instances(bapp: App) -> tuple[int, int | None, dict[str, int]]:
    """Task instance hashes that have ended (succeeded, failed...), all shards,
    the mean ``MEMORY USAGE`` of up to ``HASH_SAMPLE`` of them and how many of
    those are encoded how (``listpack``, ``hashtable``)."""
    client, keys = bapp.broker.client, bapp.broker.keys
    ended: list[Any] = []
    for shard in range(bapp.broker.shards):
        for batch in scan_keys(client, keys.shard(shard), "ti"):
            ended += _ended(client, batch)
    sample = ended[:HASH_SAMPLE]
    sizes = [client.memory_usage(key) or 0 for key in sample]
    encodings = Counter(_s(client.object("encoding", key)) for key in sample)
    return len(ended), round(statistics.fmean(sizes)) if sizes else None, dict(encodings)


def _by_kind(bapp: App) -> dict[str, int]:
    """Bytes (``MEMORY USAGE``, every element counted) of every key of the
    benchmark's prefix, summed per kind: the word after the shard tag
    (``ti``, ``run``, ``recent``...) or after the prefix for the keys of no shard."""
    client, prefix = bapp.broker.client, bapp.broker.keys.prefix
    sizes: Counter[str] = Counter()
    # bench_run's prefixes are letters and digits: no glob character to escape
    for key in client.scan_iter(match=prefix + ":*", count=1000):
        rest = _s(key)[len(prefix) + 1 :]
        if rest.startswith("{"):
            rest = rest.partition("}:")[2]
        sizes[rest.partition(":")[0]] += client.memory_usage(key, samples=0) or 0
    return dict(sizes)


def _ended(client: Any, batch: list[Any]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for key in batch:
        pipe.hget(key, "ended")
    return [key for key, ended in zip(batch, pipe.execute(), strict=True) if ended]
