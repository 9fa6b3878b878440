"""One retry rule (redcron.model.retry_rule): a job's Python task takes its
registered task's retries where it gives none, and attempts read the same on
the dashboard and in the CLI (issue 20 §6: "2 / 1" after a manual retry)."""

from __future__ import annotations

from dataclasses import dataclass

from redcron.dashboard.ui.render import error_block, error_line
from redcron.model.jobs import Task, job_spec
from redcron.model.retry_rule import attempts_long, attempts_short, with_registered

RULES = {"etl.load": {"retries": 2, "retry_base": 0.5, "retry_cap": 4.0}}


def test_a_job_task_without_retries_takes_its_registered_tasks() -> None:
    spec = job_spec(
        "nightly",
        tasks={
            "load": Task(ref="etl.load"),
            "own": Task(ref="etl.load", retries=5, depends_on=["load"]),
            "other": Task(ref="etl.unknown"),
            "cmd": Task(command=["true"]),
        },
    )
    filled = with_registered(spec, RULES)
    t = filled.tasks
    assert (t["load"].retries, t["load"].retry_base, t["load"].retry_cap) == (2, 0.5, 4.0)
    assert (t["own"].retries, t["own"].retry_base) == (5, 0.5)  # its own retries win
    assert t["other"].retries is None and t["cmd"].retries is None
    assert spec.tasks["load"].retries is None  # the spec given is not changed
    rows = {r["task"]: r for r in __import__("json").loads(filled.template(DEFAULTS)[0])}
    assert rows["load"]["max_attempts"] == 3  # retries=2: 3 attempts, as enqueued
    assert rows["other"]["max_attempts"] == 4  # the deployment's default (3 retries)


DEFAULTS = {"retries": 3, "retry_base": 1.0, "retry_cap": 60.0}


def test_a_spec_the_rule_does_not_change_is_returned_as_is() -> None:
    spec = job_spec("x", tasks={"a": Task(ref="etl.load", retries=1, retry_base=1, retry_cap=2)})
    assert with_registered(spec, RULES) is spec


@dataclass
class T:
    attempt: int
    max_attempts: int
    budget: int


def test_attempts_read_against_the_fresh_budget_after_a_retry() -> None:
    assert attempts_short(T(0, 3, 0)) == ""
    assert attempts_short(T(2, 3, 0), " / ") == "2 / 3"
    assert attempts_long(T(2, 3, 0)) == "2 of 3"
    # a manual retry after one attempt with retries=0: not "2 / 1"
    assert attempts_short(T(2, 1, 1), " / ") == "1 / 1 (+1 earlier)"
    assert attempts_long(T(2, 1, 1)) == (
        "1 of 1, +1 earlier (before a retry, a DLQ replay or a hand-back: 2 in all)"
    )


TRACE = """Traceback (most recent call last):
  File "/app/etl.py", line 3, in load
    raise ValueError("bad row")
ValueError: bad row
"""


def test_a_traceback_keeps_its_lines_and_a_one_line_error_stays_a_line() -> None:
    assert error_line(TRACE) == "ValueError: bad row"
    block = str(error_block(TRACE))
    assert block.startswith('<pre class="traceback">Traceback') and "\n  File " in block
    folded = str(error_block(TRACE, folded=True))
    assert folded.startswith('<details class="traceback"><summary class="error">ValueError')
    assert str(error_block("Permanent: <no>")) == '<span class="error">Permanent: &lt;no&gt;</span>'
    assert str(error_block(None)) == ""
