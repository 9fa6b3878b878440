"""The bulk path of job registration against a real Redis: ``JobStore.put_many``
writes every job once across shards and chunks, in the order given, with its
progress; an invalid job writes nothing and its error names the field (and, from
``jobs apply -f``, the file and the job).  Timing is the bench's, never asserted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)

from redcron import App
from redcron.cli import jobs as cli_jobs
from redcron.engine import job_writes as jobstore
from redcron.errors import ValidationError
from redcron.model.jobs import JobSpec, Task, spec_json, spec_json_full

TASKS = {"t": Task("bulk.noop")}


@pytest.fixture
def app4(redis_url: str, prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=prefix, shards=4)
    yield a
    a.close()


def keys_of(app: App) -> set[bytes]:
    return set(app.broker.client.scan_iter(match=f"{app.settings.prefix}:*", count=1000))


def specs(n: int) -> list[JobSpec]:
    return [JobSpec(name=f"j{i}", tenant=f"t{i % 13}", tasks=dict(TASKS), cron=f"{i % 60} * * * *")
            for i in range(n)]  # fmt: skip


def test_put_many_writes_every_job_once_in_chunks_per_shard(
    app4: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobstore, "PUT_CHUNK", 37)
    monkeypatch.setattr(jobstore, "READ_CHUNK", 101)
    batch = specs(1_200)
    seen: list[tuple[int, int]] = []
    out = app4.jobs.put_many(
        batch, progress=lambda done, total: seen.append((done, total)), allow_unregistered=True
    )
    assert [(c.tenant, c.name, c.change) for c in out] == [
        (s.tenant, s.name, "created") for s in batch
    ]
    assert len({c.id for c in out}) == len(batch)
    dones = [d for d, _ in seen]
    assert dones == sorted(dones) and dones[-1] == len(batch) and {t for _, t in seen} == {1_200}
    assert len(seen) > len(batch) // 37  # chunked, and per shard
    names = app4.jobs.job_names()
    assert sorted((t, n) for t, n, _ in names) == sorted((s.tenant, s.name) for s in batch)
    client, k = app4.broker.client, app4.broker.keys
    assert sum(client.zcard(k.schedule(s)) for s in range(4)) == len(batch)
    records = app4.jobs.get_many([c.id for c in out])
    assert all(r.version == 1 for r in records)
    # the breaker settings at their default: not in the hash, read as the default
    assert all(r.breaker_min_attempts == 20 and r.keep_runs == 100 for r in records)
    assert not any(client.hexists(k.job(r.shard, r.id), "breaker_min") for r in records)
    # again: unchanged, nothing rewritten
    again = app4.jobs.put_many(batch, allow_unregistered=True)
    assert {c.change for c in again} == {"unchanged"}
    assert [c.id for c in again] == [c.id for c in out]


def test_a_name_given_twice_ends_as_its_last_spec_says(
    app4: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobstore, "PUT_CHUNK", 2)
    first = JobSpec(name="dup", tenant="t1", tasks=dict(TASKS), cron="1 * * * *")
    last = JobSpec(name="dup", tenant="t1", tasks=dict(TASKS), cron="2 * * * *")
    out = app4.jobs.put_many([first, *specs(5), last], allow_unregistered=True)
    assert out[0].id == out[-1].id
    assert app4.jobs.get("dup", tenant="t1").trigger == "cron 2 * * * *"


def test_an_invalid_job_in_a_bulk_put_writes_nothing(app4: App) -> None:
    batch = specs(600)
    batch[450] = JobSpec(name="bad", tenant="t1", tasks=dict(TASKS), cron="0 0 30 FEB *")
    before = keys_of(app4)
    with pytest.raises(ValidationError) as info:
        app4.jobs.put_many(batch, allow_unregistered=True)
    assert info.value.field == "cron"
    assert keys_of(app4) == before


def test_a_backoff_below_the_settings_in_a_bulk_put_writes_nothing(app4: App) -> None:
    """The retry backoff against the deployment's defaults is checked with the
    rest, before the first chunk goes out (it was checked per chunk, so the
    chunks before the bad job were written), and the error names the job."""
    batch = specs(600)
    batch[550] = JobSpec(name="bad", tenant="t1", cron="0 2 * * *",
                         tasks={"t": Task("bulk.noop", retry_cap=0)})  # fmt: skip
    before = keys_of(app4)
    with pytest.raises(ValidationError) as info:
        app4.jobs.put_many(batch, allow_unregistered=True)
    assert info.value.field == "job 'bad': tasks.t.retry_cap"
    assert keys_of(app4) == before


def write_jobs(path: Path, n: int, bad: int | None = None) -> Path:
    jobs = [{"name": f"j{i}", "tenant": f"t{i % 7}", "cron": "0 2 * * *",
             "tasks": {"t": {"task": "bulk.noop"}}} for i in range(n)]  # fmt: skip
    if bad is not None:
        jobs[bad]["catchup"] = "sometimes"
    path.write_text(json.dumps({"jobs": jobs}))
    return path


def test_jobs_apply_a_large_file_shows_progress_on_stderr(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_jobs, "PROGRESS_EVERY", 400)
    monkeypatch.setattr(jobstore, "PUT_CHUNK", 100)
    path = write_jobs(tmp_path / "many.json", 1_000)
    result = invoke("jobs", "apply", "-f", str(path), "--allow-unregistered")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("1000 jobs: 1000 created, 0 updated, 0 unchanged")
    progress = [line for line in result.stderr.splitlines() if line.startswith("applied ")]
    assert progress == ["applied 400/1000 jobs", "applied 800/1000 jobs", "applied 1000/1000 jobs"]
    # --json keeps stdout one JSON document
    again = invoke("jobs", "apply", "-f", str(path), "--json", "--allow-unregistered")
    assert again.exit_code == 0, again.output
    assert {row["change"] for row in json.loads(again.stdout)} == {"unchanged"}


def test_jobs_apply_names_the_file_job_and_field_and_writes_nothing(
    invoke: Invoke, tmp_path: Path
) -> None:
    path = write_jobs(tmp_path / "many.json", 1_000, bad=777)
    result = invoke("jobs", "apply", "-f", str(path))
    assert result.exit_code == 2, result.output
    assert f"{path}: job 'j777': catchup:" in result.stderr
    listed = invoke("jobs", "list", "--json")
    assert json.loads(listed.stdout) == []


def test_a_job_hash_holds_no_default_and_its_settings_are_written_with_it(app4: App) -> None:
    """job_put writes the breaker settings and the deadline in the same call
    (no second pipeline), drops a setting put back to its default, and a job
    whose values are all short is a listpack (issue 28)."""
    client, k = app4.broker.client, app4.broker.keys
    spec = JobSpec(name="lean", tenant="acme", tasks=dict(TASKS), cron="0 2 * * *")
    (made,) = app4.jobs.put_many([spec], allow_unregistered=True)
    jk = k.job(int(made.id.split("-")[0]), made.id)
    fields = {key.decode() for key in client.hkeys(jk)}
    assert fields == {"tenant", "name", "created", "version", "spec", "template",
                      "trigger_sig", "next_fire", "args:t"}  # fmt: skip
    assert client.object("encoding", jk) in (b"listpack", b"ziplist")  # ziplist: Redis 6.2
    spec.breaker_min_attempts, spec.deadline_s, spec.overlap = 5, 2.0, "allow"
    (changed,) = app4.jobs.put_many([spec], allow_unregistered=True)
    assert changed.change == "updated"
    got = client.hmget(jk, "breaker_min", "deadline_ms", "overlap", "updated")
    assert got[:3] == [b"5", b"2000", b"allow"] and got[3]
    job = app4.jobs.get("lean", tenant="acme")
    assert (job.breaker_min_attempts, job.deadline_s, job.overlap) == (5, 2.0, "allow")
    spec.breaker_min_attempts, spec.deadline_s, spec.overlap = 20, None, "skip"
    app4.jobs.put_many([spec], allow_unregistered=True)
    assert client.hmget(jk, "breaker_min", "deadline_ms", "overlap") == [None, None, None]
    job = app4.jobs.get("lean", tenant="acme")
    assert (job.id, job.breaker_min_attempts, job.deadline_s, job.overlap) == (
        made.id, 20, None, "skip",
    )  # fmt: skip
    assert json.loads(job.spec)["name"] == "lean"  # shown in full, as before


def test_a_job_hash_of_the_previous_layout_reads_the_same_and_stays_unchanged(
    app4: App,
) -> None:
    """A hash as the release before the lean layout wrote it (every default, an
    id field, the spec in full) reads the same; putting its spec again is
    ``unchanged`` (a runtime pause survives); a changed spec rewrites it lean."""
    client, k = app4.broker.client, app4.broker.keys
    spec = JobSpec(name="old", tenant="acme", tasks=dict(TASKS), cron="0 2 * * *")
    (made,) = app4.jobs.put_many([spec], allow_unregistered=True)
    jk = k.job(int(made.id.split("-")[0]), made.id)
    client.hset(jk, mapping={
        "id": made.id, "spec": spec_json_full(spec), "overlap": "skip", "keep_runs": 100,
        "keep_s": 604800, "pause_after_failures": 0, "paused": "1", "consecutive_failures": 0,
        "breaker_ratio": 0.9, "breaker_min": 20, "breaker_window_s": 300.0,
        "breaker_cooldown_s": 60.0, "updated": 1,
    })  # fmt: skip
    job = app4.jobs.get("old", tenant="acme")
    assert (job.id, job.keep_runs, job.breaker_window_s, job.paused) == (made.id, 100, 300.0, True)
    assert job.spec == spec_json_full(spec)
    (again,) = app4.jobs.put_many([spec], allow_unregistered=True)
    assert (again.change, again.version) == ("unchanged", 1)
    assert client.hget(jk, "paused") == b"1"
    spec.keep_runs = 7
    (changed,) = app4.jobs.put_many([spec], allow_unregistered=True)
    assert changed.change == "updated"
    assert client.hmget(jk, "id", "overlap", "breaker_min", "keep_runs") == [None, None, None, b"7"]
    assert client.hget(jk, "spec") == spec_json(spec).encode()
