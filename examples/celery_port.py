"""A small Celery shop app, ported to redcron (docs/migrate-celery.md, "A whole
app, ported", shows the Celery original beside this file).

What it had in Celery, and what each became:

- ``beat_schedule`` with ``crontab(minute=30, hour=2)`` and
  ``timezone = "Europe/Berlin"``, ``args`` and ``options={"queue": ...}``
  → the job ``nightly-sales`` (``cron=``, ``tz=``, a task's ``args``, its ``queue``).
- ``chain(fetch_rate.s("EUR"), chord([region_total.s("eu"), ...], grand_total.s()))``
  → that job's DAG: ``rate`` → ``eu``, ``us`` → ``total``, the results handed
  along the edges (a parameter named after the upstream task, ``ctx.upstream``).
- ``autoretry_for=(ConnectionError,)``, ``retry_backoff=True`` → ``retry_on=``,
  ``retry_base``/``retry_cap``.
- ``rate_limit="10/s"`` → ``rate="10/s"`` (for all workers together, not per worker).
- ``task_prerun``/``task_postrun``/``task_failure`` signal handlers → an
  attempt hook (:class:`Timings`).
- A ``chord`` over a list known only at run time → the job ``resend-receipts``:
  a DAG task mapped over the list its upstream returns (``map_over=``), one
  instance per element, joined by the task downstream of it (the list of
  their results, in order).

Run it: ``redcron jobs apply -A examples.celery_port:app``, then ``python
examples/celery_port.py`` (a worker with the hook; ``redcron worker -A
examples.celery_port:app -Q default,reports`` runs it without the hook) and
``redcron beat -A examples.celery_port:app``.  ``tests/integration/
test_celery_port.py`` runs it on a real Redis.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from redcron import App, Context, Task
from redcron.worker import AttemptHook, Worker
from redcron.worker.execute import Attempt, Outcome

log = logging.getLogger(__name__)

app = App()  # REDCRON_REDIS_URL, REDCRON_PREFIX...: read here, not at import of redcron

#: the exchange rates service (demo data: a real app calls it over HTTP)
RATES = {"EUR": 0.5, "USD": 1.0}
#: how many more calls to drop, per currency: a flaky connection, for the demo
DROPS: dict[str, int] = {}
#: the day's sales per region, in the currency's units (demo data)
SALES = {"eu": [120, 80], "us": [200]}
#: the orders whose receipts a run resends (demo data: a query in a real app)
ORDERS = {101: "alice", 102: "bob", 103: "alice"}
#: the receipts sent: (customer, order)
SENT: list[tuple[str, int]] = []


# -- retries: autoretry_for → retry_on ---------------------------------------------


@app.task(name="shop.fetch_rate", retries=3, retry_base=1, retry_cap=600, retry_on=ConnectionError)
def fetch_rate(currency: str) -> float:
    """The rate of ``currency``: a dropped connection is retried with backoff;
    anything else (an unknown currency: KeyError) fails for good at once."""
    if DROPS.get(currency, 0) > 0:
        DROPS[currency] -= 1
        raise ConnectionResetError(f"rates service dropped the call for {currency}")
    return RATES[currency]


# -- the chord: results along the DAG's edges ---------------------------------------


@app.task(name="shop.region_total")
def region_total(region: str, rate: float) -> float:
    """One region's sales, converted: ``rate`` is the result of the DAG task named ``rate``."""
    return sum(SALES[region]) * rate


@app.task(name="shop.grand_total")
def grand_total(ctx: Context) -> float:
    """The chord callback: every upstream task's result, by its name in the DAG."""
    return float(sum(ctx.upstream.values()))


app.job(
    "nightly-sales",
    cron="30 2 * * *",  # crontab(minute=30, hour=2)
    tz="Europe/Berlin",  # app.conf.timezone, per job here
    tasks={
        # the beat entry's args=("EUR",) and options={"queue": "reports"}
        "rate": Task("shop.fetch_rate", args=["EUR"], queue="reports"),
        "eu": Task("shop.region_total", args=["eu"], depends_on=["rate"], queue="reports"),
        "us": Task("shop.region_total", args=["us"], depends_on=["rate"], queue="reports"),
        "total": Task("shop.grand_total", depends_on=["eu", "us"], queue="reports"),
    },
)


# -- rate_limit → rate, and a fan-out over a list known at run time -----------------

_sent_lock = threading.Lock()


@app.task(name="shop.orders_to_resend")
def orders_to_resend() -> list[dict[str, Any]]:
    """The list, only known now (a query in a real app): one element per order."""
    return [{"customer": c, "order_id": o} for o, c in sorted(ORDERS.items())]


@app.task(name="shop.send_receipt", rate="10/s")
def send_receipt(ctx: Context, orders_to_resend: dict[str, Any]) -> int:
    """One instance per element of ``orders_to_resend``'s list (the group), at
    most 10 a second across all workers."""
    order = orders_to_resend
    if ctx.once("sent"):  # a rerun after a lost lease sends nothing twice
        with _sent_lock:
            SENT.append((order["customer"], order["order_id"]))
    return int(order["order_id"])


@app.task(name="shop.receipts_sent")
def receipts_sent(send_receipt: list[int]) -> list[int]:
    """The chord's callback: every instance's result, in order, once all succeeded."""
    return send_receipt


app.job(
    "resend-receipts",  # manual runs only: redcron jobs trigger resend-receipts
    tasks={
        "orders_to_resend": Task("shop.orders_to_resend"),
        "send_receipt": Task("shop.send_receipt", map_over="orders_to_resend"),
        "receipts_sent": Task("shop.receipts_sent", depends_on=["send_receipt"]),
    },
)


# -- signals → an attempt hook ------------------------------------------------------


class Timings(AttemptHook):
    """``task_prerun``/``task_postrun``/``task_failure`` in one object: the time
    each attempt took, and the errors, per task name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: dict[str, float] = {}
        self.seconds: dict[str, list[float]] = {}
        self.failures: dict[str, list[str]] = {}

    def before_attempt(self, attempt: Attempt) -> None:  # task_prerun
        self.started[attempt.lease.iid] = time.monotonic()

    def after_attempt(self, attempt: Attempt, outcome: Outcome) -> None:  # task_postrun
        took = time.monotonic() - self.started.pop(attempt.lease.iid, time.monotonic())
        name = attempt.lease.name
        with self.lock:
            self.seconds.setdefault(name, []).append(took)
            if not outcome.ok:  # task_failure
                last = outcome.error.strip().splitlines()[-1:] or [outcome.outcome]
                self.failures.setdefault(name, []).append(last[0])
                log.warning("%s attempt %d failed: %s", name, attempt.lease.attempt, last[0])


def run_worker(**options: Any) -> Worker:
    """A worker for both queues, with the hook (``redcron worker`` takes no hooks)."""
    options.setdefault("queues", ["default", "reports"])
    return Worker(app, hooks=[Timings()], **options)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    run_worker().run()
