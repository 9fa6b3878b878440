"""The CLI's state-changing commands that recorded nothing before issue 30
(``tenants reset``, which also withdraws the grant of command tasks; ``dlq
replay|discard``; ``runs cancel|retry``; ``task cancel``; ``jobs apply``;
``doctor --repair``) each leave one entry per tenant they touched, as
``cli:<user>``, in that tenant's stream (real Redis, the click group)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from click.testing import Result
from followups import follow  # tests/helpers

from redcron import App
from redcron.engine import FailItem
from redcron.store import Action, ActionLog

JOBS = """
jobs:
  - name: adhoc
    tasks:
      only: {task: t.add, args: [2, 2], retries: 0}
"""


@pytest.fixture
def app(redis_url: str, prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=prefix)

    @a.task(name="t.add", retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    yield a
    a.close()


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def trail(app: App, tenant: str | None) -> list[Action]:
    """Oldest first: ``tenant``'s stream, or the deployment's (None)."""
    return list(reversed(ActionLog(app.broker).page(tenant, 100).actions))


def kill_next(app: App) -> str:
    (lease,) = app.broker.leases.lease(0, "w-test", 1, 30_000, ["default"])
    item = FailItem(lease.iid, lease.epoch, "failed", "ValueError: boom", False)
    assert [r.state for r in app.broker.leases.fail(0, "w-test", [item])] == ["dead"]
    follow(app)
    return str(lease.iid)


def test_tenants_reset_is_recorded_with_the_withdrawn_grant(app: App, invoke: Invoke) -> None:
    ok(invoke("tenants", "set", "acme", "--allow-commands", "--weight", "2"))
    ok(invoke("tenants", "reset", "acme"))
    ok(invoke("tenants", "reset", "acme"))  # nothing granted any more
    got = [(a.action, a.via, a.outcome, a.detail) for a in trail(app, "acme")]
    assert got[1:] == [
        ("tenant.reset", "cli", "ok", "defaults, allow_commands=False (was granted)"),
        ("tenant.reset", "cli", "ok", "defaults"),
    ]
    assert all(a.who.startswith("cli:") for a in trail(app, "acme"))


def test_dlq_replay_and_discard_are_recorded_per_tenant(app: App, invoke: Invoke) -> None:
    acme = app.enqueue("t.add", 1, 2, _tenant="acme").id
    acme_dead = kill_next(app)
    other = app.enqueue("t.add", 1, 2, _tenant="other").id
    other_dead = kill_next(app)
    assert (acme, other) == (acme_dead, other_dead)
    ok(invoke("dlq", "replay", acme, other))
    assert [(a.action, a.ids) for a in trail(app, "acme")] == [("dlq.replay", (acme,))]
    assert [(a.action, a.ids) for a in trail(app, "other")] == [("dlq.replay", (other,))]
    assert trail(app, "acme")[0].detail == "replayed 2 of 2"
    kill_next(app)  # acme's, replayed: dead again
    kill_next(app)
    ok(invoke("dlq", "discard", "--all", "--tenant", "acme"))
    assert [(a.action, a.ids) for a in trail(app, "acme")][-1] == ("dlq.discard", (acme,))
    assert [a.action for a in trail(app, "other")] == ["dlq.replay"]  # not acme's discard


def test_task_cancel_is_recorded_in_the_tasks_tenant(app: App, invoke: Invoke) -> None:
    task_id = app.enqueue("t.add", 1, 2, _tenant="acme").id
    ok(invoke("task", "cancel", task_id))
    (entry,) = trail(app, "acme")
    assert (entry.action, entry.ids, entry.detail) == (
        "task.cancel", (task_id,), "was ready, now cancelled"
    )  # fmt: skip


def test_jobs_apply_runs_retry_and_cancel_are_recorded(
    app: App, invoke: Invoke, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    # the CLI runs without -A and no worker is live: t.add is registered elsewhere
    ok(invoke("jobs", "apply", "-f", str(path), "--allow-unregistered"))
    # unchanged: on the deployment's only
    ok(invoke("jobs", "apply", "-f", str(path), "--allow-unregistered"))
    job_id = app.jobs.get("adhoc", tenant="default").id
    run_id = ok(invoke("jobs", "trigger", "adhoc")).strip()
    kill_next(app)
    ok(invoke("runs", "retry", run_id))
    ok(invoke("runs", "cancel", run_id))
    got = [(a.action, a.ids) for a in trail(app, "default")]
    assert got == [
        ("job.apply", (job_id,)),
        ("job.trigger", (run_id,)),
        ("run.retry", (run_id,)),
        ("run.cancel", (run_id,)),
    ]
    assert trail(app, "default")[0].detail == "created=1"
    unchanged = [a for a in trail(app, None) if a.action == "job.apply" and a.tenant is None]
    assert [a.detail for a in unchanged] == ["1 unchanged"]


def test_doctor_records_a_repair_and_not_a_report(app: App, invoke: Invoke) -> None:
    ok(invoke("doctor", "-q"))
    assert [a.action for a in trail(app, None)] == []
    ok(invoke("doctor", "-q", "--repair"))
    (entry,) = trail(app, None)
    assert entry.action == "doctor.repair" and entry.tenant is None
    assert entry.detail.startswith("0 finding(s), 0 repaired")
