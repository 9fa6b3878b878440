"""Schemathesis hooks for ``tests/integration/test_openapi_schemathesis.py``
(loaded by ``st run`` through ``SCHEMATHESIS_HOOKS``).

* A lease's long poll (``wait_s`` up to 30 s) is shortened to none: with no
  work queued each poll would last its whole ``wait_s``.
* One refusal the document cannot state is let through (``filter_failure``):
  a memory amount over 2**53 - 1 bytes in text the pattern allows (a channel
  over the count caps is a 409, which schemathesis takes as a state refusal).
"""

from __future__ import annotations

import re
from typing import Any

import schemathesis

from redcron.model import validation


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


@schemathesis.hook
def filter_failure(
    context: schemathesis.HookContext, failure: Any, case: schemathesis.Case, response: Any
) -> bool:
    return not (getattr(failure, "code", None) == "ST202" and _refused_mem_total(case, response))
