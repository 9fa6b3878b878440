"""The spec text a job hash stores is byte-for-byte what ``dataclasses.asdict``
gave before the bulk path made it cheaper: a job put again compares equal
(``unchanged``) and is never rewritten by an upgrade."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

from redcron.model.jobs import JobSpec, Task, spec_json


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
        assert spec_json(spec) == asdict_json(spec)
