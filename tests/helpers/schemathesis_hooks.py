"""Schemathesis hooks for ``tests/integration/test_openapi_schemathesis.py``
(loaded by ``st run`` through ``SCHEMATHESIS_HOOKS``).

* The ``redcron-cursor-*`` formats of ``GET /v1/openapi.json`` (a list's
  ``cursor``): a valid cursor is one the API returned, which JSON Schema
  cannot say, so they are generated here as the API encodes them, with the
  element types each list's cursor holds (``dashboard/api/params.py``).
* A lease's long poll (``wait_s`` up to 30 s) is shortened to none: with no
  work queued each poll would last its whole ``wait_s``.
* Three refusals the document cannot state are let through (``filter_failure``):
  a memory amount over 2**53 - 1 bytes in text the pattern allows, a channel
  over the channel count limits, and one Allow header.
"""

from __future__ import annotations

import re
from typing import Any

import schemathesis
from hypothesis import strategies as st

from redcron.broker.dlq import DLQ_ENTRY_ID
from redcron.dashboard.api.common import encode_cursor
from redcron.dashboard.api.leases import WORKER_ID
from redcron.model import validation

_name = st.from_regex(validation._NAME, fullmatch=True)
_CURSORS: dict[str, st.SearchStrategy[list[Any]]] = {
    "jobs": st.tuples(st.text(), st.text()).map(list),
    "runs": st.tuples(st.integers(min_value=0, max_value=2**53), st.text()).map(list),
    "dlq": st.tuples(_name, st.just("") | st.from_regex(DLQ_ENTRY_ID, fullmatch=True)).map(list),
    "workers": st.tuples(st.from_regex(WORKER_ID, fullmatch=True)).map(list),
}
for kind, keys in _CURSORS.items():
    schemathesis.openapi.format(f"redcron-cursor-{kind}", st.just("") | keys.map(encode_cursor))


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: Any) -> None:
    body = case.body
    if (
        case.operation.path == "/v1/worker/lease"
        and isinstance(body, dict)
        and isinstance(body.get("wait_s"), int | float)
        and not isinstance(body["wait_s"], bool)
        and 0 < body["wait_s"] <= 30
    ):
        body["wait_s"] = 0


_MEM_TEXT = re.compile(validation.mem_schema()["anyOf"][1]["pattern"])


def _refused_mem_total(case: schemathesis.Case, response: Any) -> bool:
    """A lease whose capacity.mem text is one the schema allows, refused for its
    total alone (over 2**53 - 1 bytes: no pattern can bound a product)."""
    capacity = case.body.get("capacity") if isinstance(case.body, dict) else None
    mem = capacity.get("mem") if isinstance(capacity, dict) else None
    try:
        field = response.json()["error"]["field"]
    except (ValueError, KeyError, TypeError):
        return False
    return field == "capacity.mem" and isinstance(mem, str) and bool(_MEM_TEXT.search(mem))


def _channels_full(case: schemathesis.Case, response: Any) -> bool:
    """A channel refused for the count alone (20 per tenant, 1,000 in all: a state
    of the server, not of the request)."""
    try:
        field = response.json()["error"]["field"]
    except (ValueError, KeyError, TypeError):
        return False
    return case.operation.path == "/v1/channels" and field == "channels"


@schemathesis.hook
def filter_failure(
    context: schemathesis.HookContext, failure: Any, case: schemathesis.Case, response: Any
) -> bool:
    if getattr(failure, "code", None) == "ST202" and (
        _refused_mem_total(case, response) or _channels_full(case, response)
    ):
        return False
    # GET /v1/tasks/{task_id} takes a run's task ids, <run>/<task>, and a task may be
    # named "cancel": GET /v1/tasks/<run>/cancel reads that task, so OPTIONS on
    # /v1/tasks/{task_id}/cancel rightly allows GET besides the documented POST
    return not (
        getattr(failure, "code", None) == "ST205"
        and case.operation.path == "/v1/tasks/{task_id}/cancel"
        and getattr(failure, "undocumented_methods", None) == ["GET"]
        and not getattr(failure, "missing_methods", None)
    )
