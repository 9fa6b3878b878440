"""Hypothesis strategies for plausible-but-wrong input: job specs, cron
expressions, time zones, names, task arguments.  Imported by name
(``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

#: fuzzing talks to a real Redis on 2 shared cores: keep the counts modest
EXAMPLES = 150

#: text users get wrong: empty, whitespace, control characters, NUL, other scripts,
#: surrogate-free unicode, very long, and names with the key layout's separators
awkward_text = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "\n",
            "\x00",
            "a\x00b",
            "acme\n",
            "a:b",
            "{s0}",
            "a b",
            "é",
            "²",
            "\u0661-x",
            "\u0663",
            "💥",
            "../etc",
            "x" * 65,
            "x" * 5000,
            "null",
            "None",
            "true",
            "0",
            "-1",
            "1e309",
            "NaN",
            "Infinity",
        ]
    ),
    st.text(max_size=80),
)

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**53 + 1, 2**63, 2**64, 10**30, -(10**30)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1e-300, 1e308, -1e308]),
)
#: what the Python API can be handed but JSON cannot carry
non_finite = st.sampled_from([float("nan"), float("inf"), float("-inf")])

json_scalars = st.one_of(st.none(), st.booleans(), numbers, awkward_text)


def deep(depth: int, leaf: Any = 1) -> Any:
    """A value nested ``depth`` levels (lists and dicts alternating)."""
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


#: any JSON value: scalars, containers, deep nesting
json_values = st.one_of(
    st.recursive(
        json_scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(awkward_text, inner, max_size=4)
        ),
        max_leaves=12,
    ),
    st.sampled_from([deep(50), deep(400)]),
)

#: what a Python caller may pass that msgpack or JSON cannot encode
unencodable = st.sampled_from(
    [object(), {1, 2}, frozenset(), complex(1, 2), 2**64, -(2**63) - 1, {(1, 2): 3},
     [object()], {"k": {1}}, type, lambda: 1, range(3), bytearray(b"x"), memoryview(b"x")]
)  # fmt: skip

cron_exprs = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "* * * *",
            "* * * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * 32 * *",
            "* * * 13 *",
            "* * * 0 *",
            "* * * * 8",
            "*/0 * * * *",
            "*/-1 * * * *",
            "5-1 * * * *",
            "1-2-3 * * * *",
            ",,, * * * *",
            "@daily",
            "@yearly",
            "@reboot",
            "@hourly x",
            "0 0 30 2 *",
            "0 0 31 4,6,9,11 *",
            "L * * * *",
            "? * * * *",
            "1/2 * * * *",
            "* * * JAN-DEC MON",
            "* * * * MON-SUN",
            "99999999999999999999 * * * *",
            "\u0663 * * * *",
            "* * * * *\n",
            "0 2 * * *\x00",
            "*/1000000 * * * *",
            "0-59/2,1 0-23 1-31 1-12 0-7",
        ]
    ),
    st.text(alphabet="0123456789*/,-@ LWJANFEBMONSUNabc", max_size=30),
)

time_zones = st.one_of(
    st.sampled_from(
        [
            "",
            "UTC",
            "utc",
            "Europe/Berlin",
            "europe/berlin",
            "Mars/Olympus",
            "../../etc/passwd",
            "/etc/localtime",
            "Etc/GMT+14",
            "Etc/GMT+15",
            "+02:00",
            "GMT",
            "EST5EDT",
            "Local",
            "localtime",
            "\x00",
            "Europe/Berlin\n",
            "America/Argentina/ComodRivadavia",
            "x" * 300,
            "Asia/Kolkata ",
            "posixrules",
            "zone.tab",
            "tzdata.zi",
            "__init__.py",
            ".",
        ]
    ),
    awkward_text,
)

every_exprs = st.one_of(
    st.sampled_from(
        [
            "",
            "0s",
            "0",
            "-5s",
            "1.5s",
            "30s",
            "5m",
            "2h",
            "1d",
            "1w",
            "1y",
            "nan",
            "infs",
            "1e309s",
            "99999999999999999999d",
            "\u0663s",
            "5 m",
            "5mins",
            "s",
            "10ms",
        ]
    ),
    awkward_text,
)

names = st.one_of(awkward_text, st.from_regex(r"[A-Za-z0-9_.\-]{1,64}", fullmatch=True))

#: fields of a job body, and a strategy of wrong-ish values for each
JOB_FIELDS: dict[str, Any] = {
    "name": names,
    "tenant": names,
    "cron": cron_exprs,
    "every": every_exprs,
    "at": st.one_of(
        st.sampled_from(
            [
                "2030-01-01T00:00:00Z",
                "2030-02-30T00:00:00",
                "tomorrow",
                "2030-01-01",
                "9999-12-31T23:59:59",
                "0001-01-01T00:00:00Z",
                "2030-01-01T25:00:00",
            ]
        ),
        awkward_text,
    ),
    "tz": time_zones,
    "catchup": st.one_of(st.sampled_from(["latest", "all", "none", "LATEST"]), awkward_text),
    "catchup_limit": numbers,
    "overlap": st.one_of(st.sampled_from(["allow", "skip", "buffer_one", "x"]), awkward_text),
    "jitter_s": numbers,
    "paused": json_scalars,
    "pause_after_failures": numbers,
    "keep_runs": numbers,
    "keep_days": numbers,
    "breaker_threshold": numbers,
    "breaker_min_attempts": numbers,
    "breaker_window_s": numbers,
    "breaker_cooldown_s": numbers,
    "deadline_s": numbers,
}
TASK_FIELDS: dict[str, Any] = {
    "ref": names,
    "args": json_values,
    "kwargs": json_values,
    "command": st.one_of(
        st.lists(awkward_text, max_size=3),
        st.sampled_from([["true"], ["sh", "-c", "echo \x00"], [""], ["\x00"]]),
    ),
    "env": st.one_of(
        st.dictionaries(awkward_text, json_scalars, max_size=3),
        st.sampled_from([{"A": "1"}, {"": "x"}, {"A=B": "x"}, {"A": "\x00"}, {"\x00": "x"}]),
    ),
    "cwd": json_scalars,
    "image": awkward_text,
    "cpu": numbers,
    "mem": st.one_of(numbers, st.sampled_from(["512M", "1.5GiB", "0M", "-1G", "1e3M", "\u0661M"])),
    "depends_on": st.one_of(json_values, st.sampled_from([["a"], ["b"], ["b", "b"], "b"])),
    "timeout": numbers,
    "retries": numbers,
    "retry_base": numbers,
    "retry_cap": numbers,
    "priority": st.one_of(st.sampled_from(["high", "normal", "low", "HIGH"]), awkward_text),
    "queue": names,
}

BASE_JOB: dict[str, Any] = {
    "name": "nightly",
    "tenant": "acme",
    "cron": "0 2 * * *",
    "tasks": {
        "a": {"ref": "fuzz.add", "args": [1, 2]},
        "b": {"command": ["true"], "depends_on": ["a"]},
    },
}


@st.composite
def job_bodies(draw: st.DrawFn, base: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """A job body with a few mutations; returns it and the path of the first one
    (``cron``, ``tasks.b.env``, ``tasks``...), which a rejection should name."""
    job = copy.deepcopy(base or BASE_JOB)
    paths: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["set", "set", "set", "task", "task", "drop", "extra"]))
        if action == "set":
            key = draw(st.sampled_from(sorted(JOB_FIELDS)))
            job[key] = draw(JOB_FIELDS[key])
            paths.append(key)
        elif action == "task":
            tasks = job.get("tasks")
            if not isinstance(tasks, dict) or not tasks:
                continue
            tname = draw(st.sampled_from(sorted(tasks)))
            key = draw(st.sampled_from(sorted(TASK_FIELDS)))
            tasks[tname] = {**tasks[tname], key: draw(TASK_FIELDS[key])}
            paths.append(f"tasks.{tname}.{key}")
        elif action == "drop":
            key = draw(st.sampled_from(["name", "cron", "tasks", "tenant"]))
            job.pop(key, None)
            paths.append(key)
        else:
            key = draw(st.sampled_from(["nmae", "task", "jobs", "", "tasks.a", "__class__"]))
            job[key] = draw(json_values)
            paths.append(key)
    if draw(st.booleans()) and isinstance(job.get("tasks"), dict):
        job["tasks"] = draw(st.sampled_from([[], {}, "a", [{"ref": "x"}], None, job["tasks"]]))
        paths.append("tasks")
    return job, paths[0] if paths else ""
