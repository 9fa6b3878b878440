"""Concurrency keys with real workers: two keys run side by side while one is
held at its cap, and a worker killed mid-task frees its slot only when its lease
is reaped (never a second holder meanwhile), the waiters starting in order."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import chaos_app  # tests/apps and tests/helpers are put on sys.path by tests/conftest.py
import pytest
from worker_procs import (  # noqa: F401 (app_fixture, start_worker_fixture: fixtures)
    WorkerProc,
    app_fixture,
    start_worker_fixture,
    thread_workers,
    wait_for,
    worker_spawner,
)

from redcron import App, Context, ValidationError
from redcron.cli.tasks import render_task, task_details
from redcron.dashboard import create_app
from redcron.doctor import examine
from redcron.model.jobs import JobSpec, Task
from redcron.worker import Worker


@pytest.fixture
def spawn_worker(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProc]]:
    with worker_spawner(redis_url, key_prefix, tmp_path, lease_ttl=2.0, grace=1.0) as start:
        yield start


def slots(app: App, name: str, ck: str, tenant: str = "default") -> list[str]:
    k = app.broker.keys
    return [m.decode() for m in app.broker.client.zrange(k.ckslots(0, tenant, name, ck), 0, -1)]


def waiters(app: App, name: str, ck: str, tenant: str = "default") -> list[str]:
    k = app.broker.keys
    return [m.decode() for m in app.broker.client.lrange(k.ckwaiting(0, tenant, name, ck), 0, -1)]


def test_two_keys_run_and_one_is_capped(app: App) -> None:
    client = app.broker.client
    gate = {c: f"{app.settings.prefix}:x:gate:{c}" for c in "AB"}

    @app.task(name="ck.hold", concurrency_key="customer", max_concurrent=2, retries=0)
    def hold(ctx: Context, customer: str) -> str:
        wait_for(lambda: client.exists(gate[customer]), "the gate", timeout=60, interval=0.02)
        return customer

    @app.task(name="ck.plain", retries=0)
    def plain() -> str:
        return "free"

    a = [hold.enqueue("A") for _ in range(4)]
    b = [hold.enqueue(customer="B") for _ in range(2)]
    seen: list[int] = []

    def states(hs: list[object]) -> list[str]:
        seen.append(len(slots(app, "ck.hold", "A")))  # never over the cap, at any poll
        return [h.state for h in hs]  # type: ignore[attr-defined]

    with thread_workers(app) as start:
        start(concurrency=8)
        # both keys run; A holds 2 slots and its other 2 wait in order
        wait_for(lambda: states(b) == ["running"] * 2, "B's two to run")
        wait_for(lambda: states(a) == ["running"] * 2 + ["waiting"] * 2, "A at its cap")
        assert waiters(app, "ck.hold", "A") == [a[2].id, a[3].id]
        slots_a = app.broker.inspection.concurrency(a[3].info())
        assert slots_a is not None
        assert (slots_a.key, slots_a.max_concurrent, slots_a.waiting, slots_a.position) == (
            "A", 2, 2, 2,
        )  # fmt: skip
        # other work flows past the capped key
        assert plain.enqueue().result(timeout=30) == "free"
        client.set(gate["B"], 1)
        assert [h.result(timeout=30) for h in b] == ["B", "B"]
        assert states(a) == ["running"] * 2 + ["waiting"] * 2
        client.set(gate["A"], 1)
        assert [h.result(timeout=30) for h in a] == ["A"] * 4
    assert max(seen) == 2
    assert slots(app, "ck.hold", "A") == slots(app, "ck.hold", "B") == []
    assert waiters(app, "ck.hold", "A") == []
    assert a[0].info().concurrency_key == "A" and a[0].info().max_concurrent == 2


def test_a_killed_worker_frees_its_slot_only_when_reaped(
    app: App,
    spawn_worker: Callable[..., WorkerProc],
    start_worker: Callable[..., Worker],
) -> None:
    client = app.broker.client
    gate = f"{app.settings.prefix}:x:gate"
    starts = chaos_app.rec_key(app, "ck", "K")
    hs = [app.enqueue("ck_hold", "K", gate) for _ in range(3)]
    proc = spawn_worker(concurrency=4)
    wait_for(lambda: client.llen(starts) == 1, "the first to start")
    assert hs[0].state in ("leased", "running")  # the running mark may still be on its way
    assert [h.state for h in hs[1:]] == ["waiting", "waiting"]
    proc.signal(signal.SIGKILL)
    proc.close()

    held: list[int] = []

    def first_lost_and_next_started() -> bool:
        held.append(len(slots(app, "ck_hold", "K")))
        running = [h for h in hs if h.state in ("leased", "running")]
        held.append(len(running))
        return client.llen(starts) == 2

    start_worker(concurrency=4)
    # the dead worker's lease holds the slot until the reaper ends it: nobody
    # else of K runs meanwhile, then the first waiter does
    wait_for(first_lost_and_next_started, "the reaper to free the slot", timeout=60)
    assert max(held) == 1
    client.set(gate, 1)
    assert [h.result(timeout=60) for h in hs] == [2, 1, 1]
    order = [x.decode().split(":")[0] for x in client.lrange(starts, 0, -1)]
    # waiters in order; the lost attempt's retry queued behind them
    assert order == [hs[0].id, hs[1].id, hs[2].id, hs[0].id]
    assert hs[0].info().attempts[0].outcome == "lost"
    assert slots(app, "ck_hold", "K") == [] and waiters(app, "ck_hold", "K") == []


def test_declaration_and_call_errors(app: App) -> None:
    with pytest.raises(ValidationError) as exc:

        @app.task(name="ck.bad", concurrency_key="nope", max_concurrent=1)
        def bad(customer: str) -> None: ...

    assert exc.value.field == "concurrency_key" and "customer" in str(exc.value)
    for cap in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValidationError) as exc:

            @app.task(name=f"ck.cap{cap!r}", concurrency_key="c", max_concurrent=cap)  # type: ignore[arg-type]
            def capped(c: str) -> None: ...

        assert exc.value.field == "max_concurrent"
    with pytest.raises(ValidationError, match="needs max_concurrent"):

        @app.task(name="ck.nocap", concurrency_key="c")
        def nocap(c: str) -> None: ...

    @app.task(name="ck.ok", concurrency_key="c", max_concurrent=1)
    def ok(c: object, other: int = 0) -> None: ...

    @app.task(name="ck.percall", max_concurrent=3)
    def percall() -> None: ...

    @app.task(name="ck.none")
    def none() -> None: ...

    assert ok.enqueue(42).info().concurrency_key == "42"  # stringified
    assert ok.enqueue(c="x", _concurrency_key="y").info().concurrency_key == "y"
    assert percall.enqueue(_concurrency_key="t").info().max_concurrent == 3
    assert percall.enqueue().info().concurrency_key is None  # no key: not limited
    with pytest.raises(ValidationError) as exc:
        ok.enqueue(None)
    assert exc.value.field == "args[0]"
    with pytest.raises(ValidationError, match="1 to 200 bytes"):
        ok.enqueue("é" * 101)
    with pytest.raises(ValidationError) as exc:
        none.enqueue(_concurrency_key="k")
    assert exc.value.field == "_concurrency_key"


def test_a_jobs_tasks_take_their_registered_key(app: App) -> None:
    @app.task(name="ck.job", concurrency_key="customer", max_concurrent=1, retries=0)
    def keyed(customer: str) -> None: ...

    app.jobs.put(JobSpec(name="sync", tasks={"a": Task("ck.job", args=("C",))}))
    runs = [app.jobs.trigger("sync") for _ in range(2)]
    ids = [f"{rid}/a" for rid in runs]
    assert [app.get(i).info().concurrency_key for i in ids] == ["C", "C"]
    leased = [x.iid for x in app.broker.leases.lease(0, "w", 10, 60_000, ["default"], ())]
    assert leased == [ids[0]]
    assert app.get(ids[1]).state == "waiting"
    assert waiters(app, "ck.job", "C") == [ids[1]]
    with pytest.raises(ValidationError) as exc:
        app.jobs.put(JobSpec(name="bad", tasks={"a": Task("ck.job", kwargs={"customer": None})}))
    assert exc.value.field == "tasks.a.kwargs.customer"


def test_task_show_the_api_and_the_page_show_the_slots(app: App) -> None:
    @app.task(name="ck.faces", concurrency_key="c", max_concurrent=1, retries=0)
    def faces(c: str) -> None: ...

    first, second = faces.enqueue("F"), faces.enqueue("F")
    app.broker.leases.lease(0, "w", 10, 60_000, ["default"], ())

    details = task_details(app, second.id, 0)
    assert details.concurrency is not None
    assert "concurrency 'F' 1/1 held, 1 waiting (this one #1)" in " ".join(
        render_task(details).split()
    )
    shown = details.to_json()["concurrency"]
    assert shown == {
        "key": "F", "max_concurrent": 1, "holders": [first.id], "waiting": 1, "position": 1,
    }  # fmt: skip
    assert "concurrency" not in task_details(app, app.enqueue("echo", 1).id, 0).to_json()

    web = create_app(app, admin_token="ck-admin").test_client()
    web.environ_base["HTTP_AUTHORIZATION"] = "Bearer ck-admin"
    got = web.get(f"/v1/tasks/{second.id}").get_json()
    assert got["state"] == "waiting" and got["concurrency"] == shown
    created = web.post(
        "/v1/tasks", json={"name": "ck.faces", "args": ["G"], "concurrency_key": "H"}
    )
    assert created.status_code == 201 and created.get_json()["concurrency_key"] == "H"
    ui = create_app(app, admin_token="ck-admin").test_client()
    assert ui.get("/login").status_code == 200
    with ui.session_transaction() as session:
        csrf = session["csrf_token"]
    assert ui.post("/login", data={"csrf_token": csrf, "token": "ck-admin"}).status_code == 303
    page = ui.get(f"/tasks/{second.id}").get_data(as_text=True)
    assert "concurrency key" in page and "1 of 1 slots held, 1 waiting (this one #1)" in page


def test_doctor_finds_and_repairs_a_waiter_missing_from_its_list(app: App) -> None:
    @app.task(name="ck.doc", concurrency_key="c", max_concurrent=1, retries=0)
    def doc(c: str) -> None: ...

    first, second = doc.enqueue("D"), doc.enqueue("D")
    [lease] = app.broker.leases.lease(0, "w", 10, 60_000, ["default"], ())
    assert lease.iid == first.id and second.state == "waiting"
    assert examine(app.broker).findings == ()
    app.broker.client.delete(app.broker.keys.ckwaiting(0, "default", "ck.doc", "D"))  # lost by hand
    [finding] = examine(app.broker).findings
    assert finding.kind == "waiting_missing" and finding.repairable
    [fixed] = examine(app.broker, repair=True).findings
    assert fixed.repaired and "waiting list" in fixed.action
    assert waiters(app, "ck.doc", "D") == [second.id]
    assert examine(app.broker).findings == ()


def test_a_debounced_call_cannot_carry_a_concurrency_key(app: App) -> None:
    """A debounce call replaces the held task's arguments; the concurrency key read
    from them would go stale under a waiting task, so the two are refused together
    (and nothing is written)."""

    @app.task(name="ck.debounced", concurrency_key="customer", max_concurrent=1, debounce=5)
    def debounced(customer: str) -> None: ...

    with pytest.raises(ValidationError, match="debounce: a debounced task cannot"):
        debounced.enqueue("c1")
    with pytest.raises(ValidationError, match="_debounce: a debounced task cannot"):
        app.tasks["ck.debounced"].enqueue("c1", _debounce=3)
