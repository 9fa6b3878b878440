"""The query parameters the API's routes read, each defined once.

A definition reads and checks its parameter for the route (a 400 naming it
when the value will not do) and describes itself for ``GET
/v1/openapi.json`` (``openapi.py``), so the document states exactly the
ranges, patterns and choices the route enforces.  Empty text is the
parameter left out (``?tenant=`` lists every tenant), and the schemas say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import flask

from redcron.dashboard.api.common import bad
from redcron.model import validation

Json = dict[str, Any]


def _query(name: str, schema: Json, description: str) -> Json:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}  # fmt: skip


@dataclass(frozen=True, slots=True)
class IntParam:
    """A whole number in ``minimum..maximum``, ``default`` when left out."""

    name: str
    default: int
    minimum: int
    maximum: int
    what: str

    def read(self) -> int:
        text = flask.request.args.get(self.name)
        if text is None:
            return self.default
        try:
            value = int(text)
        except ValueError:
            bad(self.name, f"{text!r} is not a whole number")
        if not self.minimum <= value <= self.maximum:
            bad(self.name, f"{value} is out of range {self.minimum}..{self.maximum}")
        return value

    def describe(self) -> Json:
        schema = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum,
                  "default": self.default}  # fmt: skip
        text = f"{self.what}, {self.minimum}..{self.maximum} (default {self.default})"
        return _query(self.name, schema, text)


@dataclass(frozen=True, slots=True)
class NameParam:
    """A tenant (or queue) name, as :func:`validation.name` takes; None when left out."""

    name: str
    what: str

    def read(self) -> str | None:
        text = flask.request.args.get(self.name) or None
        return None if text is None else validation.name(self.name, text)

    def describe(self) -> Json:
        return _query(self.name, validation.name_schema(optional=True), self.what)


@dataclass(frozen=True, slots=True)
class ChoiceParam:
    """One of ``choices``; None when left out."""

    name: str
    choices: tuple[str, ...]
    what: str

    def read(self) -> str | None:
        text = flask.request.args.get(self.name) or None
        if text is not None and text not in self.choices:
            bad(self.name, f"{text!r} is not one of {', '.join(self.choices)}")
        return text

    def describe(self) -> Json:
        return _query(self.name, {"type": "string", "enum": ["", *self.choices]}, self.what)


@dataclass(frozen=True, slots=True)
class TextParam:
    """Any text (an id looked up, a task name matched); None when left out."""

    name: str
    what: str

    def read(self) -> str | None:
        return flask.request.args.get(self.name) or None

    def describe(self) -> Json:
        return _query(self.name, {"type": "string"}, self.what)


@dataclass(frozen=True, slots=True)
class CursorParam:
    """A page's ``cursor``: the ``next_cursor`` of the previous page, passed back as
    it is.  It names the last entry shown, in readable parts joined by ``:``
    (``parts``: one regular expression each; only the last may hold a ``:``), so
    the document states its format exactly as a pattern: a cursor that matches
    is a position in the list (the page starts after it, whether or not the
    entry still exists: entries added or removed meanwhile shift nothing), any
    other text is a 400 naming ``cursor``.  A cursor only positions: what a
    token may see is decided without it.
    """

    kind: str
    parts: tuple[str, ...]
    #: what the parts are, for the description (``tenant:name``)
    shape: str

    name = "cursor"

    @property
    def regex(self) -> str:
        return ":".join(f"({p})" for p in self.parts)

    def read(self) -> tuple[str, ...] | None:
        text = flask.request.args.get(self.name)
        if not text:
            return None
        found = re.fullmatch(self.regex, text)
        if found is None:
            bad(self.name, f"not a cursor of this list ({self.shape}): pass next_cursor as it is")
        return found.groups()

    def encode(self, *values: object) -> str:
        """The cursor naming an entry whose key is ``values``."""
        return ":".join(str(v) for v in values)

    def describe(self) -> Json:
        return _query(
            self.name,
            {"type": "string", "pattern": f"^(?:{self.regex})?$"},
            f"The next_cursor of the previous page, passed back as it is ({self.shape}: the "
            "last entry shown; empty: the first page)",
        )


NAME_PART = validation._NAME.pattern
#: a millisecond time (below 2**53) and an entry id of a Redis stream
MS = "[0-9]{1,16}"
ENTRY_ID = "[0-9]{1,20}-[0-9]{1,20}"


#: list replies: the page size when a request names none, and the most it may ask
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
LIMIT = IntParam("limit", DEFAULT_LIMIT, 1, MAX_LIMIT, "Entries per page")
DLQ_LIMIT = IntParam("limit", 100, 1, 1000, "Entries per page")
TENANT = NameParam("tenant", "Only this tenant's entries (a tenant token: its own anyway)")


def body_schema(properties: Json, required: tuple[str, ...] = ()) -> Json:
    """A request body's schema: a JSON object of ``properties`` and no other field
    (every route refuses unknown fields with a 400 naming the first)."""
    out: Json = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


#: the body of the routes that take none but read one if sent (cancel, retry, ...)
EMPTY_BODY = body_schema({})
