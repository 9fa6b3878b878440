"""The beat's read-ahead against a real Redis: the schedule paged by a cursor
(every row once, whatever the offset), every spec of a burst larger than a few
pages loaded before it is due, and a job that fell due while the tick went on
fired at once rather than a second later.  Timing is the bench's, never asserted."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.beat.beat import Beat
from redcron.beat.planning import PREFETCH_MS
from redcron.engine.beat import BeatStore, DueRow
from redcron.model.jobs import JobSpec, Task

TASKS = {"t": Task("noop")}


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


def test_due_page_reads_every_row_once_by_cursor_and_restarts_when_it_moved(app: App) -> None:
    key = app.broker.keys.schedule(0)
    # 250 rows at one score (a burst), 50 later, 10 outside the window
    app.broker.client.zadd(key, {f"0-a{i:03}": 5_000 for i in range(250)})
    app.broker.client.zadd(key, {f"0-b{i:03}": 6_000 + i for i in range(50)})
    app.broker.client.zadd(key, {f"0-c{i:03}": 99_000 for i in range(10)})
    store = BeatStore(app.broker)
    seen: list[DueRow] = []
    cursor = None
    while page := store.due_page(0, 1_000, 10_000, cursor, 40):
        seen += page
        cursor = page[-1]
    assert [r.job_id for r in seen] == [f"0-a{i:03}" for i in range(250)] + [
        f"0-b{i:03}" for i in range(50)
    ]
    # the cursor row fired (moved): the next page starts at the window's start again
    app.broker.client.zadd(key, {seen[100].job_id: 50_000})
    again = store.due_page(0, 1_000, 10_000, seen[100], 3)
    assert [r.job_id for r in again] == ["0-a000", "0-a001", "0-a002"]


def test_prefetch_loads_every_spec_of_a_burst_many_pages_long(app: App) -> None:
    # an hour ahead (not seconds): a slow put_many cannot let the fire time pass first
    at = (app.jobs.server_now() + timedelta(hours=1)).replace(microsecond=0)
    expr = f"{at.second} {at.minute} {at.hour} * * *"
    # 600 jobs due in the same second: 60 pages of 10, more than a read of 40 x batch
    specs = [JobSpec(name=f"j{i}", tenant=f"t{i % 7}", tasks=dict(TASKS), cron=expr)
             for i in range(600)]  # fmt: skip
    ids = [r.id for r in app.jobs.put_many(specs, allow_unregistered=True)]
    beat = Beat(app, name="b1", batch=10)
    beat.tick()  # owns the shard; its prefetch starts
    planner = beat._planner
    # "now" passed in: the window just reaches the burst, leaving the prefetch
    # ~10 s before it would hand over to the fire pass, however slow the machine
    now = int(at.timestamp() * 1000) - PREFETCH_MS + 1
    while planner.prefetch(beat.engine, 0, now, 10.0):
        pass
    assert all(planner.spec_of(jid) is not None for jid in ids)


def test_a_job_that_fell_due_during_the_tick_is_fired_at_once(app: App) -> None:
    beat = Beat(app, name="b1")
    beat.tick()
    job = app.jobs.put("late", tasks=TASKS, every="1h", allow_unregistered=True)
    now = server_ms(app)
    app.broker.client.zadd(app.broker.keys.schedule(0), {job.id: now - 10})
    beat._tick_ms = now - 20  # the fire pass read the schedule before the job fell due
    assert beat._idle_delay() == 0.0
    beat._tick_ms = now  # the fire pass saw it due and made no progress: not a busy loop
    assert beat._idle_delay() > 0.0
