"""Property-based fuzzing of the Python API: ``app.jobs.put``, ``app.job``, task
``.enqueue`` options and arguments, ``app.tenants.set``.

Properties: a refusal is a :class:`ValidationError` (nothing else) whose
``field`` names what was wrong; it writes nothing; what is accepted reads
back as it was given.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fuzz_strategies import (
    EXAMPLES,
    JOB_FIELDS,
    TASK_FIELDS,
    json_scalars,
    json_values,
    names,
    non_finite,
    numbers,
    unencodable,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from redis_dump import diff, dump

from redcron import App, serde
from redcron.errors import ValidationError
from redcron.model.jobs import Task, spec_from_json
from redcron.model.retry_rule import with_registered
from redcron.model.tenants import SETTINGS_FIELDS

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ANY = st.one_of(json_values, non_finite, unencodable)


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    # the first use writes the deployment's metadata hash once: not a write under test
    a.jobs.list_jobs()

    @a.task(name="fuzz.add", tenant="acme")
    def add(x: Any = 0, y: Any = 0) -> Any:
        return x

    yield a
    a.close()


@pytest.fixture
def snap(r: redis.Redis, key_prefix: str) -> Any:
    return lambda: dump(r, key_prefix)


def refused_cleanly(exc: ValidationError, before: Any, snap: Any, given: Any) -> None:
    assert isinstance(exc.field, str) and exc.field, (given, exc)
    assert str(exc).startswith(f"{exc.field}: "), str(exc)
    changed = diff(before, snap())
    assert not changed, f"{given!r} was refused ({exc}) but wrote:\n{changed}"


job_fields = st.dictionaries(
    st.sampled_from(sorted(set(JOB_FIELDS) - {"name", "at", "paused"})),
    st.one_of(*(JOB_FIELDS[k] for k in sorted(JOB_FIELDS)), non_finite),
    max_size=3,
)
task_fields = st.dictionaries(
    st.sampled_from(sorted(TASK_FIELDS)),
    st.one_of(*(TASK_FIELDS[k] for k in sorted(TASK_FIELDS)), non_finite, unencodable),
    max_size=3,
)


@FUZZ
@given(name=names, fields=job_fields, task=task_fields)
@example(name="j", fields={}, task={"args": [object()]})
@example(name="j", fields={}, task={"kwargs": {"x": {1, 2}}})
@example(name="j", fields={"jitter_s": math.nan}, task={})
@example(name="j", fields={"keep_days": math.inf}, task={})
@example(name="j", fields={"tz": "Etc/GMT+15"}, task={})
# a retry_cap under the registered task's retry_base: app.job refused it only at put
@example(name="null", fields={"tenant": "all"}, task={"retry_cap": -0.0})
def test_jobs_put(
    app: App, snap: Any, name: Any, fields: dict[str, Any], task: dict[str, Any]
) -> None:
    fields.setdefault("cron", "0 2 * * *")
    spec_task = Task(**{"ref": "fuzz.add", **task})
    before = snap()
    try:
        record = app.jobs.put(name, tasks={"t": spec_task}, **fields)
    except ValidationError as exc:
        refused_cleanly(exc, before, snap, (name, fields, task))
        field = exc.field
        # the field at fault: a job field, or tasks.t.<field> (or the whole job's tasks)
        assert field in fields or field.split(".")[0] in {*JOB_FIELDS, "tasks", "args"}, exc
        # app.job validates the same way, and writes nothing either
        with pytest.raises(ValidationError):
            app.job(name, tasks={"t": spec_task}, **fields)
        return
    stored = spec_from_json(record.spec)
    given_task = {k: list(v) if isinstance(v, tuple) else v for k, v in task.items()}
    # the task as given, its left-out retries filled from its registration (one
    # retry rule for jobs and enqueues: model.retry_rule)
    given_spec = dataclasses.replace(stored, tasks={"t": Task(**{"ref": "fuzz.add", **given_task})})
    assert stored.name == name and stored == with_registered(given_spec, app.retry_rules())
    for key, value in fields.items():
        assert getattr(stored, key) == value, key


@FUZZ
@given(
    args=st.lists(ANY, max_size=3),
    kwargs=st.dictionaries(st.sampled_from(["x", "y"]), ANY, max_size=2),
    options=st.dictionaries(
        st.sampled_from(
            ["_countdown", "_tenant", "_priority", "_queue", "_timeout", "_retries", "_cpu",
             "_mem", "_bogus"]
        ),
        st.one_of(json_scalars, numbers, non_finite, names),
        max_size=3,
    ),
)  # fmt: skip
@example(args=[2**64], kwargs={}, options={})
@example(args=[], kwargs={}, options={"_countdown": 1e308})
@example(args=[], kwargs={}, options={"_timeout": math.nan})
@example(args=[], kwargs={}, options={"_mem": "1e30G"})
def test_enqueue(
    app: App, snap: Any, args: list[Any], kwargs: dict[str, Any], options: dict[str, Any]
) -> None:
    before = snap()
    try:
        handle = app.tasks["fuzz.add"].enqueue(*args, **kwargs, **options)
    except ValidationError as exc:
        refused_cleanly(exc, before, snap, (args, kwargs, options))
        return
    info = handle.info()
    # compared encoded: NaN != NaN, and a bytearray comes back as bytes
    assert serde.dumps(info.decoded_args()) == serde.dumps([args, kwargs])
    for option in ("_tenant", "_queue", "_priority"):
        if options.get(option) is not None:
            assert getattr(info, option[1:]) == options[option]


@FUZZ
@given(
    tenant=st.one_of(st.just("acme"), names),
    change=st.dictionaries(
        st.sampled_from([*SETTINGS_FIELDS, "bogus"]),
        st.one_of(json_scalars, numbers, non_finite, st.sampled_from(["20/s", "5/h", "1e3/m"])),
        max_size=3,
    ),
)
def test_tenants_set(app: App, snap: Any, tenant: Any, change: dict[str, Any]) -> None:
    before = snap()
    try:
        app.tenants.set(tenant, **change)
    except ValidationError as exc:
        refused_cleanly(exc, before, snap, (tenant, change))
        assert exc.field in {*change, "tenant", "burst", "rate"}, exc
        return
    except TypeError as exc:  # an unknown keyword: Python's own refusal
        assert "bogus" in change, exc
        assert not diff(before, snap())
        return
    shown = app.tenants.get(tenant)
    for key, value in change.items():
        if key != "rate":
            assert getattr(shown, key) == value, key
