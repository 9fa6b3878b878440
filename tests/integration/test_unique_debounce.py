"""Unique windows and debounce (issue 21 §4) on a real Redis, with ``now``
passed to the enqueue script (no sleeping): rows are built by the App (its
option checks, its key digest) and submitted with an explicit now."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from redcron import App, ValidationError
from redcron.app import TaskDef, TaskHandle
from redcron.cli.tasks import render_task, task_details
from redcron.dashboard import create_app
from redcron.errors import Rejected
from redcron.model import dedupe

T0 = 1_700_000_000_000


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


def submit(task: TaskDef[Any, Any], now: int, *args: Any, **kwargs: Any) -> TaskHandle:
    """``task.enqueue`` with the script's now given (the App builds the row)."""
    opts = {k: kwargs.pop(k) for k in list(kwargs) if k.startswith("_")}
    row = task.app._row(task.name, "python", [list(args), kwargs], task.options, opts)
    folded = task.app.broker.enqueuer.submit([row], now=now).folded
    return TaskHandle.of_row(task.app, row.iid, folded)


def keys_and_values(app: App) -> dict[bytes, Any]:
    """Every key of the test's prefix with a dump of its value (writes show)."""
    client = app.broker.client
    prefix = app.settings.prefix
    return {k: client.dump(k) for k in client.scan_iter(match=f"{prefix}*")}


def test_a_duplicate_within_the_window_returns_the_task_and_writes_nothing(app: App) -> None:
    @app.task(name="u.send", unique_for=60)
    def send(to: str, body: str = "") -> None: ...

    first = submit(send, T0, to="ann", body="hi")
    assert not first.duplicate
    before = keys_and_values(app)
    # the same arguments (kwargs in another order count the same) 59.999 s on
    again = submit(send, T0 + 59_999, body="hi", to="ann")
    assert again.duplicate and again.id == first.id
    assert keys_and_values(app) == before  # nothing written
    # other arguments: another key
    other = submit(send, T0 + 1, "bob", body="hi")
    assert not other.duplicate and other.id != first.id
    info = first.info()
    assert info.unique_key is not None and info.unique_key.startswith(dedupe.DIGEST_LABEL)
    assert info.unique_until is not None
    assert int(info.unique_until.timestamp() * 1000) == T0 + 60_000


def test_after_the_window_a_new_task_is_made(app: App) -> None:
    @app.task(name="u.win", unique_for=10)
    def win() -> None: ...

    first = submit(win, T0)
    later = submit(win, T0 + 10_000)  # the window is [T0, T0 + 10 s)
    assert not later.duplicate and later.id != first.id
    assert submit(win, T0 + 10_001).id == later.id  # the new task holds the key now


def test_a_task_that_ended_frees_its_key(app: App) -> None:
    @app.task(name="u.end", unique_for=3600)
    def end() -> None: ...

    first = submit(end, T0)
    first.cancel()  # any terminal state frees it
    second = submit(end, T0 + 1)
    assert not second.duplicate and second.id != first.id
    assert submit(end, T0 + 2).id == second.id


def test_an_explicit_key_replaces_the_arguments(app: App) -> None:
    @app.task(name="u.key", unique_for=60)
    def key(n: int) -> None: ...

    a = submit(key, T0, 1, _unique_key="order-7")
    b = submit(key, T0 + 1, 2, _unique_key="order-7")
    assert b.duplicate and b.id == a.id
    assert a.info().decoded_args() == [[1], {}]  # the duplicate's arguments are dropped
    assert a.info().unique_key == "order-7"

    # a key is scoped to its task
    @app.task(name="u.other", unique_for=60)
    def other(n: int) -> None: ...

    assert not submit(other, T0 + 2, 3, _unique_key="order-7").duplicate


def test_a_per_call_window_and_duplicates_within_one_batch(app: App) -> None:
    @app.task(name="u.batch")
    def batch(n: int) -> None: ...

    hs = batch.enqueue_many([(1,), (2,), (1,)], _unique_for=60)
    assert [h.duplicate for h in hs] == [False, False, True]
    assert hs[2].id == hs[0].id
    assert batch.enqueue(1, _unique_for=60).id == hs[0].id  # the real clock: within 60 s


def race(
    enqueue: Callable[[int], TaskHandle], threads: int = 8, each: int = 10
) -> list[TaskHandle]:
    """``each`` calls of ``enqueue(n)`` (n distinct) from each of ``threads`` threads at once."""
    handles: list[TaskHandle] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def go(k: int) -> None:
        start.wait()
        for i in range(each):
            h = enqueue(k * each + i)
            with lock:
                handles.append(h)

    pool = [threading.Thread(target=go, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert len(handles) == threads * each
    return handles


def test_many_concurrent_enqueues_of_one_key_make_exactly_one_task(app: App) -> None:
    @app.task(name="u.race", unique_for=600)
    def same(n: int) -> None: ...

    for handles in (
        race(lambda n: same.enqueue(1)),
        race(lambda n: same.enqueue(n, _unique_key="k")),
    ):
        assert len({h.id for h in handles}) == 1
        assert sum(not h.duplicate for h in handles) == 1
    assert app.broker.client.zcard(app.broker.keys.recent(0)) == 2  # one instance per key


def test_many_concurrent_debounce_calls_make_one_task_that_took_them_all(app: App) -> None:
    @app.task(name="d.race", debounce=600)
    def settle(n: int) -> None: ...

    handles = race(settle.enqueue)
    assert len({h.id for h in handles}) == 1
    assert sum(not h.duplicate for h in handles) == 1
    assert handles[0].info().debounce_calls == 80
    assert app.broker.client.zcard(app.broker.keys.recent(0)) == 1


def test_debounce_moves_the_start_caps_it_and_the_last_call_wins(app: App) -> None:
    @app.task(name="d.sync", debounce=10, max_wait=25)
    def sync(n: int) -> None: ...

    first = submit(sync, T0, 1)
    assert not first.duplicate
    info = first.info()
    assert info.state == "scheduled" and due_ms(first) == T0 + 10_000
    h = submit(sync, T0 + 8_000, 2)  # moves the start to 18 s
    assert h.duplicate and h.id == first.id and due_ms(first) == T0 + 18_000
    submit(sync, T0 + 16_000, 3)  # 26 s, capped at max_wait: 25 s
    assert due_ms(first) == T0 + 25_000
    info = first.info()
    assert info.decoded_args() == [[3], {}]
    assert info.debounce_calls == 3
    assert _ms(info.debounce_first_at) == T0 and _ms(info.debounce_last_at) == T0 + 16_000
    score = app.broker.client.zscore(app.broker.keys.timers(0), first.id)
    assert score == T0 + 25_000  # the timer moved with it
    # at (or after) its start a call begins a new group
    nxt = submit(sync, T0 + 25_000, 4)
    assert not nxt.duplicate and nxt.id != first.id and due_ms(nxt) == T0 + 35_000


def test_a_started_debounce_group_takes_no_more_calls(app: App) -> None:
    @app.task(name="d.lease", debounce=5)
    def lease_me() -> None: ...

    first = submit(lease_me, T0)
    app.broker.scripts.run("promote", [app.broker.keys.shard(0)], [T0 + 5_000, 500])
    assert first.state == "ready"
    second = submit(lease_me, T0 + 4_000)  # before its due by the clock, but it has started
    assert not second.duplicate and second.id != first.id


def test_validation_names_the_field(app: App) -> None:
    bad: list[tuple[dict[str, Any], str]] = [
        ({"unique_for": 0}, "unique_for"),
        ({"unique_for": -1}, "unique_for"),
        ({"unique_for": float("nan")}, "unique_for"),
        ({"unique_for": float("inf")}, "unique_for"),
        ({"debounce": 0}, "debounce"),
        ({"debounce": 5, "max_wait": 4}, "max_wait"),
        ({"max_wait": 4}, "max_wait"),
        ({"unique_for": 5, "debounce": 5}, "debounce"),
    ]
    for i, (opts, field) in enumerate(bad):
        with pytest.raises(ValidationError) as exc:
            app.task(name=f"v.{i}", **opts)(lambda: None)
        assert exc.value.field == field, opts

    @app.task(name="v.ok")
    def ok() -> None: ...

    for opts, field in [
        ({"_unique_for": 0}, "_unique_for"),
        ({"_debounce": float("nan")}, "_debounce"),
        ({"_unique_key": "k"}, "_unique_key"),
        ({"_unique_for": 5, "_unique_key": ""}, "_unique_key"),
        ({"_debounce": 5, "_countdown": 1}, "_countdown"),
    ]:
        with pytest.raises(ValidationError) as exc:
            ok.enqueue(**opts)
        assert exc.value.field == field, opts


def due_ms(h: TaskHandle) -> int | None:
    return _ms(h.info().due_at)


def _ms(t: Any) -> int | None:
    return None if t is None else round(t.timestamp() * 1000)


def test_the_rest_route_folds_and_names_its_body_fields(app: App) -> None:
    @app.task(name="api.u")
    def u(n: int) -> None: ...

    client = create_app(app, admin_token="tok").test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer tok"
    body = {"name": "api.u", "args": [1], "unique_for_s": 60}
    first = client.post("/v1/tasks", json=body)
    assert first.status_code == 201, first.get_data(as_text=True)
    got = first.get_json()
    assert got["duplicate"] is False and got["unique_key"].startswith(dedupe.DIGEST_LABEL)
    again = client.post("/v1/tasks", json=body)
    assert again.status_code == 200
    assert again.get_json()["duplicate"] is True and again.get_json()["id"] == got["id"]
    keyed = {"name": "api.u", "args": [2], "debounce_s": 30, "unique_key": "k"}
    d1 = client.post("/v1/tasks", json=keyed).get_json()
    d2 = client.post("/v1/tasks", json={**keyed, "args": [3]}).get_json()
    assert d2["duplicate"] and d2["id"] == d1["id"] and d2["debounce_calls"] == 2
    assert d2["args"] == [[3], {}] and d2["debounce_key"] == "k"
    for extra, field in [
        ({"unique_for_s": 0}, "unique_for_s"),
        ({"debounce_s": -1}, "debounce_s"),
        ({"debounce_s": 5, "max_wait_s": 1}, "max_wait_s"),
        ({"debounce_s": 5, "countdown_s": 1}, "countdown_s"),
        ({"unique_key": "k"}, "unique_key"),
        ({"unique_for_s": 5, "debounce_s": 5}, "debounce_s"),
    ]:
        resp = client.post("/v1/tasks", json={"name": "api.u", "args": [1], **extra})
        assert resp.status_code == 400, extra
        assert resp.get_json()["error"]["field"] == field, (extra, resp.get_json())


def test_task_show_and_the_task_page_show_the_key_and_the_window(app: App) -> None:
    @app.task(name="show.u", unique_for=60)
    def u() -> None: ...

    @app.task(name="show.d", debounce=10, max_wait=30)
    def d(n: int) -> None: ...

    uh = submit(u, T0, _unique_key="invoice-9")
    dh = submit(d, T0, 1)
    submit(d, T0 + 2_000, 2)
    text = render_task(task_details(app, uh.id, 0))
    assert "unique key  invoice-9 (held until 2023-11-14T22:14:20.000Z" in text
    text = render_task(task_details(app, dh.id, 0))
    assert "debounce    sha1:" in text
    assert "starts 10s after the last call, at most 30s after the first; 2 call(s)" in text
    web = create_app(app, admin_token="tok")
    client = web.test_client()
    client.get("/login")
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    client.post("/login", data={"token": "tok", "csrf_token": csrf})
    page = client.get(f"/tasks/{uh.id}").get_data(as_text=True)
    assert "unique key" in page and "invoice-9" in page
    page = client.get(f"/tasks/{dh.id}").get_data(as_text=True)
    assert "debounce" in page and "2 calls" in page


def test_a_batch_of_many_calls_folds_across_its_script_calls(app: App) -> None:
    @app.task(name="u.many", unique_for=600)
    def many(n: int) -> None: ...

    app.tenants.set("default", max_queued=400)  # admission reserves room for 300
    hs = many.enqueue_many([(i % 2,) for i in range(300)])  # 300 rows: two enqueue calls
    assert len({h.id for h in hs}) == 2 and sum(not h.duplicate for h in hs) == 2
    assert [h.id for h in hs[:2]] == [hs[298].id, hs[299].id]
    # the room admission reserved for the folded rows is given back: 398 fit
    assert not app.broker.client.exists(app.broker.keys.reserved(0, "default"))
    assert len(many.enqueue_many([(i,) for i in range(2, 400)])) == 398

    @app.task(name="d.many", debounce=60)
    def settle(n: int) -> None: ...

    ds = settle.enqueue_many([(i,) for i in range(5)])
    assert len({h.id for h in ds}) == 1 and [h.duplicate for h in ds] == [False] + [True] * 4
    info = ds[0].info()
    assert info.decoded_args() == [[4], {}] and info.debounce_calls == 5


def test_a_call_replaces_the_declared_mode(app: App) -> None:
    @app.task(name="o.d", debounce=60)
    def d(n: int) -> None: ...

    first = submit(d, T0, 1, _unique_for=10)
    assert first.info().state == "ready" and first.info().unique_key is not None
    assert submit(d, T0 + 1, 1, _unique_for=10).duplicate
    assert submit(d, T0 + 2, 1).info().debounce_key is not None  # the declared debounce


def test_a_malformed_dedupe_field_is_refused_and_writes_nothing(app: App) -> None:
    @app.task(name="m.t")
    def t() -> None: ...

    row = app._row("m.t", "python", [[], {}], t.options, {})
    before = keys_and_values(app)
    for bad in ("x|ab|1|0|k", "u|ab|0|0|k", "u|ab|10|5|k", "d|ab|10|5|k", "u|zz|10|0|k"):
        with pytest.raises(Rejected, match="dedupe"):
            app.broker.enqueuer.submit([row._replace(dedupe=bad)], now=T0)
    assert keys_and_values(app) == before


def test_per_call_debounce_options_on_a_declared_debounce(app: App) -> None:
    @app.task(name="o.cap", debounce=10, max_wait=20)
    def cap(n: int) -> None: ...

    first = submit(cap, T0, 1, _debounce=5)  # keeps the declared max_wait
    assert first.info().max_wait_s == 20 and due_ms(first) == T0 + 5_000
    with pytest.raises(ValidationError) as exc:
        cap.enqueue(1, _debounce=30)  # above the declared max_wait
    assert exc.value.field == "_max_wait"
    # a later call's cap does not move the group's: the first call's holds
    assert submit(cap, T0 + 4_000, 2, _debounce=19, _max_wait=40).duplicate
    assert due_ms(first) == T0 + 20_000 and first.info().max_wait_s == 20
