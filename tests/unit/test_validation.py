"""validation and errors: messages name the field; script error codes map to classes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from redcron import App, serde, validation
from redcron.errors import (
    Conflict,
    LeaseLost,
    NotFound,
    QuotaExceeded,
    Rejected,
    Retry,
    ScriptError,
    ValidationError,
    from_script_error,
)
from redcron.jobfile import load_jobs
from redcron.jobs import JobSpec, Task


@pytest.mark.parametrize("value", ["acme", "a", "A-b_c.d9", "x" * 64])
def test_good_names(value: str) -> None:
    assert validation.name("tenant", value) == value


@pytest.mark.parametrize(
    "value", ["", "a b", "a:b", "a{b", "a}b", "{s0}", "x" * 65, "é", "a\nb", None, 3, b"acme"]
)
def test_bad_names_name_the_field(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        validation.name("tenant", value)
    assert info.value.field == "tenant"
    assert str(info.value).startswith("tenant: ")


def test_priority() -> None:
    for p in ("high", "normal", "low"):
        assert validation.priority(p) == p
    with pytest.raises(ValidationError, match=r"^priority: 'urgent' is not one of high"):
        validation.priority("urgent")
    with pytest.raises(ValidationError) as info:
        validation.priority(None, field="_priority")
    assert info.value.field == "_priority"


def test_timeout_ms() -> None:
    assert validation.timeout_ms(None) == 0
    assert validation.timeout_ms(0) == 0
    assert validation.timeout_ms(1.5) == 1500
    assert validation.timeout_ms(30) == 30_000
    for bad in (-1, -0.001, True, "5", [5]):
        with pytest.raises(ValidationError, match=r"^timeout: "):
            validation.timeout_ms(bad)  # type: ignore[arg-type]


def test_delay_ms() -> None:
    assert validation.delay_ms(None) == 0
    assert validation.delay_ms(2.25) == 2250
    for bad in (-1, False, "1"):
        with pytest.raises(ValidationError, match=r"^countdown: "):
            validation.delay_ms(bad)  # type: ignore[arg-type]


def test_non_negative_int() -> None:
    assert validation.non_negative_int(0, "retries") == 0
    assert validation.non_negative_int(5, "retries") == 5
    for bad in (-1, 1.0, True, "3", None):
        with pytest.raises(ValidationError, match=r"^retries: "):
            validation.non_negative_int(bad, "retries")


def test_validation_error_is_rejected_and_value_error() -> None:
    exc = ValidationError("queue", "bad")
    assert isinstance(exc, Rejected)
    assert isinstance(exc, ValueError)
    assert exc.field == "queue"
    assert str(exc) == "queue: bad"


def test_serde_round_trip_and_refusal() -> None:
    value = [[1, "a", None, True, 1.5, b"\x00"], {"k": [1, 2]}]
    assert serde.loads(serde.dumps(value)) == value
    assert serde.loads(None) is None
    assert serde.loads(b"") is None
    for bad in (object(), {1, 2}, 2**70):
        with pytest.raises(ValidationError) as info:
            serde.dumps([bad])
        assert info.value.field == "args"
    with pytest.raises(ValidationError, match=r"^result: "):
        serde.dumps(object(), field="result")


def test_retry_delay_must_not_be_negative() -> None:
    assert Retry(delay=2.5).delay == 2.5
    assert Retry().delay is None
    with pytest.raises(ValidationError, match=r"^delay: "):
        Retry(delay=-1)


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("NOTFOUND no task 0-x", NotFound),
        ("CONFLICT task id 0-x already exists", Conflict),
        ("LEASELOST stale", LeaseLost),
        ("REJECTED nope", Rejected),
        ("QUOTA too many", QuotaExceeded),
        ("ERR something broke", ScriptError),
        ("", ScriptError),
    ],
)
def test_script_error_codes_map_to_exceptions(text: str, cls: type[Exception]) -> None:
    exc = from_script_error(text)
    assert type(exc) is cls
    if cls is not ScriptError:
        assert str(exc) == text.partition(" ")[2]


# -- names at the edge (issue 7, bug 5) -------------------------------------------------
# Nothing here reaches Redis: the App points at a closed port.

NOWHERE = "redis://127.0.0.1:1/0"


def expect_field(field: str, call: Callable[[], object]) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.field == field, info.value
    assert str(info.value).startswith(f"{field}: ")
    return info.value


def noop() -> None:
    return None


@pytest.mark.parametrize("value", ["acme\n", "acme\r\n", "\nacme", "ac\nme"])
def test_names_must_match_in_full(value: str) -> None:
    # re.match with "$" accepted "acme\n" ("$" also matches before a final newline)
    expect_field("tenant", lambda: validation.name("tenant", value))


def test_app_task_and_enqueue_refuse_a_trailing_newline() -> None:
    app = App(NOWHERE)
    expect_field("tenant", lambda: app.task(noop, name="n", tenant="acme\n"))
    expect_field("queue", lambda: app.task(noop, name="q", queue="q\n"))
    t = app.task(noop, name="t")
    expect_field("tenant", lambda: t.enqueue(_tenant="acme\n"))
    expect_field("queue", lambda: t.enqueue(_queue="default\n"))


@pytest.mark.parametrize("field", ["name", "tenant"])
def test_job_names_must_match_in_full(field: str) -> None:
    fields: dict[str, object] = {"name": "j", "tasks": {"t": Task("x.y")}, field: "acme\n"}
    expect_field(field, JobSpec(**fields).validate)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        JobSpec(name="j", tasks={"t\n": Task("x.y")}).validate()


def test_job_file_refuses_a_tenant_with_a_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text('name: j\ntenant: "acme\\n"\ntasks: {t: x.y}\n')
    expect_field(f"{path}: job 'j': tenant", lambda: load_jobs(path))
