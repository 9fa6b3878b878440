"""Binding a call to a task function (issue 16, item 9): what fits, and what does
not, named by field and in Python's own words.  Pure: no Redis."""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from redcron.model.binding import CallShape, Mismatch
from redcron.worker.execute import with_params


def add(x: int, y: int) -> int:
    return x + y


def with_ctx(ctx: Any, a: int, b: int = 2) -> int:
    return a + b


def keyword_only(a: int, *, mode: str) -> str:
    return mode


def flexible(*args: Any, **kwargs: Any) -> None:
    return None


def positional_only(a: int, /) -> int:
    return a


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "want"),
    [
        (add, [1, 2], {}, None),
        (add, [], {"x": 1, "y": 2}, None),
        (add, [1, 2], {"z": 3}, Mismatch(
            "kwargs.z", "add() got an unexpected keyword argument 'z'")),
        (add, [1], {}, Mismatch("args", "add() missing a required argument: 'y'")),
        (add, [1, 2, 3], {}, Mismatch("args", "add() too many positional arguments")),
        (add, [1], {"x": 2}, Mismatch("kwargs.x", "add() multiple values for argument 'x'")),
        # ctx is the worker's to pass: not counted against the call
        (with_ctx, [1], {}, None),
        (with_ctx, [1, 2, 3], {}, Mismatch("args", "with_ctx() too many positional arguments")),
        (with_ctx, [], {"ctx": 1, "a": 1}, Mismatch(
            "kwargs.ctx", "with_ctx() got an unexpected keyword argument 'ctx'")),
        (keyword_only, [1], {}, Mismatch(
            "kwargs.mode", "keyword_only() missing a required argument: 'mode'")),
        (keyword_only, [1], {"mode": "x"}, None),
        (flexible, [1, 2], {"anything": 3}, None),
        (positional_only, [1], {}, None),
    ],
)  # fmt: skip
def test_a_call_fits_or_is_named(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], want: Mismatch | None
) -> None:
    assert CallShape.of(fn).mismatch(args, kwargs) == want


def test_a_positional_only_parameter_given_by_name_is_named() -> None:
    bad = CallShape.of(positional_only).mismatch([], {"a": 1})
    assert bad is not None and bad.field == "kwargs.a"
    assert bad.message.startswith("positional_only() ") and "'a'" in bad.message


def test_the_ctx_convention_is_read_from_the_first_parameter() -> None:
    assert CallShape.of(with_ctx).wants_ctx
    assert not CallShape.of(add).wants_ctx
    assert not CallShape.of(keyword_only).wants_ctx


def test_a_wrapped_function_is_bound_by_the_signature_it_wraps() -> None:
    @functools.wraps(add)
    def logged(*args: Any, **kwargs: Any) -> int:
        return add(*args, **kwargs)

    assert CallShape.of(logged).mismatch([1], {"z": 1}) is not None


def test_a_callable_without_a_readable_signature_lets_every_call_through() -> None:
    class Opaque:
        @property
        def __signature__(self) -> Any:
            raise ValueError("no signature")

        def __call__(self, *args: Any) -> None:
            return None

    shape = CallShape.of(Opaque())
    assert shape.signature is None
    assert shape.mismatch([1, 2, 3], {"z": 1}) is None


def everything(
    a: int, b: int = 1, /, c: int = 2, *rest: int, d: int, e: int = 3, **more: int
) -> None:
    return None


def two_kinds(a: int, /, b: int, *, c: int = 0) -> None:
    return None


@pytest.mark.parametrize(
    "fn", [add, keyword_only, flexible, positional_only, everything, two_kinds]
)
def test_it_accepts_exactly_what_python_binds(fn: Callable[..., Any]) -> None:
    """Every call of up to four positional arguments and any keywords of a small
    alphabet: refused exactly when calling the function raises TypeError (the
    oracle is the call itself: ``inspect.Signature.bind`` of Python 3.11 refuses
    a positional-only name passed by keyword into ``**kwargs``, which a call takes)."""
    sig = inspect.signature(fn)
    shape = CallShape.of(fn)
    names = ["a", "b", "c", "d", "e", "x", "y", "more", "rest"]
    for n in range(5):
        for k in range(3):
            for keys in itertools.combinations(names, k):
                args, kwargs = list(range(n)), dict.fromkeys(keys, 0)
                try:
                    fn(*args, **kwargs)
                    fits = True
                except TypeError:
                    fits = False
                bad = shape.mismatch(args, kwargs)
                assert (bad is None) == fits, (fn.__name__, args, kwargs, bad)
                if bad is not None:
                    named = bad.field.removeprefix("kwargs.")
                    assert bad.field == "args" or named in kwargs or named in sig.parameters


def test_a_shape_that_bound_is_remembered_and_a_fault_still_named() -> None:
    shape = CallShape.of(add)
    assert shape.mismatch([1, 2], {}) is None
    assert shape.mismatch([3, 4], {}) is None  # the same shape: not checked again
    assert shape.mismatch([1], {"y": 2}) is None
    bad = shape.mismatch([1], {"z": 2})
    assert bad is not None and bad.field == "kwargs.z"
    bad = shape.mismatch([1, 2, 3], {})
    assert bad is not None and bad.field == "args"


# -- a run's params as keyword arguments (issue 32 §3) ----------------------------------


def report(ctx: Any, day: str | None = None, /, *rest: Any, n: int = 1, **more: Any) -> None:
    return None


def daily(ctx: Any, day: str | None = None, n: int = 1, *, label: str = "") -> None:
    return None


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "want"),
    [
        # declared by name, left unset by the call: ctx never, in order
        (daily, [], {}, ("day", "n", "label")),
        (daily, ["mon"], {}, ("n", "label")),  # set by position: the task's own
        (daily, [], {"n": 2}, ("day", "label")),  # set by name: the task's own
        (daily, ["mon", 2], {"label": "x"}, ()),
        # positional-only, *args and **kwargs take no param by name
        (report, [], {}, ("n",)),
        (add, [1, 2], {}, ()),
        (flexible, [], {}, ()),
    ],
)
def test_the_parameters_a_run_param_may_fill(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], want: tuple[str, ...]
) -> None:
    shape = CallShape.of(fn)
    assert shape.fillable(args, kwargs) == want
    assert shape.fillable(args, kwargs) == want  # remembered per call shape
    assert CallShape.of(len).fillable([], {}) == ()  # no signature: nothing to fill


def test_params_fill_only_the_names_given_and_only_from_an_object() -> None:
    assert with_params(("day", "n"), {"x": 1}, {"day": "mon", "other": 2}) == {
        "x": 1,
        "day": "mon",
    }
    kwargs = {"x": 1}
    assert with_params(("day",), kwargs, {}) is kwargs
    assert with_params(("day",), kwargs, [1, 2]) is kwargs  # type: ignore[arg-type]
