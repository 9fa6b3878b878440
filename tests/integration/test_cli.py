"""The admin CLI against a real Redis: task show/cancel, inspect, dlq, and -A loading.

``worker`` and ``up`` are exercised end to end by the worker tests; here only
their ``--help`` is checked.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from cli_output import one_error_line  # tests/helpers
from click.testing import CliRunner
from followups import follow  # tests/helpers

from redcron import App, ConfigError, serde
from redcron.cli.main import main
from redcron.engine import FailItem
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.loader import load_app

#: how --json prints every time: ISO-8601 UTC with milliseconds
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def app(redis_url: str, prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=prefix)

    @a.task(name="t.add", retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    yield a
    a.close()


def lease_one(app: App, worker: str = "w-test") -> Any:
    (lease,) = app.broker.leases.lease(0, worker, 1, 30_000, ["default"])
    return lease


def make_dead(app: App, tenant: str = "default") -> str:
    handle = app.enqueue("t.add", 1, 2, _tenant=tenant)
    lease = lease_one(app)
    app.broker.leases.start(0, "w-test", [(lease.iid, lease.epoch)])
    (res,) = app.broker.leases.fail(
        0, "w-test", [FailItem(lease.iid, lease.epoch, "failed", "ValueError: boom", False)]
    )
    assert res.state == "dead"
    follow(app)  # its count and event: maintenance's, within the interval
    return handle.id


# -- help ---------------------------------------------------------------------


def test_help() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    for command in ("worker", "up", "task", "inspect", "dlq"):
        assert command in result.stdout


def test_worker_help_does_not_need_the_worker_package() -> None:
    result = CliRunner().invoke(main, ["worker", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("-A", "--concurrency", "--pool", "--allow-commands", "--lease-ttl", "--grace"):
        assert option in result.stdout


# -- task show / cancel ---------------------------------------------------------


def test_task_show_plain(app: App, invoke: Invoke) -> None:
    handle = app.enqueue("t.add", 2, 3)
    result = invoke("task", "show", handle.id)
    assert result.exit_code == 0, result.output
    assert handle.id in result.stdout
    assert "t.add" in result.stdout
    assert "ready" in result.stdout
    assert "[[2, 3], {}]" in result.stdout


def test_task_show_attempts_error_and_log_tail(app: App, invoke: Invoke) -> None:
    handle = app.enqueue("t.add", 2, 3, _retries=1)
    lease = lease_one(app, "w-one")
    app.broker.leases.start(0, "w-one", [(lease.iid, lease.epoch)])
    app.broker.leases.append_logs(0, [(lease.iid, lease.attempt, ["computing", "about to fail"])])
    app.broker.leases.fail(
        0,
        "w-one",
        [FailItem(lease.iid, lease.epoch, "failed", "Traceback\nKeyError: 'x'", True, 0, 3)],
    )
    result = invoke("task", "show", handle.id)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "w-one" in out
    assert "KeyError: 'x'" in out
    assert "about to fail" in out
    assert "1 of 2" in out  # attempts used of allowed
    assert "Z" in out  # ISO-8601 UTC timestamps


def test_task_show_json(app: App, invoke: Invoke) -> None:
    handle = app.enqueue("t.add", 2, 3)
    lease = lease_one(app)
    app.broker.leases.start(0, "w-test", [(lease.iid, lease.epoch)])
    app.broker.leases.append_logs(0, [(lease.iid, lease.attempt, ["adding"])])
    app.broker.leases.complete(0, "w-test", [(lease.iid, lease.epoch, serde.dumps(5))])

    result = invoke("task", "show", handle.id, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["id"] == handle.id
    assert info["state"] == "succeeded"
    assert info["args"] == [[2, 3], {}]
    assert info["result"] == 5
    assert info["attempt"] == 1
    assert info["log_tail"] == ["adding"]
    (attempt,) = info["attempts"]
    assert attempt["worker"] == "w-test"
    assert attempt["outcome"] == "succeeded"
    assert ISO_MS.match(attempt["ended_at"])
    assert ISO_MS.match(info["created_at"])
    assert info["due_at"] is None


def test_task_show_says_when_a_quick_succeeded_attempt_started(app: App, invoke: Invoke) -> None:
    # a worker marks an attempt started off its hot path (start.lua, every 50 ms):
    # one that ends sooner goes from leased to succeeded without the mark, and
    # task show left its "started" empty
    handle = app.enqueue("t.add", 2, 3)
    lease = lease_one(app)
    app.broker.leases.complete(0, "w-test", [(lease.iid, lease.epoch, serde.dumps(5))])
    result = invoke("task", "show", handle.id)
    assert result.exit_code == 0, result.output
    header, row = result.stdout.splitlines()[-2:]
    assert header.split() == [
        "#",
        "worker",
        "leased",
        "started",
        "ended",
        "outcome",
        "exit",
        "error",
    ]
    number, worker, leased, started, ended, outcome = row.split()
    assert (number, worker, outcome) == ("1", "w-test", "succeeded")
    assert ISO_MS.match(started) and started == leased <= ended


def test_task_show_unknown_id(invoke: Invoke) -> None:
    result = invoke("task", "show", "0-01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert result.exit_code == 1
    assert "no task 0-01ARZ3NDEKTSV4RRFFQ69G5FAV" in one_error_line(result)


def test_task_show_malformed_id(invoke: Invoke) -> None:
    result = invoke("task", "show", "not-an-id")
    assert result.exit_code == 1
    assert "malformed task id" in one_error_line(result)


def test_task_cancel(app: App, invoke: Invoke) -> None:
    handle = app.enqueue("t.add", 1, 1)
    result = invoke("task", "cancel", handle.id)
    assert result.exit_code == 0, result.output
    assert "cancelled" in result.stdout
    assert handle.state == "cancelled"
    again = invoke("task", "cancel", handle.id)
    assert again.exit_code == 0
    assert "already cancelled" in again.stdout


def test_redis_unreachable_is_one_line(prefix: str) -> None:
    result = CliRunner().invoke(main, ["inspect", "--redis", "redis://127.0.0.1:1/0"])
    assert result.exit_code == 1
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in one_error_line(result)


# -- inspect ----------------------------------------------------------------------


def test_inspect_json_counts(app: App, invoke: Invoke) -> None:
    make_dead(app)  # default: dlq 1
    app.enqueue("t.add", 1, 1)
    lease_one(app)  # default: in flight 1
    app.enqueue("t.add", 1, 2)
    app.enqueue("t.add", 1, 3)  # default: ready 2
    app.enqueue("t.add", 1, 4, _tenant="acme", _countdown=3600)  # acme: delayed 1

    result = invoke("inspect", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    tenants = {row["tenant"]: row for row in data["tenants"]}
    assert tenants["default"] == {
        "tenant": "default", "shard": 0, "ready": 2, "in_flight": 1, "delayed": 0, "dlq": 1
    }  # fmt: skip
    assert tenants["acme"] == {
        "tenant": "acme", "shard": 0, "ready": 0, "in_flight": 0, "delayed": 1, "dlq": 0
    }  # fmt: skip
    assert data["totals"] == {"ready": 2, "in_flight": 1, "delayed": 1, "dlq": 1}
    assert data["stats"]["dead"] == 1

    plain = invoke("inspect")
    assert plain.exit_code == 0, plain.output
    assert "acme" in plain.stdout
    assert "in-flight" in plain.stdout


def test_inspect_breaks_counts_down_per_queue_and_flags_unserved_queues(
    app: App, invoke: Invoke
) -> None:
    make_dead(app)  # default/default: dlq 1
    app.enqueue("t.add", 1, 1)
    lease_one(app)  # default/default: in flight 1
    app.enqueue("t.add", 1, 2)  # default/default: ready 1
    app.enqueue("t.add", 1, 3, _queue="reports")  # default/reports: ready 1
    app.enqueue("t.add", 1, 4, _queue="reports", _countdown=3600)  # delayed 1
    app.enqueue("t.add", 1, 5, _tenant="acme")  # acme/default: ready 1
    # one live worker: queue default, tenant default only
    WorkerRegistry(app.broker).publish(
        Registration("w1", "h", 1, ("default",), ("default",), 2, 0, ("t.add",)), 60_000
    )

    data = json.loads(invoke("inspect", "--json").stdout)
    assert data["workers"] == 1
    rows = {(r["tenant"], r["queue"]): r for r in data["queues"]}
    assert set(rows) == {("default", "default"), ("default", "reports"), ("acme", "default")}
    d = rows["default", "default"]
    assert (d["ready"], d["in_flight"], d["delayed"], d["dlq"], d["served"]) == (1, 1, 0, 1, True)
    r = rows["default", "reports"]
    assert (r["ready"], r["in_flight"], r["delayed"], r["dlq"], r["served"]) == (1, 0, 1, 0, False)
    assert rows["acme", "default"]["served"] is False  # the worker takes tenant default only

    text = invoke("inspect").stdout
    line = next(ln for ln in text.splitlines() if "reports" in ln)
    assert "no live worker serves this queue" in line


# -- task list --------------------------------------------------------------------


def test_task_list_filters_newest_first(app: App, invoke: Invoke) -> None:
    dead = make_dead(app)
    a = app.enqueue("t.add", 1, 1).id
    b = app.enqueue("t.add", 1, 2, _queue="reports").id
    c = app.enqueue("t.add", 1, 3, _tenant="acme").id

    def ids(*args: str) -> list[str]:
        result = invoke("task", "list", "--json", *args)
        assert result.exit_code == 0, result.output
        return [row["id"] for row in json.loads(result.stdout)]

    every = ids()
    assert set(every) == {a, b, c, dead}
    # newest first (ties within a millisecond by id, as the index orders them)
    created = [app.broker.inspection.task_info(i).created_at for i in every]
    assert created == sorted(created, reverse=True)
    assert ids("--limit", "2") == every[:2]
    assert ids("--state", "dead") == [dead]
    assert set(ids("--state", "ready", "--tenant", "default")) == {a, b}
    assert ids("--queue", "reports") == [b]
    assert ids("--tenant", "acme", "--name", "t.add") == [c]
    assert ids("--name", "nope") == []
    (row,) = json.loads(invoke("task", "list", "--json", "--state", "dead").stdout)
    assert row["state"] == "dead" and row["error"] == "ValueError: boom"

    text = invoke("task", "list").stdout
    assert text.splitlines()[0].split()[:5] == ["task", "name", "tenant", "queue", "state"]
    assert dead in text and "ValueError: boom" in text
    assert invoke("task", "list", "--name", "nope").stdout.strip() == "no tasks match"

    # an instance gone with its retention leaves the index on the next read
    app.broker.client.delete(app.broker.keys.ti(0, a))
    assert ids() == [i for i in every if i != a]
    assert app.broker.client.zscore(app.broker.keys.recent(0), a) is None


# -- dlq ----------------------------------------------------------------------------


def test_dlq_list_and_replay(app: App, invoke: Invoke) -> None:
    dead = make_dead(app)
    listed = invoke("dlq", "list", "--json")
    assert listed.exit_code == 0, listed.output
    (entry,) = json.loads(listed.stdout)
    assert entry["task_id"] == dead
    assert entry["tenant"] == "default"
    assert "boom" in entry["error"]
    assert entry["attempts"] == 1
    assert ISO_MS.match(entry["dead_at"])

    plain = invoke("dlq", "list")
    assert dead in plain.stdout
    assert "ValueError: boom" in plain.stdout

    replayed = invoke("dlq", "replay", dead)
    assert replayed.exit_code == 0, replayed.output
    assert "replayed 1 task" in replayed.stdout
    assert app.get(dead).state == "ready"
    assert json.loads(invoke("dlq", "list", "--json").stdout) == []


def test_dlq_replay_all_by_tenant(app: App, invoke: Invoke) -> None:
    a1, a2 = make_dead(app, "acme"), make_dead(app, "acme")
    other = make_dead(app, "other")

    result = invoke("dlq", "replay", "--all", "--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert "replayed 2 tasks" in result.stdout
    assert {app.get(a1).state, app.get(a2).state} == {"ready"}
    assert app.get(other).state == "dead"

    only_other = json.loads(invoke("dlq", "list", "--json").stdout)
    assert [e["task_id"] for e in only_other] == [other]


@pytest.mark.parametrize("cmd", ["replay", "discard"])
def test_dlq_replay_and_discard_need_ids_or_all(invoke: Invoke, cmd: str) -> None:
    assert invoke("dlq", cmd).exit_code == 2
    assert invoke("dlq", cmd, "0-X", "--all").exit_code == 2
    assert invoke("dlq", cmd, "0-X", "--tenant", "acme").exit_code == 2


def test_dlq_discard(app: App, invoke: Invoke) -> None:
    dead = make_dead(app)
    result = invoke("dlq", "discard", dead, "0-01NOSUCHTASK")
    assert result.exit_code == 0, result.output
    assert "discarded 1 task" in result.stdout
    assert "1 of the given ids were not in the DLQ" in result.stderr
    task = app.get(dead).info()
    assert (task.state, task.error) == ("cancelled", "discarded from the DLQ")
    assert json.loads(invoke("dlq", "list", "--json").stdout) == []
    again = invoke("dlq", "discard", dead)
    assert "discarded 0 tasks" in again.stdout
    assert "not in the DLQ" in again.stderr


def test_dlq_discard_all_by_tenant(app: App, invoke: Invoke) -> None:
    a1, a2 = make_dead(app, "acme"), make_dead(app, "acme")
    other = make_dead(app, "other")
    result = invoke("dlq", "discard", "--all", "--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert "discarded 2 tasks" in result.stdout
    assert {app.get(a1).state, app.get(a2).state} == {"cancelled"}
    assert app.get(other).state == "dead"


# -- -A and the loader ------------------------------------------------------------------


APP_MODULE = """
    from redcron import App
    app = App("redis://127.0.0.1:1/0")
    other = App("redis://127.0.0.1:1/0")
    not_an_app = 42

    def make_app():
        return App("redis://127.0.0.1:1/0", prefix="made")

    def make_nothing():
        return 42

    def make_broken():
        raise RuntimeError("broken in the factory")

    def make_misconfigured():
        return App("http://x")
"""


def test_load_app_from_cwd(module_dir: Callable[[str], str]) -> None:
    name = module_dir(APP_MODULE)
    assert isinstance(load_app(name), App)  # bare module means :app
    mod = sys.modules[name]
    assert load_app(f"{name}:app") is mod.app
    assert load_app(f"{name}:other") is mod.other


def test_load_app_calls_a_factory(module_dir: Callable[[str], str]) -> None:
    """``module:factory()``: the App is built when loaded, not when imported
    (``redcron bench``'s worker processes load theirs so: issue 16, item 10)."""
    name = module_dir(APP_MODULE)
    made = load_app(f"{name}:make_app()")
    assert isinstance(made, App) and made.settings.prefix == "made"
    assert load_app(f"{name}:make_app()") is not made  # a fresh App per load


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("no_such_module_xyz:app", "no module named 'no_such_module_xyz'"),
        ("{mod}:missing", "has no attribute 'missing'"),
        ("{mod}:not_an_app", "not a redcron App"),
        (":app", "expected 'module:attribute'"),
        ("{broken}:app", "RuntimeError: broken at import"),
        ("{mod}:not_an_app()", "is not callable"),
        ("{mod}:make_nothing()", "make_nothing() is a int, not a redcron App"),
        ("{mod}:make_broken()", "calling rc_mod_"),
        ("{mod}:make_broken()", "RuntimeError: broken in the factory"),
        ("{mod}:make_misconfigured()", "redis_url 'http://x'"),
        ("{mod}:missing()", "has no attribute 'missing'"),
    ],
)
def test_load_app_errors_name_the_path(
    module_dir: Callable[[str], str], path: str, needle: str
) -> None:
    path = path.format(
        mod=module_dir(APP_MODULE), broken=module_dir("raise RuntimeError('broken at import')")
    )
    with pytest.raises(ConfigError) as err:
        load_app(path)
    assert needle in str(err.value)
    assert repr(path) in str(err.value)


def test_cli_app_option(module_dir: Callable[[str], str], app: App, invoke: Invoke) -> None:
    name = module_dir(APP_MODULE)  # the module's own URL is unreachable: --redis wins
    handle = app.enqueue("t.add", 1, 1)
    result = invoke("task", "show", handle.id, "-A", f"{name}:app")
    assert result.exit_code == 0, result.output
    assert handle.id in result.stdout

    bad = invoke("inspect", "-A", f"{name}:nope")
    assert bad.exit_code == 2
    assert "has no attribute 'nope'" in one_error_line(bad)
