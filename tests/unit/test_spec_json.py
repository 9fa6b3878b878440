"""The spec texts of a job hash.  ``spec_json_full`` is byte-for-byte what
``dataclasses.asdict`` gave (what releases before the lean job hash stored, so
such a job put again is still ``unchanged``: put_many sends its sha1).
``spec_json`` (what is stored now) leaves out the job's name and tenant and
every default, and reads back as the same spec."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

from redcron.model.jobs import (
    JobSpec,
    Task,
    spec_from_json,
    spec_json,
    spec_json_full,
    spec_text_full,
)


def asdict_json(spec: JobSpec) -> str:
    def default(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.isoformat()
        raise TypeError(f"not JSON: {value!r}")

    return json.dumps(dataclasses.asdict(spec), sort_keys=True, default=default)


def test_spec_json_matches_asdict_for_every_kind_of_field() -> None:
    specs = [
        JobSpec(name="plain", tasks={"t": Task("m.f")}, cron="0 2 * * *"),
        JobSpec(
            name="rich",
            tenant="acme",
            at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
            tz="Europe/Paris",
            jitter_s=2.5,
            paused=True,
            tasks={
                "a": Task(
                    "m.f",
                    args=[1, "x", [2, (3, 4)], {"k": None}],
                    kwargs={"n": {"deep": [True, 1.5]}},
                    retries=2,
                    priority="high",
                ),
                "b": Task(
                    command=["echo", "hi"],
                    env={"A": "1"},
                    cwd="/tmp",
                    depends_on=["a"],
                    timeout=3.0,
                    queue="commands",
                ),
                "c": Task(
                    image="alpine:3", command=["true"], cpu=0.5, mem="64M", depends_on=["a", "b"]
                ),
            },
        ),
        JobSpec(name="every", every="15m", tasks={"t": Task("m.f", args=[])}),
    ]
    for spec in specs:
        assert spec_json_full(spec) == asdict_json(spec)
        lean = spec_json(spec)
        assert len(lean) < len(asdict_json(spec))
        back = spec_from_json(lean, spec.tenant, spec.name)
        assert asdict_json(back) == asdict_json(spec)
        assert spec_text_full(lean, spec.tenant, spec.name) == asdict_json(spec)
        # an older release's text (it names its job) is shown as it is
        assert spec_text_full(asdict_json(spec), "x", "y") == asdict_json(spec)


def test_spec_json_leaves_out_defaults_and_the_jobs_identity() -> None:
    spec = JobSpec(name="idle7", tenant="t7", cron="0 0 1 1 *", tasks={"t": Task("bench.noop")})
    assert spec_json(spec) == '{"cron":"0 0 1 1 *","tasks":{"t":{"ref":"bench.noop"}}}'
    assert spec.hash_settings() == {}  # model/fields.py JOB_DEFAULTS agree with JobSpec's
    spec.keep_runs, spec.breaker_window_s, spec.deadline_s = 5, 60.0, 1.5
    assert spec.hash_settings() == {
        "keep_runs": "5", "breaker_window_s": "60.0", "deadline_ms": "1500",
    }  # fmt: skip
