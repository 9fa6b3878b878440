"""Do a call's arguments fit a task function?  Checked where the task is known.

A task's arguments travel as msgpack ``[args, kwargs]``; a call that does not
fit the function (an unknown keyword, a missing argument, one too many) can
never succeed, so it must not be retried into the DLQ.  The worker binds the
arguments to the function's signature before calling it (a mismatch is a
permanent failure of the first attempt), and ``App.enqueue``, the job
declarations and the API refuse such a call before anything is written.

The signature is the function's own less the ``ctx`` first parameter a task
may declare (``redcron.context``); it is computed once per task, at
registration (:class:`CallShape`), as binding is on every attempt's path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
#: call shapes a task remembers as binding, at most
_FITS_KEPT = 64


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Why a call does not fit: the field at fault (``args``, ``kwargs.<name>``)
    and Python's own words, prefixed with the function (``add() got an
    unexpected keyword argument 'z'``)."""

    field: str
    message: str


@dataclass(frozen=True, slots=True)
class CallShape:
    """What a task function accepts from a call (its ``ctx`` parameter aside)."""

    name: str
    #: None: the signature cannot be read (some builtins): every call is let through
    signature: inspect.Signature | None
    wants_ctx: bool
    #: the call shapes (positional count, keyword names) seen to bind: a fault
    #: depends on nothing else, and the check is on every attempt's path
    _fits: dict[tuple[int, tuple[Any, ...]], bool] = field(
        default_factory=dict, compare=False, repr=False
    )
    #: the names a run's params may fill, per call shape (:meth:`fillable`)
    _fillable: dict[tuple[int, tuple[Any, ...]], tuple[str, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> CallShape:
        name = getattr(fn, "__name__", None) or type(fn).__name__
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return cls(name, None, False)
        params = list(sig.parameters.values())
        wants_ctx = bool(params) and params[0].name == "ctx"
        if wants_ctx:
            sig = sig.replace(parameters=params[1:])
        return cls(name, sig, wants_ctx)

    def mismatch(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Mismatch | None:
        """None when ``fn(*args, **kwargs)`` binds; else what is wrong.

        Checked as a call checks (positional count, then each keyword, then
        what is missing), so it accepts what calling the function accepts and
        names the fault a call would name first.  Not ``Signature.bind``: on
        Python 3.11 it refuses a positional-only name passed by keyword into
        ``**kwargs``, which a call takes; and the words are fixed here (as
        ``bind`` puts them) so the field and the message always speak of the
        same argument, on every Python version.
        """
        if self.signature is None:
            return None
        shape = (len(args), tuple(kwargs))
        fits = self._fits
        if shape in fits:
            return None
        bad = _first_fault(self.signature, args, kwargs)
        if bad is None:
            if len(fits) < _FITS_KEPT:
                fits[shape] = True
            return None
        return Mismatch(bad[0], f"{self.name}() {bad[1]}")

    def fillable(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[str, ...]:
        """The parameters a run's params may fill in a call of ``args``/``kwargs``:
        those the function declares by name (not positional-only, not ``*args``
        or ``**kwargs``, not ``ctx``) that the call leaves unset.  A task's own
        arguments come first: a param never replaces one (issue 32 §3)."""
        if self.signature is None:
            return ()
        shape = (len(args), tuple(kwargs))
        found = self._fillable.get(shape)
        if found is None:
            params = list(self.signature.parameters.values())
            positional = [p.name for p in params if p.kind in _POSITIONAL]
            taken = {*positional[: len(args)], *kwargs}
            found = tuple(p.name for p in params if p.kind in _BY_NAME and p.name not in taken)
            if len(self._fillable) < _FITS_KEPT:
                self._fillable[shape] = found
        return found


def _first_fault(
    sig: inspect.Signature, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(field, what is wrong) for the first argument that does not fit."""
    params = list(sig.parameters.values())
    kinds = {p.kind for p in params}
    positional = [p.name for p in params if p.kind in _POSITIONAL]
    if inspect.Parameter.VAR_POSITIONAL not in kinds and len(args) > len(positional):
        return "args", "too many positional arguments"
    bound = set(positional[: len(args)])
    by_name = {p.name: p for p in params}
    takes_any = inspect.Parameter.VAR_KEYWORD in kinds
    for key in kwargs:
        p = by_name.get(key)
        if p is not None and p.kind in _BY_NAME:
            if key in bound:
                return f"kwargs.{key}", f"multiple values for argument {key!r}"
            bound.add(key)
        elif takes_any:
            continue  # into **kwargs (a positional-only name too)
        elif p is not None and p.kind == inspect.Parameter.POSITIONAL_ONLY:
            return (
                f"kwargs.{key}",
                f"{key!r} parameter is positional only, but was passed as a keyword",
            )
        else:
            return f"kwargs.{key}", f"got an unexpected keyword argument {key!r}"
    for p in params:
        if p.kind in _VARIADIC or p.default is not p.empty or p.name in bound:
            continue
        where = f"kwargs.{p.name}" if p.kind == inspect.Parameter.KEYWORD_ONLY else "args"
        return where, f"missing a required argument: {p.name!r}"
    return None
