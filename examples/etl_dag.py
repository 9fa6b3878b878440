"""A nightly ETL DAG: fan-out, fan-in, and a branch that fails.

::

                      ┌─► orders ─────┐
    extract (02:00) ──┼─► customers ──┼─► load ─► report
                      ├─► inventory ──┘
                      └─► archive          (independent of load)

Every night at 02:00 Berlin time ``extract`` pulls the day's dump; three
transforms run from it in parallel (fan-out); ``load`` waits for all three
(fan-in) and ``report`` for ``load``; ``archive`` needs only ``extract``.

What happens when the inventory source is down, per redcron's DAG rules
(docs/architecture.md, "DAGs"):

1. ``inventory`` fails and is **retried** with backoff (``retries=2``: three
   attempts), inside the same run, with the same ``ctx.idem_key``.
2. After its last attempt it is **dead-lettered** (the DLQ of its tenant).
   Everything downstream of it that has not run (``load``, ``report``)
   becomes ``upstream_failed`` and never starts; the **independent branch
   goes on** (``orders``, ``customers`` and ``archive`` succeed). The run
   ends ``failed`` once nothing can progress, and is held (not expired) while
   its dead task is in the DLQ.
3. Once the source is back, a **replay** of the dead task (``redcron dlq
   replay ID``, the dashboard's DLQ page, or ``app.broker.dlq.replay``)
   reopens the run: ``inventory`` runs again with a fresh retry budget, its
   ``upstream_failed`` downstream is reset to pending, and ``load`` and
   ``report`` run; the run ends ``succeeded``. What had already succeeded
   does not run again. (``redcron runs retry RUN`` does the same for a run.)

``python examples/etl_dag.py`` plays one night on the testing mode (no
server: ``redcron.testing.TestApp``) and prints it; ``tests/testing/
test_examples.py`` runs :func:`demo` and asserts each step.  In production:
``redcron beat -A examples.etl_dag:app`` and ``redcron worker -A
examples.etl_dag:app``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from redcron import App, Context, Task
from redcron.model import RunRecord, TaskRecord

app = App()

#: the sources the transforms read, and whether each answers (demo only: a
#: real deployment reads databases and buckets)
SOURCES_DOWN: set[str] = set()


@app.task(name="etl.extract")
def extract(ctx: Context) -> dict[str, int]:
    """The night's dump: row counts per table (the run's ``idem_key`` names it)."""
    print(f"extract {ctx.idem_key}")
    return {"orders": 120, "customers": 40, "inventory": 300}


@app.task(name="etl.transform")
def transform(ctx: Context, table: str) -> str:
    """Clean one table; fails while its source is down."""
    if table in SOURCES_DOWN:
        raise ConnectionError(f"{table}: source database unreachable")
    return f"{table}: transformed"


@app.task(name="etl.load")
def load(ctx: Context) -> str:
    """Load the three transformed tables into the warehouse, in one transaction."""
    return "loaded"


@app.task(name="etl.report")
def report() -> str:
    return "report sent"


@app.task(name="etl.archive")
def archive() -> str:
    return "raw dump archived"


def _transform(table: str) -> Task:
    # retries with a short backoff (seconds), kept small for the example
    return Task(
        "etl.transform",
        kwargs={"table": table},
        depends_on=["extract"],
        retries=2,
        retry_base=30,
        retry_cap=120,
    )


#: the job, declared: ``redcron beat``/``up``/``jobs apply -A`` write it
NIGHTLY = app.job(
    "nightly-etl",
    cron="0 2 * * *",
    tz="Europe/Berlin",
    overlap="skip",  # a night still running when the next starts: the new one is skipped
    tasks={
        "extract": Task("etl.extract", timeout=600),
        "orders": _transform("orders"),
        "customers": _transform("customers"),
        "inventory": _transform("inventory"),
        "load": Task("etl.load", depends_on=["orders", "customers", "inventory"]),
        "report": Task("etl.report", depends_on=["load"]),
        "archive": Task("etl.archive", depends_on=["extract"]),
    },
)


@dataclass
class Night:
    """What :func:`demo` saw, step by step (plain data, for printing and tests)."""

    #: the run's tasks at 02:00 (what was ready ran; inventory waits in its backoff)
    first_pass: dict[str, str] = field(default_factory=dict)
    #: (succeeded, failed, retried, dead) of the whole failing night
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)
    #: inventory's attempts' outcomes
    attempts: list[str] = field(default_factory=list)
    #: the run's state and its tasks' states once nothing could progress
    failed_run: tuple[str, dict[str, str]] = ("", {})
    #: the DLQ: (DAG task, attempts, the error's last line)
    dlq: list[tuple[str, int, str]] = field(default_factory=list)
    #: after the replay: the run's state and tasks, and which tasks ran again
    replayed_run: tuple[str, dict[str, str]] = ("", {})
    ran_again: list[str] = field(default_factory=list)


def _tasks(run: RunRecord) -> dict[str, TaskRecord]:
    """A run's tasks by DAG name (none has expired: the run is held while it
    has a dead task, and retained for a day after it ends)."""
    return {t.task or "": t for t in run.tasks or () if isinstance(t, TaskRecord)}


def _states(run: RunRecord) -> dict[str, str]:
    return {name: str(t.state) for name, t in _tasks(run).items()}


def demo() -> Night:
    """One night with the inventory source down, then a replay once it is back."""
    from redcron.testing import TestApp  # the extra is for tests and this demo only

    night = Night()
    SOURCES_DOWN.clear()
    SOURCES_DOWN.add("inventory")
    # 20:00 UTC the day before; the job fires at 02:00 Berlin summer time (00:00 UTC)
    fire = datetime(2027, 6, 2, 0, 0, tzinfo=UTC)
    with TestApp(app, now=datetime(2027, 6, 1, 20, 0, tzinfo=UTC)) as t:
        # at 02:00 the beat fires the run and what is ready runs, as a worker
        # would run it: extract, then the fan-out; inventory's first attempt
        # fails and waits in its backoff, which ends after the clock stops
        t.advance(to=fire)
        (run,) = t.runs("nightly-etl")
        assert run.scheduled_for == fire
        night.first_pass = _states(run)

        # the retries, as their backoff elapses (test time: no sleeping)
        rest = t.drain(with_scheduled=True)
        night.counts = (rest.succeeded, rest.failed, rest.retried, rest.dead)
        (run,) = t.runs("nightly-etl")
        night.failed_run = (str(run.state), _states(run))
        inventory = _tasks(run)["inventory"]
        night.attempts = [str(a.outcome) for a in inventory.attempts]
        night.dlq = [
            (e.task_id.rsplit("/", 1)[-1], e.attempts, (e.error or "").strip().splitlines()[-1])
            for e in t.dlq()
        ]

        # the source is back: replay the dead task; the run reopens
        SOURCES_DOWN.clear()
        before = {name: len(x.attempts) for name, x in _tasks(run).items()}
        assert t.broker.dlq.replay([inventory.id]) == 1
        t.drain()
        (run,) = t.runs("nightly-etl")
        night.replayed_run = (str(run.state), _states(run))
        night.ran_again = [n for n, x in _tasks(run).items() if len(x.attempts) != before[n]]
    return night


if __name__ == "__main__":
    result = demo()
    print("at 02:00:             ", result.first_pass)
    print("inventory's attempts: ", result.attempts)
    print("the failed night:     ", result.failed_run)
    print("dead-lettered:        ", result.dlq)
    print("after the replay:     ", result.replayed_run, "ran again:", result.ran_again)
