"""What every API route shares: the App, reading the body and the query,
and the one error shape ``{"error": {"code", "message", "field"}}``."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import flask
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from redcron.app import App
from redcron.errors import (
    Conflict,
    Forbidden,
    NotFound,
    NotReplicated,
    QuotaExceeded,
    Rejected,
    ValidationError,
)
from redcron.model.jobs import first_unknown
from redcron.model.serialize import to_json

EXTENSION = "redcron"


class StrictJSON(DefaultJSONProvider):
    """Flask's JSON provider, never writing ``NaN`` or ``Infinity`` (which are no
    JSON): :func:`reply` gives it records through ``to_json``, which spells
    those as strings, so a value that still holds one is a bug, raised here
    rather than sent as text no strict parser reads."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("allow_nan", False)
        return super().dumps(obj, **kwargs)


class ApiError(Exception):
    """An error answer: HTTP status, a stable code, a message and the field at fault."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


def bad(field: str | None, message: str) -> NoReturn:
    raise ApiError(400, "invalid", message, field)


def redcron_app() -> App:
    app: App = flask.current_app.extensions[EXTENSION]
    return app


def reply(obj: Any, status: int = 200) -> flask.Response:
    """A record (or plain data holding records) as JSON, with the shared serializer."""
    response = flask.jsonify(to_json(obj))
    response.status_code = status
    return response


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            bad(key, "given twice in one object")
        out[key] = value
    return out


class _Numbers:
    """json.loads hooks that note the first number that is not finite: ``1e400``
    (Python reads a literal too big for a double as infinity) or the words
    ``NaN``/``Infinity``, which are no JSON at all.  Parsing goes on, so that
    :func:`non_finite_path` can then name where in the body it was."""

    def __init__(self) -> None:
        self.first: str | None = None

    def parse_float(self, text: str) -> float:
        value = float(text)
        if self.first is None and not math.isfinite(value):
            self.first = text
        return value

    def parse_constant(self, word: str) -> float:
        if self.first is None:
            self.first = word
        return float(word)


def non_finite_path(data: Any) -> str | None:
    """Where the first float of ``data`` that is not finite is, in the API's field
    notation (``result``, ``args[0]``, ``capacity.cpu``); None if there is none.
    Iterative: a body may nest as deep as json.loads allows."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path
        if isinstance(value, dict):
            items = [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))  # depth first, in document order
    return None


def body(required: bool = True) -> dict[str, Any]:
    """The request body as a JSON object.

    Any content type is read as JSON (curl sends form encoding by default);
    an empty body is ``{}`` unless ``required``.  Bodies over
    ``MAX_CONTENT_LENGTH`` raise 413 from Werkzeug while reading.  Every
    number must be finite: ``1e400``, ``NaN`` or ``Infinity`` anywhere is a
    400 naming its field, since nothing could store or show it as JSON.
    """
    raw = flask.request.get_data(cache=True)
    if not raw.strip():
        if required:
            bad(None, "a JSON object body is required")
        return {}
    numbers = _Numbers()
    try:
        data = json.loads(
            raw,
            object_pairs_hook=_no_duplicates,
            parse_float=numbers.parse_float,
            parse_constant=numbers.parse_constant,
        )
    except UnicodeDecodeError:
        bad(None, "the body is not UTF-8 text")
    except json.JSONDecodeError as exc:
        bad(None, f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    except RecursionError:
        bad(None, "malformed JSON: nested too deeply")
    except ValueError:  # an integer of more digits than Python converts (4300)
        bad(None, "malformed JSON: a number with too many digits")
    if not isinstance(data, dict):
        bad(None, f"the body must be a JSON object, not {type(data).__name__}")
    if numbers.first is not None:
        bad(
            non_finite_path(data) or None,
            f"{numbers.first[:40]} is not a finite number (JSON numbers must fit a double)",
        )
    return data


def only(data: dict[str, Any], known: Iterable[str]) -> None:
    """Refuse a field not in ``known`` (a body schema's ``properties``, or names)."""
    known = set(known)
    unknown = set(data) - known
    if unknown:
        bad(first_unknown(unknown), f"unknown field; known: {', '.join(sorted(known))}")


def error_response(
    status: int, code: str, message: str, field: str | None = None
) -> flask.Response:
    """The API's one error shape, ``{"error": {"code", "message", "field"}}``."""
    response = flask.jsonify({"error": {"code": code, "message": message, "field": field}})
    response.status_code = status
    return response


def _validation_message(exc: ValidationError) -> str:
    text = str(exc)
    head = f"{exc.field}: "
    return text[len(head) :] if text.startswith(head) else text


#: redcron's exceptions (but ValidationError, which names a field) and how a
#: request that raised one is answered: the status, and the API's error code
#: (the pages, ``dashboard/ui``, answer with the same status)
ANSWERS: tuple[tuple[type[Exception], int, str], ...] = (
    (NotFound, 404, "not_found"),
    (Conflict, 409, "conflict"),
    (QuotaExceeded, 429, "quota_exceeded"),
    (Forbidden, 403, "forbidden"),
    (Rejected, 400, "rejected"),
)


def _answer(web: flask.Flask, status: int, code: str) -> Callable[[Exception], flask.Response]:
    def answer(exc: Exception) -> flask.Response:
        response = error_response(status, code, str(exc))
        if status == 429:
            response.headers["Retry-After"] = str(web.config["REDCRON_RETRY_AFTER_S"])
        return response

    return answer


def unconfirmed(exc: NotReplicated, record: dict[str, Any] | None = None) -> flask.Response:
    """202: the write was done on the master, but ``durability="strict"``'s replicas
    did not confirm it in time (a failover under way, a replica behind): the
    route's ``record`` (or the ids written), ``replicated: false`` and why.  A
    client must not send it again (that could run the work twice): it looks the
    ids up once Redis has settled (docs/api.md, "Not replicated")."""
    body: dict[str, Any] = dict(record or {})
    if not body and exc.ids:
        body["ids"] = exc.ids
    body.update({"replicated": False, "message": str(exc)})
    return reply(body, 202)


def register_error_handlers(web: flask.Flask) -> None:
    """Every failure as ``{"error": {...}}``: redcron's exceptions by class,
    Werkzeug's (404 route, 405, 413...) by their status.  A write its replicas
    did not confirm (:class:`NotReplicated`) is no failure: 202
    (:func:`unconfirmed`), on every route that does not answer it itself."""

    @web.errorhandler(ApiError)
    def api_error(exc: ApiError) -> flask.Response:
        return error_response(exc.status, exc.code, exc.message, exc.field)

    @web.errorhandler(ValidationError)
    def validation_error(exc: ValidationError) -> flask.Response:
        return error_response(400, "invalid", _validation_message(exc), exc.field)

    for exc_type, status, code in ANSWERS:
        web.register_error_handler(exc_type, _answer(web, status, code))

    @web.errorhandler(NotReplicated)
    def not_replicated(exc: NotReplicated) -> flask.Response:
        return unconfirmed(exc)

    web.register_error_handler(HTTPException, http_error)


def http_error(exc: HTTPException) -> flask.Response:
    """Werkzeug's errors (404 route, 405, 413...) in the API's error shape."""
    status = exc.code or 500
    code = (exc.name or "error").lower().replace(" ", "_")
    response = error_response(status, code, exc.description or exc.name or "error")
    for key, value in exc.get_headers():
        if key.lower() == "allow":
            response.headers[key] = value
    return response
