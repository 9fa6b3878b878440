"""Which exceptions a failed attempt retries: ``retry_on`` and ``permanent_on``
(issue 32 §4; docs/operations.md "Retries and the dead-letter queue").

By default every exception a task raises is retried (while attempts remain)
but ``Permanent``.  A task, or one call of it, may say instead:

- ``retry_on``: these classes are transient (retried); any other exception
  is permanent (dead-lettered at once).  Celery's ``autoretry_for``.
- ``permanent_on``: these classes are permanent; any other is retried.  With
  ``retry_on`` as well it is checked first, so it carves exceptions out of a
  retried base class (Celery's ``dont_autoretry_for``).

:func:`classify` is the rule, on classes, and never raises:

1. ``Permanent`` is permanent and ``Retry`` a retry, whatever the lists say;
2. an exception that is an instance of a ``permanent_on`` class (a subclass
   matches: ``isinstance``) is permanent;
3. then one of a ``retry_on`` class is retried;
4. any other is permanent when ``retry_on`` is given (even empty), else retried.

A timeout is not an exception the task raised (the worker ended the attempt,
or abandoned its thread): it stays retryable, as before, unless
``permanent_on`` names ``TimeoutError`` or a base of it (``OSError``,
``Exception``): :func:`timeout_retryable`.

A call's lists travel by dotted name (``module.QualName``, :func:`name_of`),
never pickled: the instance hash's ``error_classes`` field holds them as JSON
(:meth:`ErrorClasses.wire`), and the worker resolves each name by import
(:func:`resolve`).  A call's rule replaces its task's as a whole: a call
giving only ``_retry_on`` has no ``permanent_on``, whatever the task declared.
"""

from __future__ import annotations

import functools
import json
import logging
import pkgutil
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from redcron.errors import Permanent, Retry, ValidationError

log = logging.getLogger(__name__)

#: classes of exceptions, as a task declares them (resolved)
ExcClasses = tuple[type[BaseException], ...]

#: names one list may hold; the wire text's bound follows from it
MAX_NAMES = 32
MAX_NAME_LEN = 200
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z", re.ASCII)


@dataclass(frozen=True, slots=True)
class ErrorClasses:
    """A call's ``retry_on`` and ``permanent_on`` by dotted name; None: not given."""

    retry_on: tuple[str, ...] | None = None
    permanent_on: tuple[str, ...] | None = None

    def wire(self) -> str:
        """The instance hash's ``error_classes``: compact JSON, a list left out
        when not given (an empty list is given: ``retry_on=()`` retries nothing)."""
        out: dict[str, list[str]] = {}
        if self.retry_on is not None:
            out["retry_on"] = list(self.retry_on)
        if self.permanent_on is not None:
            out["permanent_on"] = list(self.permanent_on)
        return json.dumps(out, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str | bytes | None) -> ErrorClasses | None:
        """The rule an instance hash's ``error_classes`` holds (None: none, or text
        that is not one: a hash edited by hand is read as if the call gave none)."""
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None

        def names(key: str) -> tuple[str, ...] | None:
            got = data.get(key)
            if not isinstance(got, list):
                return None
            return tuple(n for n in got if isinstance(n, str))

        found = cls(names("retry_on"), names("permanent_on"))
        return None if found == cls() else found

    def describe(self) -> str:
        """One line for ``task show``: the lists, and what any other exception does."""
        parts = []
        if self.retry_on is not None:
            parts.append(f"retry on {', '.join(self.retry_on) or '(nothing)'}")
        if self.permanent_on is not None:
            parts.append(f"permanent on {', '.join(self.permanent_on) or '(nothing)'}")
        other = "permanent" if self.retry_on is not None else "retried"
        return "; ".join([*parts, f"any other exception {other}"])


class Verdict(NamedTuple):
    """How a failed attempt's exception is classified."""

    retryable: bool
    #: why, when a list made it permanent (appended to the error's last line, the
    #: one lists show); "" otherwise
    reason: str = ""


def classify(
    exc: BaseException, retry_on: ExcClasses | None, permanent_on: ExcClasses | None
) -> Verdict:
    """Whether ``exc`` is retried under ``retry_on``/``permanent_on`` (module
    docstring: the four steps).  Pure: no import, no I/O."""
    if isinstance(exc, Permanent):
        return Verdict(False)
    if isinstance(exc, Retry):
        return Verdict(True)
    if permanent_on:
        for cls in permanent_on:
            if isinstance(exc, cls):
                return Verdict(False, f"not retried: permanent_on lists {_short(cls)}")
    if retry_on is None:
        return Verdict(True)
    if isinstance(exc, retry_on):
        return Verdict(True)
    if not retry_on:
        return Verdict(False, "not retried: retry_on is empty")
    return Verdict(False, f"not retried: retry_on lists {', '.join(map(_short, retry_on))} only")


def timeout_retryable(permanent_on: ExcClasses | None) -> bool:
    """A timed-out attempt is retried unless ``permanent_on`` names
    ``TimeoutError`` or a base of it; ``retry_on`` does not change it."""
    return not any(issubclass(TimeoutError, cls) for cls in permanent_on or ())


def _short(cls: type) -> str:
    return cls.__qualname__ if cls.__module__ == "builtins" else name_of(cls)


# -- names ------------------------------------------------------------------------


def name_of(cls: type) -> str:
    """``module.QualName``: how a class travels and is shown."""
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve(name: str) -> type[BaseException]:
    """The exception class ``name`` (``module.QualName``; a bare name is a
    builtin's) stands for, importing its module if needed.

    Raises:
        ImportError: its module cannot be imported.
        AttributeError: the module has no such attribute.
        TypeError: it is not an exception class.
    """
    if "." not in name:
        name = f"builtins.{name}"
    try:
        found = pkgutil.resolve_name(name)
    except ValueError as exc:  # not a dotted name at all
        raise ImportError(str(exc)) from exc
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise TypeError(f"{name} is {type(found).__name__}, not an exception class")
    return found


@functools.lru_cache(maxsize=512)
def _resolved(name: str) -> type[BaseException] | str:
    """:func:`resolve` once per name in a worker: the class, or why not (text)."""
    try:
        return resolve(name)
    except Exception as exc:  # an import may fail any way at all
        return f"{type(exc).__name__}: {exc}"


def resolve_all(names: tuple[str, ...] | None, iid: str, missing: list[str]) -> ExcClasses | None:
    """A worker's classes for a call's names: one it cannot resolve matches
    nothing, with a warning naming the task (``iid``) and the reason, and is
    added to ``missing``."""
    if names is None:
        return None
    out = []
    for name in names:
        got = _resolved(name)
        if isinstance(got, str):
            log.warning(
                "task %s: exception class %r of its retry_on/permanent_on cannot be "
                "resolved on this worker (%s); it matches nothing",
                iid,
                name,
                got,
            )
            missing.append(name)
        else:
            out.append(got)
    return tuple(out)


def _items(value: Any, field: str) -> list[Any]:
    if isinstance(value, type | str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, bytes | dict):
        items = list(value)
        if len(items) > MAX_NAMES:
            raise ValidationError(field, f"at most {MAX_NAMES} exception classes")
        return items
    raise ValidationError(
        field,
        f"{value!r} is not an exception class, a dotted name or a tuple of them, "
        "e.g. (ValueError, 'httpx.HTTPError')",
    )


def _not_exception(item: Any, field: str) -> ValidationError:
    return ValidationError(field, f"{item!r} is not an exception class (a BaseException subclass)")


def declared(value: Any, field: str) -> ExcClasses | None:
    """A task's declared list (``@app.task(retry_on=...)``): classes, or dotted
    names resolved now (the declaring process runs the task's code).  None:
    not declared."""
    if value is None:
        return None
    out = []
    for item in _items(value, field):
        if isinstance(item, str):
            canonical(item, field)
            try:
                item = resolve(item)
            except (ImportError, AttributeError, TypeError) as exc:
                raise ValidationError(field, f"{item!r} cannot be resolved: {exc}") from None
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise _not_exception(item, field)
        out.append(item)
    return tuple(out)


def canonical(item: Any, field: str) -> str:
    """One entry of a call's list as its dotted name, checked as far as this
    process can: a class must be importable by its name (not defined inside a
    function, nor in ``__main__``, which is another module on a worker); a name
    must be a dotted identifier, and when its module imports here, name an
    exception class in it.  A name whose module does not import here is taken
    as given: the worker judges it (a warning, and it matches nothing).

    Raises:
        ValidationError: naming ``field`` and what is wrong.
    """
    if isinstance(item, type):
        if not issubclass(item, BaseException):
            raise _not_exception(item, field)
        name = name_of(item)
        try:
            same = resolve(name) is item
        except Exception:
            same = False
        if not same or item.__module__ == "__main__":
            raise ValidationError(
                field,
                f"{item.__qualname__} cannot be found by its name {name!r} on a worker "
                "(defined inside a function, or in the script run as __main__); define "
                "it at the top level of an importable module",
            )
        return name
    if not isinstance(item, str):
        raise _not_exception(item, field)
    if not _NAME.match(item) or len(item) > MAX_NAME_LEN:
        raise ValidationError(
            field, f"{item!r} is not a dotted class name such as 'httpx.HTTPError'"
        )
    name = item if "." in item else f"builtins.{item}"
    try:
        resolve(name)
    except ImportError:
        return name  # not importable here: the worker judges it
    except (AttributeError, TypeError) as exc:
        raise ValidationError(field, f"{item!r}: {exc}") from None
    return name


def for_call(retry_on: Any, permanent_on: Any, prefix: str = "_") -> ErrorClasses | None:
    """A call's rule from its ``_retry_on``/``_permanent_on`` (None: not given);
    None when it gives neither (its task's rule applies)."""
    if retry_on is None and permanent_on is None:
        return None

    def names(value: Any, field: str) -> tuple[str, ...] | None:
        if value is None:
            return None
        return tuple(canonical(item, field) for item in _items(value, field))

    return ErrorClasses(
        names(retry_on, f"{prefix}retry_on"), names(permanent_on, f"{prefix}permanent_on")
    )


def of_task(retry_on: ExcClasses | None, permanent_on: ExcClasses | None) -> ErrorClasses | None:
    """A task's declared lists by name, for showing (None: it declares none)."""
    if retry_on is None and permanent_on is None:
        return None
    return ErrorClasses(
        None if retry_on is None else tuple(map(name_of, retry_on)),
        None if permanent_on is None else tuple(map(name_of, permanent_on)),
    )


class Effective(NamedTuple):
    """The lists an attempt is classified by, and the call's names that could
    not be resolved (they match nothing)."""

    retry_on: ExcClasses | None
    permanent_on: ExcClasses | None
    unresolved: tuple[str, ...] = ()


def effective(
    retry_on: ExcClasses | None, permanent_on: ExcClasses | None, wire: str, iid: str = ""
) -> Effective:
    """The lists an attempt is classified by: its call's (``wire``, the lease's
    ``error_classes``), resolved, if it gave any; else its task's."""
    call = ErrorClasses.parse(wire) if wire else None
    if call is None:
        return Effective(retry_on, permanent_on)
    missing: list[str] = []
    return Effective(
        resolve_all(call.retry_on, iid, missing),
        resolve_all(call.permanent_on, iid, missing),
        tuple(missing),
    )
