"""Regressions found by fuzzing (tests/fuzz): numbers too large for milliseconds
(or for Lua's doubles), look-alike digits in ids, arguments msgpack cannot carry."""

from __future__ import annotations

import pytest

from redcron.errors import NotFound, ValidationError
from redcron.keys import shard_of_id
from redcron.model import validation
from redcron.model.jobs import JobSpec, Task
from redcron.model.tenants import TenantSettings


@pytest.mark.parametrize(
    "check",
    [
        # 1e308 s overflowed int(value * 1000): POST /v1/tasks {"timeout_s": 1e308} was a 500
        lambda: validation.timeout_ms(1e308),
        lambda: validation.delay_ms(1e308),
        lambda: validation.seconds(validation.MAX_SECONDS + 1, "x"),
        lambda: validation.whole_number(2**53, "x"),
        lambda: validation.mem_bytes(2**64),
        lambda: validation.mem_bytes("1e30G"),
        lambda: validation.mem_bytes("99999999999999999999T"),
    ],
)
def test_huge_numbers_are_refused_by_name(check: object) -> None:
    with pytest.raises(ValidationError):
        check()  # type: ignore[operator]


def test_largest_accepted_values() -> None:
    assert validation.timeout_ms(validation.MAX_SECONDS) == validation.MAX_SECONDS * 1000
    assert validation.whole_number(2**53 - 1, "x") == 2**53 - 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"keep_runs": 10**30}, "keep_runs"),
        ({"keep_days": 1e308}, "keep_days"),
        ({"jitter_s": 1e308}, "jitter_s"),
        ({"breaker_window_s": 1e300}, "breaker_window_s"),
    ],
)
def test_job_refuses_huge_numbers(change: dict[str, object], field: str) -> None:
    spec = JobSpec(name="j", tasks={"t": Task("x.y")}, cron="* * * * *", **change)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as info:
        spec.validate()
    assert info.value.field == field


def test_dag_task_refuses_a_huge_timeout() -> None:
    spec = JobSpec(name="j", tasks={"t": Task("x.y", timeout=1e308)}, cron="* * * * *")
    with pytest.raises(ValidationError) as info:
        spec.validate()
    assert info.value.field == "tasks.t.timeout"


def test_tenant_jitter_beyond_exact_doubles_is_refused() -> None:
    # 2**53 + 1 read back as 2**53: what was set was not what was shown
    with pytest.raises(ValidationError) as info:
        TenantSettings(jitter_s=2**53 + 1).validate()
    assert info.value.field == "jitter_s"


@pytest.mark.parametrize("iid", ["²-x", "\u0661-x", "\uff13-x"])
def test_ids_with_look_alike_digits_are_not_found(iid: str) -> None:
    # "²".isdigit() is true and int("²") raises: GET /v1/jobs/²-x was a 500
    with pytest.raises(NotFound):
        shard_of_id(iid)


@pytest.mark.parametrize(
    ("task", "field"),
    [
        (Task("x.y", args=[object()]), "tasks.t.args"),
        (Task("x.y", kwargs={"k": {1, 2}}), "tasks.t.kwargs"),
        (Task("x.y", kwargs={1: "v"}), "tasks.t.kwargs"),
    ],
)
def test_job_declaration_refuses_arguments_msgpack_cannot_carry(task: Task, field: str) -> None:
    # app.job() declared these without complaint; the error came only when
    # `redcron beat` or `jobs apply -A` compiled the DAG
    spec = JobSpec(name="j", tasks={"t": task}, cron="* * * * *")
    with pytest.raises(ValidationError) as info:
        spec.validate()
    assert info.value.field == field


@pytest.mark.parametrize("deps", [None, "a", [{"k": 1}], [1]])
def test_depends_on_of_the_wrong_shape_is_a_validation_error(deps: object) -> None:
    # app.jobs.put(tasks={"t": Task(..., depends_on=None)}) raised TypeError
    spec = JobSpec(name="j", tasks={"t": Task("x.y", depends_on=deps)}, cron="* * * * *")  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as info:
        spec.validate()
    assert info.value.field == "tasks.t.depends_on"


def test_arguments_that_would_not_decode_are_refused() -> None:
    # {(1, 2): 3} packed fine and then failed to unpack (unhashable list key):
    # enqueued, it could never run, and `task show` raised TypeError
    from redcron import serde

    with pytest.raises(ValidationError) as info:
        serde.dumps([[{(1, 2): 3}], {}])
    assert info.value.field == "args"


def test_an_unknown_field_named_by_the_error_is_a_real_name_before_an_empty_one() -> None:
    from redcron.model.jobs import first_unknown

    assert first_unknown({"", "nmae"}) == "nmae"
    assert first_unknown({""}) == '""'
    assert first_unknown({"b", "a"}) == "a"


def test_a_zone_name_too_long_for_the_file_system_is_an_unknown_zone() -> None:
    import pytest

    from redcron.schedule.cron import ScheduleError
    from redcron.schedule.triggers import check_timezone

    with pytest.raises(ScheduleError) as err:
        check_timezone("x" * 4000)
    assert err.value.field == "tz" and len(str(err.value)) < 300
