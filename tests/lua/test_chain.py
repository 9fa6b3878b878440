"""Job chaining at the script level (real Redis, no worker): the chained run
is made in the script that ends the upstream run, so a report sent twice, a
failed run retried to success, a chain of chains, an overlap and a paused
dependent each give the one outcome the rules in docs/api.md "Job chaining"
state — never a lost or a doubled chained run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from followups import follow  # tests/helpers

from redcron import App
from redcron.engine import FailItem, Lease
from redcron.model.jobs import Task

TENANT = "acme"
WORKER = "w1"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    a.broker.ensure_meta()
    yield a
    a.close()


def put(app: App, name: str, *deps: str, **policies: object) -> str:
    task = Task("t", retries=0)
    return app.jobs.put(  # no app registers "t": the scripts are under test
        name,
        tasks={name: task},
        tenant=TENANT,
        depends_on=list(deps),
        allow_unregistered=True,
        **policies,
    ).id


def lease(app: App) -> dict[str, Lease]:
    """What is ready, by job name (one task per job, named as the job)."""
    got = app.broker.leases.lease(0, WORKER, 256, 60_000, ["default"])
    return {x.iid.rsplit("/", 1)[1]: x for x in got}


def ok(app: App, x: Lease) -> list[bool]:
    out = app.broker.leases.complete(0, WORKER, [(x.iid, x.epoch, b"\xc0")])
    follow(app)  # chaining is a follow-up: maintenance applies it within its interval
    return out


def run_ok(app: App, name: str) -> None:
    app.jobs.trigger(name, tenant=TENANT)
    assert ok(app, lease(app)[name]) == [True]


def n_runs(app: App, name: str) -> int:
    return len(app.jobs.runs(app.jobs.job_id(name, tenant=TENANT)))


def test_a_report_sent_twice_makes_one_chained_run(app: App) -> None:
    put(app, "a")
    put(app, "c", "a")
    app.jobs.trigger("a", tenant=TENANT)
    x = lease(app)["a"]
    assert ok(app, x) == [True]
    assert ok(app, x) == [False]  # a worker's retried report: refused, changes nothing
    assert n_runs(app, "c") == 1
    (run,) = app.jobs.runs(app.jobs.job_id("c", tenant=TENANT))
    assert run.trigger == "chain" and run.state == "queued"
    assert set(lease(app)) == {"c"}


def test_a_failed_run_retried_to_success_satisfies(app: App) -> None:
    put(app, "a")
    put(app, "c", "a")
    rid = app.jobs.trigger("a", tenant=TENANT)
    x = lease(app)["a"]
    app.broker.leases.fail(
        0, WORKER, [FailItem(x.iid, x.epoch, "failed", "boom", retryable=False, delay_ms=0)]
    )
    assert app.jobs.run(rid).state == "failed" and n_runs(app, "c") == 0
    app.jobs.retry_run(rid)
    assert ok(app, lease(app)["a"]) == [True]
    assert app.jobs.run(rid).state == "succeeded" and n_runs(app, "c") == 1


def test_chains_of_chains_and_the_overlap_policy(app: App) -> None:
    put(app, "a")
    put(app, "b", "a")
    put(app, "c", "b")  # overlap skip (the default)
    run_ok(app, "a")
    assert ok(app, lease(app)["b"]) == [True]
    first_c = lease(app)["c"]  # c runs, chained by b
    # b succeeds again while c's run is still going: the fire is recorded skipped
    run_ok(app, "a")
    assert ok(app, lease(app)["b"]) == [True]
    runs = app.jobs.runs(app.jobs.job_id("c", tenant=TENANT))
    going, skipped = sorted(runs, key=lambda r: r.state == "skipped")
    assert going.state in ("queued", "running") and skipped.state == "skipped"
    assert ok(app, first_c) == [True]
    assert app.jobs.get("c", tenant=TENANT).waiting_for == ("b",)  # the skipped fire used it up


def test_a_paused_dependent_notes_and_starts_after_resume(app: App) -> None:
    put(app, "a")
    put(app, "c", "a")
    app.jobs.pause("c", tenant=TENANT)
    run_ok(app, "a")
    assert n_runs(app, "c") == 0 and app.jobs.get("c", tenant=TENANT).waiting_for == ()
    app.jobs.resume("c", tenant=TENANT)
    run_ok(app, "a")
    assert n_runs(app, "c") == 1


def test_changing_depends_on_forgets_dropped_upstreams(app: App) -> None:
    put(app, "a")
    put(app, "b")
    put(app, "c", "a", "b")
    run_ok(app, "a")
    put(app, "c", "b")  # a is no longer an upstream
    put(app, "c", "a", "b")  # and back: a's earlier success was forgotten
    run_ok(app, "b")
    assert n_runs(app, "c") == 0 and app.jobs.get("c", tenant=TENANT).waiting_for == ("a",)
    put(app, "c")  # no upstreams: the reverse index forgets c
    r = app.broker.client
    assert not r.hexists(app.broker.keys.job(0, app.jobs.job_id("a", tenant=TENANT)), "chain_down")
    assert not r.hexists(app.broker.keys.job(0, app.jobs.job_id("c", tenant=TENANT)), "chain_ok")
    app.jobs.delete("a", tenant=TENANT)  # no dependents left
