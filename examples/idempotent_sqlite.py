"""Exactly-once effects with ``ctx.idem_key`` and SQLite.

redcron runs a task at least once: a worker that dies after the effect but
before its report makes the task run again, with the same ``ctx.idem_key``.
The effect is then exactly-once when it and its record commit in one
transaction, keyed by ``idem_key``: the second execution's ``INSERT ... ON
CONFLICT DO NOTHING`` inserts nothing, and it skips the effect.

``python examples/idempotent_sqlite.py`` runs it without a server, on the
testing mode (``redcron.testing.TestApp``); ``tests/testing/test_examples.py``
runs :func:`demo`.  In production: ``redcron worker -A examples.idempotent_sqlite:app``.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from redcron import App, Context

app = App()

SCHEMA = """
create table if not exists effects (idem_key text primary key, order_id integer not null);
create table if not exists ledger (order_id integer not null, cents integer not null);
"""


def connect(path: str | Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    return db


#: where charge writes (a real deployment reads it from its settings)
DB_PATH: dict[str, str] = {"path": "shop.sqlite3"}
#: the attempts that "crash" after committing, to show the re-run (demo only)
CRASH_AFTER_COMMIT: set[int] = set()


@app.task(name="shop.charge", retries=3, retry_base=0.0, retry_cap=0.0)
def charge(ctx: Context, order_id: int, cents: int) -> str:
    """Book ``cents`` for ``order_id`` exactly once, however often this runs."""
    db = connect(DB_PATH["path"])
    try:
        with db:  # one transaction: the record and the effect, or neither
            first = db.execute(
                "insert into effects (idem_key, order_id) values (?, ?) "
                "on conflict (idem_key) do nothing",
                (ctx.idem_key, order_id),
            ).rowcount
            if first:
                db.execute("insert into ledger values (?, ?)", (order_id, cents))
    finally:
        db.close()
    if ctx.attempt in CRASH_AFTER_COMMIT:
        # as if the worker died here, after the commit and before its report
        raise RuntimeError(f"attempt {ctx.attempt}: lost after the commit (on purpose)")
    return "charged" if first else "already charged"


def demo(directory: str | Path) -> list[tuple[int, int]]:
    """Charge order 42 with a crash after the first commit: two attempts, one
    ledger row.  Returns the ledger."""
    from redcron.testing import TestApp

    DB_PATH["path"] = str(Path(directory) / "shop.sqlite3")
    CRASH_AFTER_COMMIT.clear()
    CRASH_AFTER_COMMIT.add(1)
    with TestApp(app) as t:
        handle = charge.enqueue(42, 1999)
        t.drain(with_scheduled=True)  # attempt 1 commits and "crashes"; attempt 2 re-runs
        assert handle.attempts == 2
        assert handle.result() == "already charged"
    db = connect(DB_PATH["path"])
    try:
        return [tuple(row) for row in db.execute("select order_id, cents from ledger")]
    finally:
        db.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print("ledger:", demo(tmp))  # [(42, 1999)]: two attempts, one charge
