"""Property-based fuzzing of the CLI (click's CliRunner against the test server):
``redcron jobs apply -f`` with job files of wrong shapes (YAML and JSON),
``redcron tenants set`` with bad options, ``redcron task list`` filters.

Properties: a refusal exits 1 or 2 with one ``error: ...`` line that names
the field; no traceback; nothing is written; an applied file reads back.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from click.testing import Result
from fuzz_strategies import BASE_JOB, awkward_text, job_bodies, names, numbers
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from redis_dump import diff, dump


@pytest.fixture(autouse=True)
def _deployed(invoke: Invoke) -> None:
    """The first command writes the deployment's metadata hash, once: not a write
    of any command under test.  BASE_JOB's tenant may have its command task."""
    assert invoke("jobs", "list").exit_code == 0
    assert invoke("tenants", "set", "acme", "--allow-commands").exit_code == 0


FUZZ = settings(
    max_examples=60,  # each example is a whole CLI invocation
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def one_line_error(result: Result, *mentions: str) -> str:
    assert result.exit_code in (1, 2), (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    text = result.output.strip()
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.startswith("error: ")]
    # click's own usage errors read "Usage: ... Error: ..."; ours one "error: " line
    if not lines:
        assert "Error: " in text, text
        return text
    assert len(lines) == 1, text
    if mentions:
        assert any(m in lines[0] for m in mentions), (mentions, lines[0])
    return lines[0]


@FUZZ
@given(case=job_bodies(), as_yaml=st.booleans())
@example(case=({**BASE_JOB, "": None}, ""), as_yaml=False)
@example(
    case=({**BASE_JOB, "tasks": {"a": {"command": ["true"], "env": {":": None}}}}, ""),
    as_yaml=False,
)
def test_jobs_apply_file(
    invoke: Invoke, r: redis.Redis, key_prefix: str, case: tuple[dict[str, Any], str], as_yaml: bool
) -> None:
    job, path = case
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / ("jobs.yaml" if as_yaml else "jobs.json")
        try:
            file.write_text(yaml.safe_dump(job) if as_yaml else json.dumps(job))
        except (ValueError, yaml.YAMLError, UnicodeEncodeError):
            return  # not writable as such a file
        before = dump(r, key_prefix)
        # registration is not under test here (the file's shape is)
        result = invoke("jobs", "apply", "-f", str(file), "--allow-unregistered")
    if result.exit_code == 0:
        shown = invoke(
            "jobs", "show", str(job["name"]), "--tenant", str(job.get("tenant")), "--json"
        )
        if shown.exit_code == 0:
            assert json.loads(shown.output)["name"] == job["name"]
        return
    assert not diff(before, dump(r, key_prefix)), result.output
    line = one_line_error(result)
    if "allow_commands" in line:  # a valid job with a command task of an ungranted tenant
        assert job.get("tenant", "default") != "acme", line
        return
    # the file, then the job and the field: "jobs.yaml: job 'nightly': tasks.b.env: ..."
    assert file.name in line, line
    # a field after the job ("job 'nightly': tasks.b.env: ..."), a line of the file,
    # or the file's shape as a whole
    # (a key that is not a plain name is JSON-quoted: tasks.a.env[":"])
    named = re.search(r": (job (#\d+|'[^']*'): )?([\w.\[\]-]|\"([^\"\\]|\\.)*\")+: ", line)
    assert named or "must hold" in line or "empty" in line, (path, line)


TENANT_OPTIONS = {
    "--weight": st.one_of(numbers.map(str), awkward_text),
    "--max-in-flight": st.one_of(numbers.map(str), awkward_text),
    "--rate": st.one_of(st.sampled_from(["20/s", "1e3/m", "nan", "inf/s", "5/d"]), awkward_text),
    "--burst": st.one_of(numbers.map(str), awkward_text),
    "--max-queued": st.one_of(numbers.map(str), awkward_text),
    "--max-priority": st.one_of(st.sampled_from(["high", "urgent"]), awkward_text),
    "--jitter": st.one_of(st.sampled_from(["nan", "inf", "-1", "1e308", "5"]), numbers.map(str)),
}  # fmt: skip


@FUZZ
@given(
    tenant=st.one_of(st.just("acme"), names),
    options=st.dictionaries(st.sampled_from(sorted(TENANT_OPTIONS)), st.just(None), max_size=3),
    data=st.data(),
)
def test_tenants_set(
    invoke: Invoke,
    r: redis.Redis,
    key_prefix: str,
    tenant: str,
    options: dict[str, None],
    data: st.DataObject,
) -> None:
    argv = ["tenants", "set", tenant]
    for option in options:
        value = data.draw(TENANT_OPTIONS[option])
        argv += [option, value]
    before = dump(r, key_prefix)
    result = invoke(*argv)
    if result.exit_code == 0:
        return
    assert not diff(before, dump(r, key_prefix)), result.output
    mentions = [o.lstrip("-").replace("-", "_") for o in options] + list(options)
    one_line_error(result, "tenant", "TENANT", *mentions, "burst", "rate")


@FUZZ
@given(
    option=st.sampled_from(["--state", "--tenant", "--queue", "--name", "--limit"]),
    value=st.one_of(awkward_text, st.sampled_from(["dead", "DEAD", "0", "-1", "10**9", "1e3"])),
)
def test_task_list_filters(
    invoke: Invoke, r: redis.Redis, key_prefix: str, option: str, value: str
) -> None:
    if value.startswith("-") and value != "-1":
        value = f" {value}"  # not an option of its own
    before = dump(r, key_prefix)
    result = invoke("task", "list", option, value)
    assert not diff(before, dump(r, key_prefix))
    if result.exit_code != 0:
        one_line_error(result, option.lstrip("-"), option)
