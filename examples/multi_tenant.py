"""Several tenants on one pool of workers: weights, a cap, a noisy backfill.

Three tenants share the workers:

- ``acme``, weight 3: its steady work gets three shares;
- ``backfill``, weight 1 and **at most 4 leases at once** (``max_in_flight``):
  a re-import that queues 100 tasks at once;
- ``quiet``, weight 1: five tasks, enqueued *after* the backfill's 100.

Workers take tasks through the dispatcher (``lease.lua``): within a priority
class, tenants are served by weighted deficit round robin, never by arrival
order, and a tenant at its cap is skipped until one of its leases ends.  So:

- with FIFO, ``quiet``'s five tasks would wait behind 130 others; here they
  run within the first 25 tasks served, one per round (``acme`` three,
  ``backfill`` one, ``quiet`` one);
- a worker with many slots that leases all it can holds at most 4 of
  ``backfill``'s tasks at a time, while every ready task of the others
  is leased.

``python examples/multi_tenant.py`` plays both on the testing mode (no
server) and prints them; ``tests/testing/test_examples.py`` runs them and
asserts the counts (``tests/integration/test_multi_tenant_example.py`` runs
``--live`` on a real Redis).  To watch it on the dashboard (the Tenants page
shows each tenant's in-flight, queued and share of dispatch over the last
minute), with ``make run`` going::

    python examples/multi_tenant.py --live      # sets the tenants, enqueues the work
    redcron worker -A examples.multi_tenant:app -c 4
    redcron tenants list                        # or the dashboard's Tenants page
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass

from redcron import App

app = App()

#: tenant -> (weight, max_in_flight (0: no cap), tasks it enqueues)
TENANTS: dict[str, tuple[float, int, int]] = {
    "acme": (3.0, 0, 30),
    "backfill": (1.0, 4, 100),
    "quiet": (1.0, 0, 5),
}
#: the order they enqueue in: the quiet tenant last, behind everything
ORDER = ("backfill", "acme", "quiet")

#: the tenants served, in order (demo only: a real task has better things to do)
SERVED: list[str] = []


@app.task(name="mt.work")
def work(tenant: str, n: int, seconds: float = 0.0) -> int:
    """One unit of a tenant's work (``seconds`` of it: the live mode's)."""
    SERVED.append(tenant)
    if seconds:
        time.sleep(seconds)
    return n


def seed(target: App, seconds: float = 0.0) -> dict[str, int]:
    """Set the tenants' weights and caps (through ``target``: the App, or a
    TestApp wrapping it) and enqueue their work (one round trip per tenant);
    returns how many tasks each enqueued."""
    for tenant, (weight, cap, _n) in TENANTS.items():
        target.tenants.set(tenant, weight=weight, max_in_flight=cap)
    for tenant in ORDER:
        n = TENANTS[tenant][2]
        work.enqueue_many([(tenant, i, seconds) for i in range(n)], _tenant=tenant)
    return {tenant: TENANTS[tenant][2] for tenant in ORDER}


@dataclass
class Fairness:
    """What :func:`demo` saw."""

    #: the first 25 tasks one worker slot ran, by tenant initial
    first_25: str
    #: where each of quiet's tasks ran in that order (0-based; 130+ with FIFO)
    quiet_positions: list[int]
    #: how many tasks of each tenant a worker that leases all it can held at once
    one_batch: dict[str, int]
    #: every task ran in the end
    total: int


def demo() -> Fairness:
    """The two scenes, each on a fresh testing-mode server."""
    from redcron.testing import TestApp  # the extra is for tests and this demo only

    # one worker slot: the order the dispatcher serves them in
    SERVED.clear()
    with TestApp(app) as t:
        seed(t)
        total = t.drain().succeeded
    order = list(SERVED)
    first_25 = "".join(tenant[0] for tenant in order[:25])
    quiet_positions = [i for i, tenant in enumerate(order) if tenant == "quiet"]

    # many slots: lease everything the dispatcher hands out before running any
    # (drain without recursion leases all that is ready, then runs it)
    SERVED.clear()
    with TestApp(app) as t:
        seed(t)
        t.drain(with_recursion=False)
    one_batch = dict(Counter(SERVED))
    return Fairness(first_25, quiet_positions, one_batch, total)


def live() -> None:
    """Seed the Redis ``App()`` finds (``make run``'s, in this directory) with
    slow-ish tasks, for a worker and the dashboard to show."""
    try:
        print("enqueued:", seed(app, seconds=0.2))
    finally:
        app.close()
    print("now: redcron worker -A examples.multi_tenant:app -c 4; then redcron tenants list")


if __name__ == "__main__":
    if sys.argv[1:] == ["--live"]:
        live()
    else:
        print(demo())
