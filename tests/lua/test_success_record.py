"""What a finished task's record says: a success clears the last error, a
command's success records exit code 0, and the attempts shown count only
those since the last replay (issue 9: "6/4", stale errors, hidden exit 0)."""

from __future__ import annotations

from grants import grant_commands
from lua_ops import Ops, new_id, row

from redcron.cli.runs import attempts_cell, task_error
from redcron.engine import Broker


def test_success_after_a_failure_clears_the_error_but_keeps_the_history(
    ops: Ops, broker: Broker
) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=3))
    [t] = ops.lease("w1")
    assert ops.fail("w1", t, delay=0, error="ValueError: once") == "ready"
    assert broker.inspection.task_info(iid).error == "ValueError: once"
    assert task_error(broker.inspection.task_info(iid)) == "ValueError: once"
    [t] = ops.lease("w1")
    assert ops.complete("w1", [t]) == [1]
    info = ops.info(iid)
    assert "error" not in info
    assert info["a:1:error"] == "ValueError: once"
    record = broker.inspection.task_info(iid)
    assert record.state == "succeeded" and record.error is None
    assert task_error(record) == ""
    assert attempts_cell(record) == "2/3"


def test_a_command_success_records_exit_code_zero(ops: Ops, broker: Broker) -> None:
    iid = new_id()
    command = row(iid)._replace(kind="command")
    grant_commands(broker, command.tenant)
    ops.enqueue(command)
    [t] = ops.lease("w1")
    assert ops.complete("w1", [t]) == [1]
    record = broker.inspection.task_info(iid)
    assert record.exit_code == 0
    assert [a.exit_code for a in record.attempts] == [0]


def test_a_python_success_records_no_exit_code(ops: Ops, broker: Broker) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1")
    ops.complete("w1", [t])
    assert broker.inspection.task_info(iid).exit_code is None


def test_attempts_after_a_replay_count_against_the_fresh_budget(ops: Ops, broker: Broker) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=2))
    for _ in range(2):
        [t] = ops.lease("w1")
        ops.fail("w1", t, delay=0)
    assert broker.inspection.task_info(iid).state == "dead"
    assert attempts_cell(broker.inspection.task_info(iid)) == "2/2"
    assert broker.dlq.replay([iid], now=ops.now) == 1
    [t] = ops.lease("w1")
    ops.fail("w1", t, delay=0)
    record = broker.inspection.task_info(iid)
    assert (record.attempt, record.budget, record.attempts_used) == (3, 2, 1)
    # before: "3/2" (attempt against max_attempts), which read as over budget
    assert attempts_cell(record) == "1/2 (+2 earlier)"
    assert task_error(record) == "boom"
