"""validation and errors: messages name the field; script error codes map to classes."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from redcron import App, Settings, serde
from redcron.beat.beat import Beat
from redcron.cli.main import main
from redcron.errors import (
    ConfigError,
    Conflict,
    NotFound,
    QuotaExceeded,
    Rejected,
    Retry,
    ScriptError,
    ShardLeaseLost,
    ValidationError,
    from_script_error,
)
from redcron.model import validation
from redcron.model.jobfile import load_jobs
from redcron.model.jobs import JobSpec, Task
from redcron.model.tenants import TenantSettings, parse_rate
from redcron.worker import Worker


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
    # JSON's 3.0 is the whole number 3 (JSON Schema's integer, as the API documents it)
    assert type(validation.non_negative_int(3.0, "retries")) is int
    for bad in (-1, 1.5, -1.0, float("nan"), True, "3", None):
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
        ("STALE shard lease lost (epoch 3 is not the owner)", ShardLeaseLost),
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


# -- numbers at the edge (issue 7, bug 5) -----------------------------------------
# NaN passes every "value < 0" check (all comparisons with it are false) and
# infinity overflows int(seconds * 1000): each entry point must refuse both,
# naming the field.  Nothing here reaches Redis (NOWHERE is a closed port), so a
# value that slipped through fails with a connection error instead.

NAN, INF = math.nan, math.inf
NOT_FINITE = [NAN, INF, -INF]


@pytest.fixture
def app() -> App:
    return App(NOWHERE)


@pytest.mark.parametrize("value", [*NOT_FINITE, 10**400])
def test_number_helpers_refuse_nan_and_infinity(value: float) -> None:
    expect_field("timeout", lambda: validation.timeout_ms(value))
    expect_field("countdown", lambda: validation.delay_ms(value))
    expect_field("cpu", lambda: validation.cpus(value))
    expect_field("mem", lambda: validation.mem_bytes(float(value) if value != 10**400 else NAN))
    expect_field("retry_base", lambda: validation.backoff(value, 10))
    expect_field("retry_cap", lambda: validation.backoff(1, value))
    expect_field("x", lambda: validation.seconds(value, "x"))
    expect_field("x", lambda: validation.fraction(value, "x"))
    exc = expect_field("cpu", lambda: validation.cpus(value))
    assert "finite number" in str(exc)  # says what to give instead


def test_number_helpers_still_take_ordinary_numbers() -> None:
    assert validation.cpus(0.5) == 0.5
    assert validation.timeout_ms(2.5) == 2500
    assert validation.backoff(1, 60) == (1.0, 60.0)
    assert validation.fraction(1, "x") == 1.0
    assert validation.finite(1.5, "x") == 1.5
    expect_field("x", lambda: validation.finite(NAN, "x"))


@pytest.mark.parametrize("text", ["\uff11\uff12M", "\u0663G", "5M\u00a0x"])
def test_memory_refuses_look_alike_digits(text: str) -> None:
    expect_field("mem", lambda: validation.mem_bytes(text))


@pytest.mark.parametrize(
    ("option", "field"),
    [(f, f) for f in ("cpu", "timeout", "retry_base", "retry_cap")],
)
@pytest.mark.parametrize("value", NOT_FINITE)
def test_app_task_refuses_nan_and_infinity(app: App, option: str, field: str, value: float) -> None:
    expect_field(field, lambda: app.task(noop, name="t", **{option: value}))
    assert "t" not in app.tasks


def test_app_task_refuses_nan_mem(app: App) -> None:
    expect_field("mem", lambda: app.task(noop, name="m", mem=NAN))
    assert app.tasks == {}


@pytest.mark.parametrize(
    ("option", "field"),
    [("_cpu", "_cpu"), ("_countdown", "countdown"), ("_timeout", "timeout"), ("_mem", "_mem")],
)
@pytest.mark.parametrize("value", NOT_FINITE)
def test_enqueue_options_refuse_nan_and_infinity(
    app: App, option: str, field: str, value: float
) -> None:
    t = app.task(noop, name="t")
    expect_field(field, lambda: t.enqueue(**{option: value}))
    expect_field(field, lambda: t.enqueue_many([()], **{option: value}))
    expect_field(field, lambda: app.enqueue("t", **{option: value}))


def test_enqueue_command_refuses_nan_and_infinity(app: App) -> None:
    expect_field("countdown", lambda: app.enqueue_command(["true"], countdown=NAN))
    expect_field("timeout", lambda: app.enqueue_command(["true"], timeout=INF))


def spec(**kw: object) -> JobSpec:
    fields: dict[str, object] = {"name": "j", "tasks": {"t": Task("x.y")}, **kw}
    return JobSpec(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "field",
    [
        "jitter_s", "keep_days", "breaker_window_s", "breaker_cooldown_s", "breaker_threshold",
        "deadline_s",
    ],
)  # fmt: skip
@pytest.mark.parametrize("value", NOT_FINITE)
def test_job_spec_refuses_nan_and_infinity(field: str, value: float) -> None:
    expect_field(field, lambda: spec(**{field: value}).validate())


@pytest.mark.parametrize("value", [NAN, INF, "nan", "inf", "99999999999999999999999", "\uff15m"])
def test_every_refuses_nan_infinity_and_overflow(value: object) -> None:
    expect_field("every", lambda: spec(every=value).validate())


@pytest.mark.parametrize("option", ["cpu", "timeout", "retry_base", "retry_cap"])
@pytest.mark.parametrize("value", [*NOT_FINITE, -1])
def test_dag_task_refuses_nan_infinity_and_negatives(option: str, value: float) -> None:
    job = JobSpec(name="j", tasks={"t": Task("x.y", **{option: value})})  # type: ignore[arg-type]
    expect_field(f"tasks.t.{option}", job.validate)


def test_dag_task_backoff_is_checked_as_for_app_task() -> None:
    job = JobSpec(name="j", tasks={"t": Task("x.y", retry_base=60, retry_cap=5)})
    exc = expect_field("tasks.t.retry_cap", job.validate)
    assert "below retry_base" in str(exc)
    # one of the two given: checked against the deployment's default for the other
    job = JobSpec(name="j", tasks={"t": Task("x.y", retry_base=7200)})
    job.validate()
    defaults = {"retries": 3, "retry_base": 1.0, "retry_cap": 3600.0}
    expect_field("tasks.t.retry_cap", lambda: job.template(defaults))
    ok = JobSpec(name="j", tasks={"t": Task("x.y", retry_base=2, retry_cap=10)})
    rows, _ = ok.template(defaults)
    assert '"retry_base_ms":2000' in rows and '"retry_cap_ms":10000' in rows


@pytest.mark.parametrize(
    ("yaml_field", "field"),
    [
        ("cpu: .nan", "tasks.t.cpu"),
        ("timeout: .inf", "tasks.t.timeout"),
        ("retry_base: .nan", "tasks.t.retry_base"),
        ("retry_cap: -.inf", "tasks.t.retry_cap"),
    ],
)
def test_job_file_task_numbers_refuse_nan_and_infinity(
    tmp_path: Path, yaml_field: str, field: str
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"name: j\ntasks:\n  t: {{task: x.y, {yaml_field}}}\n")
    exc = expect_field(f"{path}: job 'j': {field}", lambda: load_jobs(path))
    assert "finite number" in str(exc)


@pytest.mark.parametrize(
    "yaml_field", ["jitter_s: .nan", "keep_days: .inf", "breaker_window_s: .nan"]
)
def test_job_file_job_numbers_refuse_nan_and_infinity(tmp_path: Path, yaml_field: str) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"name: j\n{yaml_field}\ntasks: {{t: x.y}}\n")
    field = yaml_field.partition(":")[0]
    expect_field(f"{path}: job 'j': {field}", lambda: load_jobs(path))


@pytest.mark.parametrize("flag", ["--cpus", "--lease-ttl", "--grace"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_worker_cli_refuses_nan_and_infinity(flag: str, value: str) -> None:
    res = CliRunner().invoke(main, ["worker", "--redis", NOWHERE, flag, value])
    assert res.exit_code == 2
    assert f"Invalid value for '{flag}'" in res.output and "finite" in res.output


@pytest.mark.parametrize("flag", ["--shard-ttl", "--catchup-window"])
def test_beat_cli_refuses_nan(flag: str) -> None:
    res = CliRunner().invoke(main, ["beat", "--redis", NOWHERE, flag, "nan"])
    assert res.exit_code == 2 and f"Invalid value for '{flag}'" in res.output


@pytest.mark.parametrize("kwargs", [{"cpus": NAN}, {"cpus": INF}, {"mem": NAN}, {"lease_ttl": NAN}])
def test_worker_refuses_nan_capacity(app: App, kwargs: dict[str, float]) -> None:
    field = next(iter(kwargs))
    expect_field(field, lambda: Worker(app, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"catchup_window": NAN}, {"shard_ttl": NAN}])
def test_beat_refuses_nan_windows(app: App, kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        Beat(app, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"weight": INF}, "weight"),
        ({"rate": NAN}, "rate"),
        ({"jitter_s": NAN}, "jitter_s"),
        ({"jitter_s": INF}, "jitter_s"),
    ],
)
def test_tenant_settings_refuse_nan_and_infinity(change: dict[str, float], field: str) -> None:
    expect_field(field, dataclasses.replace(TenantSettings(), **change).validate)


@pytest.mark.parametrize("text", ["\uff11\uff10/s", "\u0665/m", "nan", "inf/s"])
def test_tenant_rate_refuses_look_alike_digits_and_nan(text: str) -> None:
    expect_field("rate", lambda: parse_rate(text))


@pytest.mark.parametrize("name", ["retry_base", "retry_cap", "lease_ttl", "aging"])
def test_settings_refuse_nan(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({f"REDCRON_{name.upper()}": "nan"})


@pytest.mark.parametrize("delay", NOT_FINITE)
def test_retry_delay_refuses_nan_and_infinity(delay: float) -> None:
    expect_field("delay", lambda: Retry(delay=delay))


@pytest.mark.parametrize(
    "delay",
    [0, 0.0, 2.5, 10**9, validation.MAX_SECONDS, validation.MAX_SECONDS + 1, -1, -0.001,
     *NOT_FINITE, 10**400, True, False, "5", None, [1]],
)  # fmt: skip
def test_retry_checks_its_delay_as_validation_seconds_does(delay: object) -> None:
    """errors.py repeats the check (it imports nothing of ours); verdict and message agree."""
    try:
        validation.seconds(delay, "delay")
    except ValidationError as exc:
        expected: str | None = str(exc)
    else:
        expected = None
    if delay is None:  # Retry(delay=None): no delay, nothing to check
        assert Retry(delay=None).delay is None
        return
    try:
        Retry(delay=delay)  # type: ignore[arg-type]
    except ValidationError as exc:
        assert str(exc) == expected
    else:
        assert expected is None
