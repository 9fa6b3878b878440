"""retry_on / permanent_on (issue 32 §4): the classification rule on plain
exceptions, the names a call's lists travel as, and their checks. No Redis."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from redcron import App, Permanent, Retry
from redcron.errors import ValidationError
from redcron.model import error_classes as ec
from redcron.model.error_classes import ErrorClasses, classify, timeout_retryable


class Transient(ValueError):
    """Module level: importable by its name, as a worker needs."""


# -- classify: the four steps -----------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "retry_on", "permanent_on", "retryable"),
    [
        # no lists: every exception retries (today's default)
        (KeyError("k"), None, None, True),
        (SystemExit(3), None, None, True),
        # retry_on: listed (and subclasses) retry, the rest is permanent
        (ValueError("v"), (ValueError,), None, True),
        (json.JSONDecodeError("x", "", 0), (ValueError,), None, True),  # a subclass
        (KeyError("k"), (ValueError,), None, False),
        (KeyError("k"), (), None, False),  # given but empty: nothing retries
        # permanent_on: listed (and subclasses) are permanent, the rest retries
        (KeyError("k"), None, (KeyError,), False),
        (KeyError("k"), None, (LookupError,), False),  # a subclass
        (ValueError("v"), None, (KeyError,), True),
        # both: permanent_on carves out of retry_on (Celery's dont_autoretry_for)
        (json.JSONDecodeError("x", "", 0), (ValueError,), (json.JSONDecodeError,), False),
        (ValueError("v"), (ValueError,), (json.JSONDecodeError,), True),
        (KeyError("k"), (ValueError,), (json.JSONDecodeError,), False),
        # Permanent and Retry keep their meaning whatever the lists say
        (Permanent("p"), (Exception,), None, False),
        (Permanent("p"), None, None, False),
        (Retry("r"), None, (Exception,), True),
        (Retry("r"), (), None, True),
    ],
)
def test_classify(exc: BaseException, retry_on: Any, permanent_on: Any, retryable: bool) -> None:
    assert classify(exc, retry_on, permanent_on).retryable is retryable


def test_a_list_that_decides_says_why_and_the_default_says_nothing() -> None:
    assert classify(KeyError("k"), None, None).reason == ""
    assert classify(ValueError("v"), (ValueError,), None).reason == ""
    assert classify(KeyError("k"), (ValueError, Transient), None).reason == (
        f"not retried: retry_on lists ValueError, {__name__}.Transient only"
    )
    assert classify(KeyError("k"), (), None).reason == "not retried: retry_on is empty"
    assert classify(KeyError("k"), None, (LookupError,)).reason == (
        "not retried: permanent_on lists LookupError"
    )


def test_a_timeout_retries_unless_permanent_on_names_timeout_error_or_a_base() -> None:
    assert timeout_retryable(None)
    assert timeout_retryable((KeyError,))
    assert timeout_retryable(())
    assert not timeout_retryable((TimeoutError,))
    assert not timeout_retryable((OSError,))  # TimeoutError is an OSError
    assert not timeout_retryable((Exception,))


# -- the wire ---------------------------------------------------------------------------


def test_wire_round_trip_keeps_given_empty_and_absent_apart() -> None:
    for rule in (
        ErrorClasses(("builtins.ValueError",), None),
        ErrorClasses(None, ("builtins.KeyError", "json.decoder.JSONDecodeError")),
        ErrorClasses((), None),
        ErrorClasses(("a.B",), ()),
    ):
        assert ErrorClasses.parse(rule.wire()) == rule
        assert ErrorClasses.parse(rule.wire().encode()) == rule
    assert ErrorClasses((), None).wire() == '{"retry_on":[]}'


@pytest.mark.parametrize("text", ["", None, "{}", "nope", "[1]", '{"retry_on": "x"}'])
def test_text_that_is_not_a_rule_reads_as_none(text: Any) -> None:
    assert ErrorClasses.parse(text) is None


def test_describe() -> None:
    assert ErrorClasses(("builtins.ValueError", "x.E"), None).describe() == (
        "retry on builtins.ValueError, x.E; any other exception permanent"
    )
    assert ErrorClasses(None, ("builtins.KeyError",)).describe() == (
        "permanent on builtins.KeyError; any other exception retried"
    )
    assert ErrorClasses((), ()).describe() == (
        "retry on (nothing); permanent on (nothing); any other exception permanent"
    )


# -- a call's names, checked where this process can -----------------------------------------


def test_a_call_names_classes_by_module_and_qualname() -> None:
    rule = ec.for_call((ValueError, Transient, "KeyError", "json.JSONDecodeError"), None)
    assert rule == ErrorClasses(
        ("builtins.ValueError", f"{__name__}.Transient", "builtins.KeyError",
         "json.JSONDecodeError"),
        None,
    )  # fmt: skip
    assert ec.for_call(None, LookupError) == ErrorClasses(None, ("builtins.LookupError",))
    assert ec.for_call(None, None) is None
    assert ec.for_call((), None) == ErrorClasses((), None)


def test_a_name_whose_module_does_not_import_here_is_left_to_the_worker() -> None:
    rule = ec.for_call(("no_such_module_for_redcron.Boom",), None)
    assert rule == ErrorClasses(("no_such_module_for_redcron.Boom",), None)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("json.NoSuchError", "has no attribute"),
        ("json.dumps", "not an exception class"),
        ("NoSuchBuiltin", "has no attribute"),
        ("not a name", "not a dotted class name"),
        ("a..b", "not a dotted class name"),
        (int, "not an exception class"),
        (3, "not an exception class"),
        (b"x", "not an exception class"),
        ({"a": 1}, "not an exception class, a dotted name or a tuple"),
        ([ValueError] * (ec.MAX_NAMES + 1), "at most"),
    ],
)
def test_a_call_list_that_cannot_work_is_refused_naming_the_field(value: Any, says: str) -> None:
    with pytest.raises(ValidationError) as exc:
        ec.for_call(value, None)
    assert exc.value.field == "_retry_on"
    assert says in exc.value.message


def test_a_class_no_worker_can_import_by_its_name_is_refused() -> None:
    class Local(Exception):
        pass

    with pytest.raises(ValidationError) as exc:
        ec.for_call(None, (Local,))
    assert exc.value.field == "_permanent_on"
    assert "define it at the top level of an importable module" in exc.value.message
    Main = type("Main", (Exception,), {"__module__": "__main__"})
    with pytest.raises(ValidationError, match="__main__"):
        ec.for_call((Main,), None)


def test_a_declaration_resolves_names_now() -> None:
    assert ec.declared(None, "retry_on") is None
    assert ec.declared(ValueError, "retry_on") == (ValueError,)
    assert ec.declared(("json.JSONDecodeError", KeyError), "retry_on") == (
        json.JSONDecodeError,
        KeyError,
    )
    with pytest.raises(ValidationError, match="cannot be resolved"):
        ec.declared("no_such_module_for_redcron.Boom", "retry_on")
    with pytest.raises(ValidationError, match="not an exception class"):
        ec.declared((int,), "permanent_on")


# -- the worker's side: a call's names resolved, the task's otherwise ---------------------


def test_effective_takes_the_calls_lists_as_a_whole_else_the_tasks() -> None:
    task = ((ValueError,), (KeyError,))
    assert ec.effective(*task, "") == ((ValueError,), (KeyError,), ())
    call = ErrorClasses(None, ("builtins.LookupError",)).wire()
    assert ec.effective(*task, call) == (None, (LookupError,), ())


def test_a_name_the_worker_cannot_resolve_matches_nothing_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = ErrorClasses(("no_such_module_for_redcron.Boom", "builtins.KeyError"), None).wire()
    with caplog.at_level(logging.WARNING, logger="redcron.model.error_classes"):
        rule = ec.effective(None, None, wire, "0-abc")
    assert rule == ((KeyError,), None, ("no_such_module_for_redcron.Boom",))
    assert "task 0-abc" in caplog.text and "no_such_module_for_redcron.Boom" in caplog.text
    assert not classify(ValueError("v"), rule.retry_on, rule.permanent_on).retryable


# -- declared on a task ---------------------------------------------------------------


def test_app_task_keeps_the_declared_classes_and_refuses_bad_ones() -> None:
    app = App("redis://127.0.0.1:1/0")

    @app.task(retry_on=(ValueError, "json.JSONDecodeError"), permanent_on=KeyError)
    def f() -> None:
        pass

    assert f.options.retry_on == (ValueError, json.JSONDecodeError)
    assert f.options.permanent_on == (KeyError,)
    with pytest.raises(ValidationError) as exc:
        app.task(permanent_on=("json.Nope",))
    assert exc.value.field == "permanent_on"
