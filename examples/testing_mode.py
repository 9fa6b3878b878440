"""Your own unit tests with the testing mode (``redcron.testing.TestApp``).

The top half is a small application, as you would write it: an App, a few
tasks, the code that enqueues them and a nightly cron job.  The bottom half
is its test module, as you would write *that*: pytest tests that enqueue,
``drain``, ``advance`` the clock, ``assert_enqueued`` and ``perform``,
without a Redis server and without sleeping.  Run them::

    pip install 'redcron[testing]' pytest
    pytest examples/testing_mode.py

(``tests/testing/test_examples.py`` does, in a subprocess, as you would.)
In a real project the two halves are two files: ``shop/tasks.py`` and
``tests/test_tasks.py``, which imports the App from it.  docs/testing.md
describes every helper and the testing mode's limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from redcron import App, Context, Retry, Task, TaskFailed, ValidationError
from redcron.testing import TestApp

# -- the application --------------------------------------------------------------

app = App()

#: the payment gateway (a test swaps in its own)
GATEWAY: dict[str, object] = {"up": True, "declined": set()}
#: what the tasks did (a real shop writes a database and sends mail)
SENT: list[str] = []


@app.task(name="shop.charge", retries=3, retry_base=30, retry_cap=300)
def charge(ctx: Context, order_id: int, cents: int) -> str:
    if not GATEWAY["up"]:
        raise Retry("gateway down", delay=60)  # a fixed delay, not the backoff
    declined = GATEWAY["declined"]
    assert isinstance(declined, set)
    if order_id in declined:
        raise RuntimeError(f"order {order_id}: card declined")
    return f"charged {cents} for order {order_id} (key {ctx.idem_key})"


@app.task(name="shop.send_receipt")
def send_receipt(order_id: int, email: str) -> None:
    SENT.append(f"receipt {order_id} -> {email}")


@app.task(name="shop.totals")
def totals(prices: list[int]) -> tuple[int, int]:
    return sum(prices), len(prices)


@app.task(name="shop.purge_carts")
def purge_carts(older_than_days: int) -> str:
    return f"purged carts older than {older_than_days} days"


def place_order(order_id: int, email: str, cents: int) -> None:
    """The code under test: charge now, send the receipt ten minutes later."""
    charge.enqueue(order_id, cents)
    send_receipt.enqueue(order_id, email, _countdown=600)


app.job(
    "purge-carts",
    cron="0 3 * * *",
    tz="Europe/Paris",
    tasks={"purge": Task("shop.purge_carts", kwargs={"older_than_days": 30})},
)


# -- its tests ----------------------------------------------------------------------

T0 = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)


@pytest.fixture
def shop() -> Iterator[TestApp]:
    """The shop's App on a fake server, its clock standing at T0."""
    GATEWAY.update(up=True, declined=set())
    SENT.clear()
    with TestApp(app, now=T0) as t:
        yield t


def test_an_order_charges_now_and_sends_the_receipt_later(shop: TestApp) -> None:
    place_order(7, "ann@example.com", 1999)
    shop.assert_enqueued(charge, args=[7, 1999])
    shop.assert_enqueued(send_receipt, args=[7, "ann@example.com"], within=600)
    shop.refute_enqueued(send_receipt, within=599)  # not before ten minutes

    assert shop.drain().succeeded == 1  # the charge; the receipt is not due
    assert SENT == []
    assert shop.advance(600).succeeded == 1  # ten minutes pass: it goes on time
    assert SENT == ["receipt 7 -> ann@example.com"]
    shop.refute_enqueued(send_receipt)


def test_a_gateway_outage_retries_after_the_delay_it_asked_for(shop: TestApp) -> None:
    GATEWAY["up"] = False
    charge.enqueue(8, 500)
    first = shop.drain()
    assert (first.failed, first.retried) == (1, 1)
    assert shop.advance(59).attempts == 0  # Retry(delay=60): not yet
    GATEWAY["up"] = True
    assert shop.advance(1).succeeded == 1  # the retry runs as its delay ends


def test_a_declined_card_ends_in_the_dlq_after_its_retries(shop: TestApp) -> None:
    GATEWAY["declined"] = {9}
    handle = charge.enqueue(9, 500)
    drained = shop.drain(with_scheduled=True)  # the backoffs elapse in test time
    assert (drained.failed, drained.dead) == (4, 1)  # retries=3: four attempts
    assert handle.state == "dead"
    (entry,) = shop.dlq()
    assert entry.task_id == handle.id and "card declined" in (entry.error or "")
    with pytest.raises(TaskFailed):
        handle.result()


def test_the_idem_key_is_the_same_on_every_attempt(shop: TestApp) -> None:
    GATEWAY["up"] = False
    handle = charge.enqueue(10, 100)
    shop.drain()
    GATEWAY["up"] = True
    shop.drain(with_scheduled=True)
    assert handle.attempts == 2
    assert handle.result() == f"charged 100 for order 10 (key {handle.id})"


def test_the_cart_purge_runs_nightly_at_3_in_paris(shop: TestApp) -> None:
    for day in (16, 17):
        night = shop.advance(to=datetime(2027, 1, day, 12, 0, tzinfo=UTC))  # a night passes
        assert night.succeeded == 1  # the purge ran when it fell due
    runs = shop.runs("purge-carts")
    assert [(r.scheduled_for, r.state) for r in runs] == [
        (datetime(2027, 1, 16, 2, 0, tzinfo=UTC), "succeeded"),  # 03:00 CET
        (datetime(2027, 1, 17, 2, 0, tzinfo=UTC), "succeeded"),
    ]


def test_with_no_worker_a_night_whose_predecessor_never_ran_is_skipped(shop: TestApp) -> None:
    # two nights with no worker running (run=False: the clock moves, the beat
    # fires, nothing runs): the first run is still queued when the second
    # fires, and the job's overlap policy ("skip", the default) records the
    # second as skipped, as production would
    shop.advance(to=datetime(2027, 1, 17, 12, 0, tzinfo=UTC), run=False)
    assert [r.state for r in shop.runs("purge-carts")] == ["queued", "skipped"]
    assert shop.drain().succeeded == 1


def test_perform_goes_through_the_serializer(shop: TestApp) -> None:
    assert shop.perform(totals, (3, 4)) == [7, 2]  # a tuple is a list on the wire
    with pytest.raises(ValidationError, match="not serializable"):
        shop.perform(totals, {3, 4})  # a set: enqueue would refuse it too
