"""A 10-second Redis outage under a worker process and a beat process.

The test's own redis-server (AOF on) is stopped while a task runs and started
again on the same port and data directory 10 s later.  What must hold
(docs/operations.md, "What a Redis crash costs"): neither process dies; each
logs one WARNING when Redis goes and one INFO when it is back (not a line per
retry); the attempt that finished while Redis was down is reported afterwards
and its task ends succeeded after that one attempt (its lease outlives the
outage); the beat fires every second of the outage late, once each, none
skipped (invariant 2).

(tests/chaos/test_worker_chaos.py covers a SIGKILLed server restarted at once;
tests/integration/test_dashboard_outage.py the dashboard under an outage.)
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import chaos_app  # tests/apps
import pytest
from worker_procs import wait_for, worker_spawner
from workload import beat_spawner, every_second_job, fire_times

from redcron import App
from redcron.embedded import EmbeddedRedis
from redcron.model.states import TaskState

pytestmark = [pytest.mark.slow, pytest.mark.chaos]

OUTAGE_S = 10.0
WENT = "retrying with back-off until Redis answers"
BACK = "Redis answers again after"


def test_worker_and_beat_ride_out_a_ten_second_outage(
    own_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    server = own_redis  # stopped and started again
    prefix = f"t{uuid.uuid4().hex[:8]}"
    app = App(server.url, prefix=prefix, min_lease_ttl=0.5)
    chaos_app.register(app)
    with (
        worker_spawner(server.url, prefix, tmp_path, concurrency=2) as spawn,
        beat_spawner(server.url, prefix, tmp_path) as spawn_beat,
    ):
        job = every_second_job(app)
        # the lease outlives the outage: the attempt that ends meanwhile is
        # reported afterwards, not reaped
        worker = spawn(lease_ttl=30.0)
        beat = spawn_beat("beat0")
        wait_for(lambda: len(app.jobs.runs(job)) >= 2, "the beat fires", 20)
        # runs 4 s; ends while Redis is down
        task = app.enqueue("slow", 4.0)
        attempts = chaos_app.rec_key(app, "attempts", task.id)
        wait_for(lambda: app.broker.client.llen(attempts) == 1, "the task starts", 20)
        before = app.broker.server_ms()
        app.close()
        server.stop()
        down_at = time.monotonic()
        time.sleep(OUTAGE_S)
        assert worker.poll() is None and beat.proc.poll() is None, "a process died"
        server.start()
        up_at = time.monotonic()

        assert task.result(timeout=30) == "attempt-1"
        info = task.info()
        assert info.state == TaskState.SUCCEEDED
        assert [a.outcome for a in info.attempts] == ["succeeded"], "the task ran again"
        assert app.broker.client.llen(attempts) == 1
        # it began before the stop and ran 4 s (< the outage): it ended while Redis
        # was down, and its report landed once Redis was back
        took = re.search(
            rf"task slow {task.id} .* attempt 1/\d+ succeeded in ([\d.]+)s", worker.log()
        )
        assert took is not None and 4.0 <= float(took.group(1)) < OUTAGE_S, worker.log()[-2000:]

        # the fires of the outage come late, once each, none skipped
        after = app.broker.server_ms()

        def caught_up() -> list[int] | None:
            nominal = fire_times(app, job)
            return nominal if nominal[-1] >= after else None

        nominal = wait_for(caught_up, "the beat catches up", 20)
        assert nominal[0] <= before, "the beat fired before the outage"
        assert len([n for n in nominal if before < n < after]) >= OUTAGE_S - 1

        # one warning when Redis went, one line when it came back, per process
        time.sleep(1.5)  # the beat's back-off is a steady second
        for name, log in (("worker", worker.log()), ("beat", beat.log())):
            assert log.count(WENT) == 1, f"{name}: {log.count(WENT)} outage warnings"
            assert log.count(BACK) == 1, f"{name}: {log.count(BACK)} recovery lines"
            retries = [line for line in log.splitlines() if "WARNING" in line]
            assert len(retries) <= 2, f"{name} logged a line per retry: {retries}"
        assert worker.poll() is None and beat.proc.poll() is None
        print(f"outage {up_at - down_at:.1f}s; {len(nominal)} fires")
    app.close()
