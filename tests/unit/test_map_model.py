"""Mapped tasks' pure parts (issue 32 §2): the spec's checks and its
compiled rows, the list a map is made of, the inputs an instance and a join
receive, the counts the faces show, a chord's job name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from redcron import serde
from redcron.app import _chord_job_name
from redcron.errors import ValidationError
from redcron.keys import map_index
from redcron.model.edges import RunInputs, map_items
from redcron.model.jobs import MAP_MAX_LIMIT, Task, job_spec
from redcron.model.records.tasks import MapCounts

DEFAULTS = {"retries": 0, "retry_base": 1.0, "retry_cap": 60.0}


def dag(**transform: Any) -> dict[str, Task]:
    return {
        "extract": Task("t"),
        "transform": Task("t", **transform),
        "load": Task("t", depends_on=["transform"]),
    }


def test_map_over_makes_the_upstream_a_dependency_and_goes_in_the_row() -> None:
    spec = job_spec("j", tasks=dag(map_over="extract", map_max=50))
    rows = {r["task"]: r for r in json.loads(spec.template(DEFAULTS)[0])}
    assert rows["transform"]["deps"] == ["extract"]
    assert (rows["transform"]["map_over"], rows["transform"]["map_max"]) == ("extract", 50)
    assert rows["extract"]["down"] == ["transform"]
    # named in depends_on as well: one edge
    spec = job_spec("j", tasks=dag(map_over="extract", depends_on=["extract"]))
    rows = {r["task"]: r for r in json.loads(spec.template(DEFAULTS)[0])}
    assert rows["transform"]["deps"] == ["extract"] and "map_max" not in rows["transform"]


def test_a_map_over_a_param_is_a_root() -> None:
    spec = job_spec("j", tasks={"each": Task("t", map_over="params.items")})
    (row,) = json.loads(spec.template(DEFAULTS)[0])
    assert row["map_over"] == "params.items" and "deps" not in row


@pytest.mark.parametrize(
    ("transform", "field", "words"),
    [
        ({"map_over": "nope"}, "tasks.transform.map_over", "unknown task 'nope'"),
        ({"map_over": "transform"}, "tasks.transform.map_over", "cannot depend on itself"),
        ({"map_over": "bad name!"}, "tasks.transform.map_over", "or a param of the run"),
        ({"map_over": "params."}, "tasks.transform.map_over", "or a param of the run"),
        ({"map_over": 3}, "tasks.transform.map_over", "name the upstream task"),
        ({"map_max": 5}, "tasks.transform.map_max", "give map_over"),
        ({"map_over": "extract", "map_max": 0}, "tasks.transform.map_max", "must be 1 to"),
        (
            {"map_over": "extract", "map_max": MAP_MAX_LIMIT + 1},
            "tasks.transform.map_max",
            "must be 1 to 100,000",
        ),
        ({"map_over": "load"}, "tasks", "dependency cycle"),
    ],
)
def test_a_bad_map_names_its_field(transform: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ValidationError) as err:
        job_spec("j", tasks=dag(**transform))
    assert err.value.field == field
    assert words in str(err.value)


def test_the_list_a_map_is_made_of() -> None:
    assert map_items((1, 2), "extract", 10) == [1, 2]
    assert map_items([], "extract", 10) == []
    assert map_items({"a": 1}, "extract", 10) == (
        "map_over 'extract' gave dict, not a list: a mapped task makes one instance per "
        "element of a list"
    )
    too_many = map_items(list(range(11)), "params.items", 10)
    assert isinstance(too_many, str)
    assert too_many.startswith("map_over param 'items' gave 11 elements, over the task's map_max")
    assert "raise map_max (at most 100,000)" in too_many


def test_an_instance_gets_its_element_and_a_join_the_list() -> None:
    row = [b'{"day": "mon"}', b"extract", serde.dumps(7), b"other", serde.dumps("x")]
    assert RunInputs.from_reply(row) == RunInputs({"day": "mon"}, {"extract": 7, "other": "x"})
    # a mapped upstream: its instances' results, in order; one without a result is None
    join = [None, b"transform", [serde.dumps(1), None, serde.dumps(3)]]
    assert RunInputs.from_reply(join).upstream == {"transform": [1, None, 3]}
    # a map over a param: the element is the param of that name for this instance
    param = [b'{"items": [1, 2], "k": 1}', b"params.items", serde.dumps(2)]
    assert RunInputs.from_reply(param) == RunInputs({"items": 2, "k": 1}, {})


def test_the_counts_the_faces_show() -> None:
    assert MapCounts("extract", None, 0, 0, 0).summary() == "mapped over extract: not made yet"
    m = MapCounts("extract", 1000, 1000, 999, 998)
    assert m.failed == 1
    assert m.summary() == "1,000 instances over extract: 998 succeeded, 1 failed, 1 to go"
    assert MapCounts("e", 1, 1, 1, 1).summary() == "1 instance over e: 1 succeeded"


def test_an_instances_name_says_its_index() -> None:
    assert map_index("transform[3]") == 3
    assert [map_index(n) for n in ("transform", "[3]", "t[x]", "t[3", "t[-1]")] == [None] * 5


def test_a_chords_job_name_is_a_valid_name_and_never_shared() -> None:
    assert _chord_job_name("app.square", "app.total") == "chord.app.square.app.total"
    assert _chord_job_name("mod:fn", "x y") == "chord.mod_fn.x_y"
    long_a, long_b = _chord_job_name("a" * 40, "b" * 40), _chord_job_name("a" * 40, "b" * 41)
    assert len(long_a) == len(long_b) == 64 and long_a != long_b
