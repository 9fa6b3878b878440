"""``redcron bench faces``: what the dashboard's pages, API lists and ``/metrics``
cost as tenants grow.

Each size is a fresh key prefix on the same Redis: ``N`` tenants, each with one
job (a cron schedule never due during the run), one queued task, one delayed
(countdown) task and one dead-lettered task, and ``N / 5`` registered workers
(at least 10; 2,000 at 10,000 tenants).  A list at the smallest size may show
fewer rows than a full page at the largest: the ``?limit=10`` variants compare
the same rows, what a request costs apart from its page's size.  Each path
is requested through Flask's test client (no HTTP server, no network: the time
is the dashboard's and Redis's) with the admin token, a few times; the figure is
the median, and the reply's size is noted.  The bounded-work target of issue 18
is every path at the largest size within 3x of the smallest, and the
``/v1/jobs`` and ``/metrics`` replies under 1 MB.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Sequence
from typing import Any

import flask
from flask.testing import FlaskClient

from redcron.app import App
from redcron.cli.bench.fixtures import bench_run, redis_for_bench
from redcron.dashboard import create_app
from redcron.dashboard.totals import EXTENSION as TOTALS
from redcron.engine import FailItem, Registration, WorkerRegistry
from redcron.model.jobs import JobSpec, Task

#: (label, path) of every face measured; pages log in with the admin token
PATHS = (
    ("overview", "/"),
    ("tenants page", "/tenants"),
    ("jobs page", "/jobs"),
    ("GET /v1/jobs", "/v1/jobs"),
    # the same page size at both sizes: what a request costs apart from the rows
    ("GET /v1/jobs?limit=10", "/v1/jobs?limit=10"),
    ("GET /v1/runs", "/v1/runs"),
    ("/metrics", "/metrics"),
    ("DLQ page", "/dlq"),
    ("GET /v1/dlq", "/v1/dlq"),
    ("GET /v1/dlq?limit=10", "/v1/dlq?limit=10"),
    ("workers page", "/workers"),
    ("GET /v1/workers", "/v1/workers"),
    ("GET /v1/workers?limit=10", "/v1/workers?limit=10"),
)
#: requests per path; the median is reported
REPEATS = 5
#: the issue's targets
MAX_RATIO = 3.0
MAX_REPLY_BYTES = 1_000_000
#: the paths whose reply must stay under MAX_REPLY_BYTES
SIZE_CAPPED = ("GET /v1/jobs", "/metrics")
#: jobs written per put_many call
BATCH = 2_000
#: tenants per registered worker, and the fewest workers (a page of 10 at every size)
TENANTS_PER_WORKER = 5
MIN_WORKERS = 10
#: tasks leased and failed per call while dead-lettering
DEAD_BATCH = 256
#: the queue the dead-lettered tasks go through (no bench worker serves it)
DEAD_QUEUE = "bench-dead"


def tenant_jobs(tenants: int) -> list[JobSpec]:
    """One job per tenant, due once a year (1 January, midnight): never due in a run."""
    return [
        JobSpec(
            name="nightly",
            tenant=f"t{i:05d}",
            cron="0 0 1 1 *",
            tasks={"t": Task("bench.noop")},
        )
        for i in range(tenants)
    ]


def populate(app: App, tenants: int) -> float:
    """``tenants`` tenants, each with one job and one queued task; the seconds it took."""
    t0 = time.perf_counter()
    specs = tenant_jobs(tenants)
    for i in range(0, len(specs), BATCH):
        app.jobs.put_many(specs[i : i + BATCH])
    noop = app.tasks["bench.noop"]
    for spec in specs:
        noop.enqueue_many([()], _tenant=spec.tenant)
        noop.enqueue_many([()], _tenant=spec.tenant, _countdown=86_400)
        noop.enqueue_many([()], _tenant=spec.tenant, _queue=DEAD_QUEUE)
    dead_letter(app)
    registry = WorkerRegistry(app.broker)
    for i in range(max(MIN_WORKERS, tenants // TENANTS_PER_WORKER)):
        reg = Registration(f"bench-w{i:05d}", "bench", i, ("default",), (), 4, 0, ("bench.noop",))
        registry.publish(reg, 3_600_000)
    return time.perf_counter() - t0


def dead_letter(app: App) -> None:
    """Lease every task of :data:`DEAD_QUEUE` and fail it for good: one DLQ entry each."""
    broker = app.broker
    for shard in range(broker.shards):
        while True:
            leases = broker.leases.lease(shard, "bench-dead", DEAD_BATCH, 600_000, [DEAD_QUEUE])
            if not leases:
                break
            items = [FailItem(x.iid, x.epoch, "failed", "bench", False) for x in leases]
            broker.leases.fail(shard, "bench-dead", items)


def _clients(web: flask.Flask, admin: str) -> tuple[FlaskClient, FlaskClient]:
    """A bearer-token client for the API and ``/metrics``, and a logged-in one for pages."""
    api = web.test_client()
    api.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {admin}"
    pages = web.test_client()
    pages.get("/login")
    with pages.session_transaction() as session:
        csrf = session["csrf_token"]
    resp = pages.post("/login", data={"token": admin, "csrf_token": csrf})
    if resp.status_code != 303:
        raise RuntimeError(f"bench login failed: {resp.status_code}")
    return api, pages


def measure(app: App) -> tuple[dict[str, tuple[float, int]], float]:
    """Label -> (median ms, reply bytes) of every path of :data:`PATHS`, and the
    seconds one background totals refresh took.

    Each path is requested once untimed first: the first overview or scrape of
    a process starts the totals refresh (``dashboard/totals.py``), which runs in
    a thread of the same process, and is waited for, so the timed requests see
    the steady state (a refresh at most every ``TTL_S`` while someone looks);
    the refresh's own cost is reported beside."""
    admin = secrets.token_urlsafe(16)
    web = create_app(app, admin_token=admin)
    api, pages = _clients(web, admin)
    t0 = time.perf_counter()
    for _label, path in PATHS:
        (api if path.startswith(("/v1/", "/metrics")) else pages).get(path)
    web.extensions[TOTALS].wait(120)
    refresh_s = time.perf_counter() - t0
    out: dict[str, tuple[float, int]] = {}
    for label, path in PATHS:
        client = api if path.startswith(("/v1/", "/metrics")) else pages
        times, size = [], 0
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            resp = client.get(path)
            times.append(time.perf_counter() - t0)
            if resp.status_code != 200:
                raise RuntimeError(f"GET {path}: {resp.status_code}")
            size = len(resp.get_data())
        out[label] = (round(1000 * statistics.median(times), 1), size)
    return out, refresh_s


def faces(sizes: Sequence[int], redis_url: str | None) -> dict[str, Any]:
    """Time every face at each size of ``sizes`` (smallest first) on one Redis;
    each size on a fresh prefix, deleted after."""
    sizes = sorted(sizes)
    figures: dict[int, dict[str, tuple[float, int]]] = {}
    setup: dict[int, float] = {}
    refresh: dict[int, float] = {}
    with redis_for_bench(redis_url) as url:
        for n in sizes:
            with bench_run(url, "rcfaces") as run:
                setup[n] = populate(run.app, n)
                figures[n], refresh[n] = measure(run.app)
    small, big = sizes[0], sizes[-1]
    result: dict[str, Any] = {"tenants": sizes}
    met = True
    for label, _path in PATHS:
        row = {n: figures[n][label] for n in sizes}
        ratio = row[big][0] / max(row[small][0], 0.1)
        ok = ratio <= MAX_RATIO
        if label in SIZE_CAPPED:
            ok = ok and row[big][1] < MAX_REPLY_BYTES
        met = met and ok
        result[label] = {
            **{f"ms@{n}": row[n][0] for n in sizes},
            **{f"bytes@{n}": row[n][1] for n in sizes},
            "ratio": round(ratio, 2),
            "met": ok,
        }
    result["setup_s"] = {n: round(s, 1) for n, s in setup.items()}
    # the background count of every tenant's work (not on any request's path)
    result["totals_refresh_s"] = {n: round(s, 2) for n, s in refresh.items()}
    result["targets_met"] = met
    return result
