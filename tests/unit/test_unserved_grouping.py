"""``redcron jobs apply -f`` warns once per task no live worker serves, not once
per job naming it: the grouping is pure (no Redis)."""

from __future__ import annotations

from redcron.engine import unserved_by_task


def test_one_line_per_task_naming_its_first_jobs_and_counting_the_rest() -> None:
    missing = [("m.a", f"acme/j{i}", "a") for i in range(10_000)]
    missing += [("m.b", "acme/j0", "b"), ("m.a", "beta/x", "first")]
    lines = unserved_by_task(missing)
    assert lines == [
        "no live worker serves task 'm.a' (10,001 jobs: acme/j0, acme/j1, acme/j2 and 9,998 "
        "more); their runs will wait until a worker registering it starts",
        "no live worker serves task 'm.b' (job acme/j0, task 'b'); its runs will wait until "
        "a worker registering it starts",
    ]


def test_nothing_missing_nothing_said() -> None:
    assert unserved_by_task([]) == []
    two = unserved_by_task([("m.a", "t/a", "x"), ("m.a", "t/b", "x")], named=3)
    assert two == [
        "no live worker serves task 'm.a' (2 jobs: t/a, t/b); their runs will wait until a "
        "worker registering it starts"
    ]
