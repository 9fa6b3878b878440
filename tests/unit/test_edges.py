"""What travels along a run's DAG edges (redcron.model.edges), without Redis: the
inputs reply decoded, the binding order (a call's own arguments, then upstream
results, then params), the result bound's words, the JSON a command task
reads, and the run page's edge hover text."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import msgpack
import pytest

from redcron.config import Settings
from redcron.dashboard.ui.dag import DagNode, dag_svg
from redcron.dashboard.ui.render import result_preview
from redcron.errors import ConfigError
from redcron.model.binding import CallShape
from redcron.model.edges import RunInputs, result_too_large, upstream_json

SVG = "{http://www.w3.org/2000/svg}"


def packed(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def test_a_reply_row_decodes_to_params_and_upstream_results_in_deps_order() -> None:
    row = [b'{"day": "mon"}', b"b", packed(2), b"a", packed({"k": [1]}), b"gone", None]
    inputs = RunInputs.from_reply(row)
    assert inputs.params == {"day": "mon"}
    assert inputs.upstream == {"b": 2, "a": {"k": [1]}}  # gone: no result, left out
    assert list(inputs.upstream) == ["b", "a"]
    assert RunInputs.from_reply([None]) == RunInputs({}, {})  # a root task, no params
    assert RunInputs.from_reply([b"[1, 2]"]).params == {}  # params that are no object
    assert RunInputs.from_reply([]) == RunInputs()


def test_own_arguments_then_upstream_results_then_params() -> None:
    def task(a: int, b: int = 0, *, day: str = "", other: int = 0) -> None: ...

    shape = CallShape.of(task)
    inputs = RunInputs({"a": 99, "b": 98, "day": "mon"}, {"a": 1, "b": 2})
    # b given by the call: kept; a: the upstream result beats the param; day: the param
    kwargs = {"b": 5}
    assert inputs.fill(shape.fillable([], kwargs), kwargs) == {"b": 5, "a": 1, "day": "mon"}
    # by position too: a is the call's own
    assert inputs.fill(shape.fillable([7], {}), {}) == {"b": 2, "day": "mon"}
    # nothing to fill: the same dict back
    none: dict[str, object] = {"x": 1}
    assert RunInputs().fill(("a",), none) is none


def test_an_upstream_result_of_none_is_passed_as_none() -> None:
    inputs = RunInputs.from_reply([None, b"a", packed(None)])
    assert inputs.upstream == {"a": None}
    assert inputs.fill(("a",), {}) == {"a": None}


def test_the_bound_names_the_size_and_the_setting() -> None:
    assert result_too_large(1024, 1024) is None
    error = result_too_large(2_000_000, 1_048_576)
    assert error is not None
    assert error.startswith("result too large: 2,000,000 bytes of msgpack, over the limit of ")
    assert "1,048,576 bytes (max_result_bytes (REDCRON_MAX_RESULT_BYTES))" in error


def test_the_setting_defaults_to_one_mib_and_reads_its_variable() -> None:
    assert Settings().max_result_bytes == 1_048_576
    env = {"REDCRON_MAX_RESULT_BYTES": "2048", "REDCRON_REDIS_URL": "redis://h:1/0"}
    assert Settings.from_env(env).max_result_bytes == 2048
    with pytest.raises(ConfigError, match="max_result_bytes"):
        Settings(max_result_bytes=0)


def test_a_command_task_reads_strict_json() -> None:
    text = upstream_json({"a": 1, "b": {"raw": b"bytes", 3: math.inf}, "c": None})
    assert json.loads(text) == {"a": 1, "b": {"raw": "bytes", "3": "Infinity"}, "c": None}
    assert upstream_json({}) == "{}"


def test_a_result_preview_is_short_json() -> None:
    assert result_preview(None) == ""
    assert result_preview(packed({"n": 1})) == '{"n": 1}'
    long = result_preview(packed("x" * 500), limit=20)
    assert len(long) == 20 and long.endswith("\u2026")
    assert result_preview(b"\xc1") == '{"undecodable": "1 bytes"}'  # not msgpack


def test_each_edge_says_what_its_upstream_carried() -> None:
    nodes = [
        DagNode("a", "succeeded", (), carried="1"),
        DagNode("b", "succeeded", ("a",), carried='"<&>"'),
        DagNode("c", "running", ("a", "b")),
        DagNode("d", "pending", ("c",)),
    ]
    root = ET.fromstring(str(dag_svg(nodes)))
    tips = {}
    for path in root.iter(f"{SVG}path"):
        if "edge" not in path.get("class", "").split():
            continue
        title = path.find(f"{SVG}title")
        tips[(path.get("data-from"), path.get("data-to"))] = (
            path.get("data-carried"),
            None if title is None else title.text,
        )
    assert tips == {
        ("a", "b"): ("1", "a \u2192 b: 1"),
        ("a", "c"): ("1", "a \u2192 c: 1"),
        ("b", "c"): ('"<&>"', 'b \u2192 c: "<&>"'),  # escaped in the markup, parsed back
        ("c", "d"): (None, None),  # c has not handed anything on yet
    }
