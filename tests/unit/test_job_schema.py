"""The request-body schemas of the OpenAPI document list exactly the fields the
model and the routes take (a field added to one without the other fails here),
and accept the bodies the API's own tests send."""

from __future__ import annotations

from typing import Any

import jsonschema_rs  # schemathesis's validator (the dev extra)
import pytest

from redcron.dashboard.api import tasks, worker
from redcron.model.job_schema import job_body_forms, job_body_schema, task_fields
from redcron.model.jobfile import SHORT_TASK_FIELDS, SHORT_TASK_POLICIES
from redcron.model.jobs import JobSpec, Task
from redcron.model.tenants import SETTINGS_FIELDS, settings_schema


def test_the_job_schema_lists_the_model_fields() -> None:
    dag, short = job_body_forms()
    both = {*dag["properties"], *short["properties"]}
    assert both == {*JobSpec.__dataclass_fields__, "task", *SHORT_TASK_POLICIES}
    assert "task" not in dag["properties"] and "tasks" not in short["properties"]
    assert set(task_fields()) == set(Task.__dataclass_fields__)
    # each kind of task lists the fields it may hold; together, every field
    # (and the string form: a registered task's name)
    name, *kinds = short["properties"]["task"]["oneOf"]
    assert name["type"] == "string"
    assert {f for kind in kinds for f in kind["properties"]} == SHORT_TASK_FIELDS
    dag_kinds = dag["properties"]["tasks"]["anyOf"][0]["additionalProperties"]["anyOf"][0]
    aliases = {"task", "cmd", "timeout_s"}
    listed = {f for kind in dag_kinds["oneOf"] for f in kind["properties"]}
    assert listed == set(Task.__dataclass_fields__) | aliases


def test_the_other_bodies_list_the_route_fields() -> None:
    assert set(tasks.body_of([])["properties"]) == tasks.FIELDS
    assert tuple(settings_schema()) == SETTINGS_FIELDS
    assert set(worker.CAPACITY["properties"]) == {"slots", "cpu", "mem"}


GOOD_JOBS: list[dict[str, Any]] = [
    {"name": "nightly", "tenant": "acme", "cron": "0 2 * * *",
     "tasks": {"extract": {"ref": "api.add", "args": [1, 2]},
               "load": {"command": ["true"], "depends_on": ["extract"], "timeout_s": 30}}},
    {"name": "short", "cron": "*/5 * * * *", "retries": 3, "timeout_s": 60,
     "task": {"image": "alpine:3", "cmd": "echo hi", "cpu": 0.5, "mem": "256M"},
     "depends_on": "nightly"},
    {"name": "listed", "every": 90, "tasks": [{"name": "a", "task": "api.add", "retries": 2.0}]},
    {"name": "named", "every": 90, "task": "api.add", "retries": 2},  # a registered task's name
    # an image's command may be null; what does not run may be null
    {"name": "c", "task": {"image": "alpine:3", "command": None}},
    {"name": "d", "task": {"command": ["true"], "image": None}},
    {"name": "e", "tasks": {"a": {"command": ["true"], "ref": None, "image": None},
                            "b": {"image": "alpine", "cmd": "echo hi", "ref": None}}},
]  # fmt: skip
BAD_JOBS: list[dict[str, Any]] = [
    {"cron": "0 2 * * *", "tasks": {"a": "api.add"}},  # no name
    {"name": "x"},  # no task
    {"name": "x", "tasks": {"a": "api.add"}, "task": {"name": "api.add"}},  # both forms
    {"name": "x", "tasks": {"a": "api.add"}, "retries": 2},  # a short-form field
    {"name": "x y", "tasks": {"a": "api.add"}},
    {"name": "x", "tasks": {"a": {"ref": "api.add", "bogus": 1}}},
    {"name": "x", "tasks": {"a": "api.add"}, "keep_runs": 0},
    {"name": "x", "task": ""},
    {"name": "x", "task": ["api.add"]},
    # exactly one kind of task: what runs is given once, and not null
    {"name": "x", "task": {"name": "api.add", "image": "alpine"}},
    {"name": "x", "task": {"command": ["true"], "cmd": "true"}},
    {"name": "x", "task": {"name": None}},
    {"name": "x", "task": {"name": "api.add", "command": None}},
    {"name": "x", "tasks": {"a": {"ref": "api.add", "command": ["true"]}}},
    {"name": "x", "tasks": {"a": {"ref": None}}},
    {"name": "x", "tasks": {"a": {"ref": "api.add", "task": "api.add"}}},
    {"name": "x", "tasks": {"a": {"image": "alpine", "cmd": "x", "command": ["x"]}}},
    {"name": "x", "tasks": {"a": {"ref": "api.add", "timeout": 1, "timeout_s": 1}}},
]


@pytest.mark.parametrize("job", GOOD_JOBS)
def test_the_job_schema_takes_what_the_api_takes(job: dict[str, Any]) -> None:
    assert jsonschema_rs.validator_for(job_body_schema()).is_valid(job)


@pytest.mark.parametrize("job", BAD_JOBS)
def test_the_job_schema_refuses_what_the_api_refuses(job: dict[str, Any]) -> None:
    assert not jsonschema_rs.validator_for(job_body_schema()).is_valid(job)
