"""Job files (YAML/JSON) without Redis: every accepted form, and errors that
name the file, the job and the field."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from redcron.errors import ValidationError
from redcron.model.jobfile import JobFileError, load_job_files, load_jobs, parse_jobs
from redcron.model.jobs import JobSpec, Task, chain_order, spec_from_json


def write(tmp_path: Path, text: str, name: str = "jobs.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(ValidationError) as info:
        load_jobs(path)
    assert isinstance(info.value, JobFileError)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    return message


NIGHTLY = """
    name: nightly
    cron: "0 2 * * *"
    tz: Europe/Berlin
    tasks:
      extract: etl.extract
      transform:
        task: etl.transform
        args: [1, 2]
        kwargs: {mode: fast}
        depends_on: [extract]
        retries: 2
        timeout: 30
      load:
        command: [sh, -c, "echo load"]
        depends_on: [transform]
"""


# -- accepted forms ---------------------------------------------------------------


def test_one_job_mapping(tmp_path: Path) -> None:
    (spec,) = load_jobs(write(tmp_path, NIGHTLY))
    assert spec.name == "nightly"
    assert spec.tenant == "default"
    assert spec.cron == "0 2 * * *"
    assert spec.tz == "Europe/Berlin"
    assert list(spec.tasks) == ["extract", "transform", "load"]
    assert spec.tasks["extract"] == Task(ref="etl.extract")
    transform = spec.tasks["transform"]
    assert transform.ref == "etl.transform"
    assert transform.args == [1, 2]
    assert transform.kwargs == {"mode": "fast"}
    assert transform.depends_on == ["extract"]
    assert (transform.retries, transform.timeout) == (2, 30)
    assert spec.tasks["load"].kind == "command"
    assert spec.tasks["load"].command == ["sh", "-c", "echo load"]


def test_a_list_of_jobs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        - name: a
          every: 30s
          tasks: {t: x.y}
        - name: b
          tenant: acme
          tasks: {t: x.y}
        """,
    )
    specs = load_jobs(path)
    assert [(s.tenant, s.name, s.every) for s in specs] == [
        ("default", "a", "30s"),
        ("acme", "b", None),
    ]


def test_jobs_key_and_tasks_as_a_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        jobs:
          - name: listed
            every: 5m
            tasks:
              - name: first
                task: x.first
              - name: second
                command: [echo, hi]
                depends_on: first
        """,
    )
    (spec,) = load_jobs(path)
    assert list(spec.tasks) == ["first", "second"]
    assert spec.tasks["first"].ref == "x.first"
    # a single dependency may be written as a plain string
    assert spec.tasks["second"].depends_on == ["first"]


def test_json_file(tmp_path: Path) -> None:
    doc = {
        "jobs": [
            {
                "name": "j",
                "at": "2026-11-29T02:00:00Z",
                "tasks": {"a": "x.a", "b": {"ref": "x.b", "depends_on": ["a"]}},
            }
        ]
    }
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(doc))
    (spec,) = load_jobs(path)
    assert spec.at == datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    assert spec.tasks["b"].depends_on == ["a"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"2026-11-29T02:00:00Z"', datetime(2026, 11, 29, 2, tzinfo=UTC)),
        ("2026-11-29T02:00:00+01:00", datetime(2026, 11, 29, 1, tzinfo=UTC)),
        ('"2026-11-29T02:00:00"', datetime(2026, 11, 29, 2)),  # wall time in tz
    ],
)
def test_at_accepts_iso_8601(tmp_path: Path, value: str, expected: datetime) -> None:
    path = write(tmp_path, f"name: once\nat: {value}\ntasks: {{t: x.y}}\n")
    (spec,) = load_jobs(path)
    assert spec.at == expected
    if expected.tzinfo is not None:
        assert spec.at is not None
        assert spec.at.utcoffset() is not None
        assert spec.at.astimezone(timezone(timedelta(0))) == expected


def test_yaml_merge_keys_may_be_overridden(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: merged
        tasks:
          a: &base {task: x.a, retries: 1, timeout: 5}
          b:
            <<: *base
            task: x.b
            depends_on: [a]
        """,
    )
    (spec,) = load_jobs(path)
    assert spec.tasks["b"].ref == "x.b"
    assert spec.tasks["b"].retries == 1


def test_several_files(tmp_path: Path) -> None:
    a = write(tmp_path, "name: a\ntasks: {t: x.y}\n", "a.yaml")
    b = write(tmp_path, "name: b\ntasks: {t: x.y}\n", "b.yml")
    assert [s.name for s in load_job_files([a, b])] == ["a", "b"]


# -- errors: file, job and field in one line --------------------------------------


def test_duplicate_task_key_names_key_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: nightly
        tasks:
          load: x.load
          extract: x.extract
          load: x.load_again
        """,
    )
    message = load_error(path)
    # dedent keeps the leading newline: "load" is on lines 4 and 6 of the file
    assert "line 6" in message
    assert "duplicate key 'load'" in message
    assert "line 4" in message


def test_duplicate_key_in_json(tmp_path: Path) -> None:
    path = tmp_path / "jobs.json"
    path.write_text('{"name": "j", "tasks": {"a": "x.a", "a": "x.b"}}')
    assert "duplicate key 'a'" in load_error(path)


def test_unknown_job_field(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, "name: nightly\nschedule: daily\ntasks: {t: x.y}\n"))
    assert "job 'nightly': schedule: unknown field" in message


def test_unknown_task_field(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, "name: nightly\ntasks:\n  t: {task: x.y, retry: 3}\n"))
    assert "job 'nightly': tasks.t.retry: unknown field" in message


def test_the_known_lists_name_the_aliases_the_tutorial_writes(tmp_path: Path) -> None:
    # docs/tutorial.md writes `task: examples.tasks.slow` in a task: a typo of it
    # listed ref but not task (nor cmd, timeout_s)
    message = load_error(write(tmp_path, "name: nightly\ntasks:\n  t: {taks: x.y}\n"))
    assert "tasks.t.taks: unknown field; known: args, cmd (= command), command," in message
    assert "ref, retries, retry_base, retry_cap, task (= ref), timeout, timeout_s (= timeout)" in (
        message
    )
    # and the job's: the short form's task, retries and timeout_s
    message = load_error(write(tmp_path, "name: nightly\ntaks: x.y\n"))
    assert message.endswith(
        "tasks, tenant, tz; or, for a job of one task, task, retries, timeout_s in place of tasks"
    )
    message = load_error(write(tmp_path, "name: nightly\ntasks:\n  t: {task: x.y, ref: x.z}\n"))
    assert "tasks.t.task: give task or ref, not both" in message


def test_cycle_is_named(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: loop
        tasks:
          a: {task: x.a, depends_on: [c]}
          b: {task: x.b, depends_on: [a]}
          c: {task: x.c, depends_on: [b]}
        """,
    )
    message = load_error(path)
    assert "job 'loop': tasks: dependency cycle:" in message
    assert "a -> c -> b -> a" in message or "a -> b -> c -> a" in message


def test_unknown_dependency(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: nightly
        tasks:
          extract: x.extract
          load: {task: x.load, depends_on: [extrct]}
        """,
    )
    message = load_error(path)
    assert f"{path}: job 'nightly': tasks.load.depends_on: unknown task 'extrct'" in message


def test_bad_time_zone(tmp_path: Path) -> None:
    path = write(tmp_path, "name: berlin\ncron: '0 2 * * *'\ntz: Europe/Berln\ntasks: {t: x.y}\n")
    message = load_error(path)
    assert "job 'berlin': tz: unknown time zone 'Europe/Berln'" in message


def test_malformed_cron_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, "name: nightly\ncron: '0 25 * * *'\ntasks: {t: x.y}\n")
    message = load_error(path)
    assert "job 'nightly': cron:" in message
    assert "hour" in message


@pytest.mark.parametrize("field", ["cron", "every"])
def test_an_empty_schedule_is_an_error_not_a_manual_job(tmp_path: Path, field: str) -> None:
    path = write(tmp_path, f"name: nightly\n{field}: ''\ntasks: {{t: x.y}}\n")
    message = load_error(path)
    assert f"job 'nightly': {field}: '' is empty" in message
    assert "manual job" in message
    (spec,) = load_jobs(write(tmp_path, "name: nightly\ntasks: {t: x.y}\n"))
    assert spec.trigger().kind == "manual"  # no schedule at all: a manual job


def test_a_stored_spec_with_an_empty_cron_still_loads_as_a_manual_job() -> None:
    # jobs written while "" meant "no schedule" must stay readable by the beat and CLI
    text = json.dumps({"name": "old", "cron": "", "every": "", "tasks": {"t": {"ref": "x.y"}}})
    spec = spec_from_json(text)
    assert spec.cron is None and spec.every is None
    assert spec.trigger().kind == "manual"


def test_look_alike_digits_in_cron_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("name: nightly\ncron: '\u00b3 * * * *'\ntasks: {t: x.y}\n", encoding="utf-8")
    message = load_error(path)
    assert "job 'nightly': cron:" in message and "non-ASCII" in message


def test_negative_timeout(tmp_path: Path) -> None:
    path = write(tmp_path, "name: nightly\ntasks:\n  t: {task: x.y, timeout: -5}\n")
    message = load_error(path)
    assert "job 'nightly': tasks.t.timeout: -5" in message


def test_bad_at(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, "name: once\nat: tomorrow\ntasks: {t: x.y}\n"))
    assert "job 'once': at: 'tomorrow' is not an ISO-8601" in message
    message = load_error(write(tmp_path, "name: once\nat: 2026-11-29\ntasks: {t: x.y}\n"))
    assert "job 'once': at: 2026-11-29 is a date" in message


def test_missing_name_counts_the_job(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, "- name: a\n  tasks: {t: x.y}\n- tasks: {t: x.y}\n"))
    assert "job #2: name: missing" in message


def test_no_tasks(tmp_path: Path) -> None:
    assert "job 'empty': tasks: a job needs at least one task" in load_error(
        write(tmp_path, "name: empty\ncron: '* * * * *'\n")
    )


def test_later_bad_job_fails_the_whole_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        - name: good
          tasks: {t: x.y}
        - name: bad
          every: 0s
          tasks: {t: x.y}
        """,
    )
    assert "job 'bad': every:" in load_error(path)


def test_job_declared_twice(tmp_path: Path) -> None:
    path = write(tmp_path, "- name: a\n  tasks: {t: x.y}\n- name: a\n  tasks: {t: x.z}\n")
    assert "declared twice" in load_error(path)
    a = write(tmp_path, "name: a\ntasks: {t: x.y}\n", "one.yaml")
    b = write(tmp_path, "name: a\ntasks: {t: x.y}\n", "two.yaml")
    with pytest.raises(JobFileError, match=r"two\.yaml: job 'a': name: .*already declares it"):
        load_job_files([a, b])


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, "name: a\ntasks: [unclosed\n"))
    assert ": line " in message


def test_empty_file_and_unknown_type(tmp_path: Path) -> None:
    assert "empty" in load_error(write(tmp_path, "# nothing\n"))
    assert "unknown file type '.toml'" in load_error(write(tmp_path, "x = 1", "jobs.toml"))
    assert "cannot read" in load_error(tmp_path / "missing.yaml")


def test_the_example_file_loads() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "jobs.yaml"
    specs = {s.name: s for s in load_jobs(path)}
    nightly = specs["nightly-report"]
    assert nightly.tz == "Europe/Berlin"
    assert nightly.cron
    assert len(nightly.tasks) == 3
    assert sorted(t.kind for t in nightly.tasks.values()) == ["command", "python", "python"]
    assert specs["heartbeat"].every == "30s"
    digest = specs["report-digest"]
    assert digest.depends_on == ["nightly-report"] and not digest.cron
    assert digest.tasks["report-digest"].retries == 1
    manual = [s for s in specs.values() if not (s.cron or s.every or s.at)]
    assert manual


# -- the design's body (issue 20 §2) ---------------------------------------------------


def test_the_design_body_verbatim_is_a_one_task_container_job() -> None:
    body = {
        "name": "resize", "cron": "*/5 * * * *",
        "task": {"image": "alpine:3.20", "cmd": "sh -c 'echo a b'", "cpu": 0.5, "mem": "256M"},
        "depends_on": [], "retries": 3, "timeout_s": 120, "tenant": "acme",
    }  # fmt: skip
    (spec,) = parse_jobs(body, "body")
    task = spec.tasks["resize"]
    assert task.kind == "container" and task.image == "alpine:3.20"
    assert task.command == ["sh", "-c", "echo a b"]  # POSIX quoting, no shell
    assert (task.cpu, task.mem, task.retries, task.timeout) == (0.5, "256M", 3, 120)
    assert spec.depends_on == [] and spec.tenant == "acme"


def test_the_short_forms_task_may_be_a_registered_tasks_name(tmp_path: Path) -> None:
    # it was "must be a mapping": a task of tasks may be written so, and this one too
    (spec,) = load_jobs(
        write(tmp_path, "name: adder\nevery: 1h\nretries: 2\ntask: examples.tasks.add\n")
    )
    assert list(spec.tasks) == ["adder"]
    assert (spec.tasks["adder"].ref, spec.tasks["adder"].retries) == ("examples.tasks.add", 2)
    # what is neither says what a task looks like
    for bad in ("[examples.tasks.add]", "5", '""'):
        message = load_error(write(tmp_path, f"name: adder\ntask: {bad}\n"))
        assert "job 'adder': task: " in message
        assert "give a registered task's name (task: examples.tasks.add) or a mapping, e.g. " in (
            message
        )
        assert 'task: {cmd: "echo hi"}' in message


def test_cmd_is_command_in_any_task_and_one_of_them_is_given() -> None:
    (spec,) = parse_jobs(
        {"name": "j", "tasks": {"t": {"cmd": ["echo", "$HOME"], "timeout_s": 5}}}, "f.yaml"
    )
    assert spec.tasks["t"].command == ["echo", "$HOME"] and spec.tasks["t"].timeout == 5
    with pytest.raises(JobFileError, match=r"tasks\.t\.cmd: give cmd or command, not both"):
        parse_jobs({"name": "j", "tasks": {"t": {"cmd": "a", "command": ["a"]}}}, "f.yaml")
    with pytest.raises(JobFileError, match=r"task: give exactly one of name"):
        parse_jobs({"name": "j", "task": {"name": "x", "cmd": "a"}}, "f.yaml")
    with pytest.raises(JobFileError, match=r"retries: set it per task"):
        parse_jobs({"name": "j", "retries": 2, "tasks": {"t": "x"}}, "f.yaml")


def test_job_level_depends_on_is_checked_and_ordered() -> None:
    with pytest.raises(JobFileError, match=r"depends_on: a job cannot depend on itself"):
        parse_jobs({"name": "j", "depends_on": "j", "task": {"name": "x"}}, "f.yaml")
    with pytest.raises(JobFileError, match=r"depends_on: names a job twice"):
        parse_jobs({"name": "j", "depends_on": ["a", "a"], "task": {"name": "x"}}, "f.yaml")
    specs = parse_jobs(
        [
            {"name": "c", "depends_on": ["a", "b"], "task": {"name": "x"}},
            {"name": "b", "depends_on": "a", "task": {"name": "x"}},
            {"name": "a", "task": {"name": "x"}},
            {"name": "a", "tenant": "other", "depends_on": ["c"], "task": {"name": "x"}},
        ],
        "f.yaml",
    )
    # upstreams first; another tenant's "c" is not this "a"'s (no cycle)
    assert [f"{specs[i].tenant}/{specs[i].name}" for i in chain_order(specs)] == [
        "default/a", "default/b", "default/c", "other/a",
    ]  # fmt: skip
    loop = [JobSpec("a", tasks={"t": Task("x")}, depends_on=["b"]),
            JobSpec("b", tasks={"t": Task("x")}, depends_on=["a"])]  # fmt: skip
    with pytest.raises(ValidationError, match=r"depends_on: job dependency cycle: a -> b -> a"):
        chain_order(loop)
