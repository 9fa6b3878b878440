"""What travels along a run's DAG edges (issue 32 §1): each upstream task's
result, handed to the tasks downstream of it with the run's params.

A task of a run receives its inputs (:class:`RunInputs`) read in one call
(``inputs.lua``): the run's ``params`` and, for each task it depends on, that
task's result, decoded from msgpack.  A result is bounded in size
(``Settings.max_result_bytes``, :func:`result_too_large`): a bigger one fails
the attempt that produced it, permanently, rather than being stored (every
downstream task would read it on every attempt) or cut short.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from redcron import serde
from redcron.model.jobs import MAP_MAX_LIMIT, MAP_PARAMS
from redcron.model.serialize import plain
from redcron.serde import text as _s

#: the setting that bounds a result, as the error names it
RESULT_SETTING = "max_result_bytes (REDCRON_MAX_RESULT_BYTES)"


@dataclass(frozen=True, slots=True)
class RunInputs:
    """What one task of a run receives from its run.

    Attributes:
        params: the params the run was triggered with (``{}``: none, or not
            a JSON object).
        upstream: each upstream task's name (its name in the job's DAG) and
            result, in the order of the task's ``depends_on``; an upstream
            whose record holds no result (gone with its run's retention) is
            left out.  A mapped upstream gives the list of its instances'
            results; an instance of a mapped task gets its own element of
            the list it is mapped over (of a param: in ``params``).
    """

    params: dict[str, Any] = field(default_factory=dict)
    upstream: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, row: Sequence[Any]) -> RunInputs:
        """One row of ``inputs.lua``'s reply: ``[params, name, result, ...]``."""
        raw = row[0] if row else None
        params = json.loads(raw) if raw else {}
        params = params if isinstance(params, dict) else {}
        upstream: dict[str, Any] = {}
        for name, result in zip(row[1::2], row[2::2], strict=True):
            if result is None:
                continue
            key = _s(name)
            value = (  # a mapped upstream: its instances' results, in order
                [None if r is None else serde.loads(r) for r in result]
                if isinstance(result, list)
                else serde.loads(result)
            )
            if key.startswith(MAP_PARAMS):  # this instance's element of a param
                params = {**params, key[len(MAP_PARAMS) :]: value}
            else:
                upstream[key] = value
        return cls(params, upstream)

    def fill(self, names: Sequence[str], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` and, for each of ``names`` (the parameters the call leaves
        unset: ``CallShape.fillable``), the upstream result of that name, else
        the param of that name.  A call's own arguments come first, then the
        upstream results, then the params: a value computed in the run for this
        task is more specific than one given to the whole run."""
        filled = {
            n: self.upstream[n] if n in self.upstream else self.params[n]
            for n in names
            if n in self.upstream or n in self.params
        }
        return {**kwargs, **filled} if filled else kwargs


def result_too_large(size: int, limit: int) -> str | None:
    """Why a result of ``size`` bytes (msgpack) cannot be stored (None: it can)."""
    if size <= limit:
        return None
    return (
        f"result too large: {size:,} bytes of msgpack, over the limit of {limit:,} "
        f"bytes ({RESULT_SETTING}); store big data elsewhere and return a reference to it"
    )


def upstream_json(upstream: Mapping[str, Any]) -> str:
    """The upstream results as strict JSON text, for a command task: as the
    API shows results (``serialize.plain``: bytes as text, a float that is not
    finite as ``"Infinity"``...)."""
    return json.dumps(plain(dict(upstream)), ensure_ascii=False, allow_nan=False)


def map_items(value: Any, over: str, limit: int) -> list[Any] | str:
    """The elements a mapped task makes one instance each of, from ``value``
    (the result of the upstream ``over`` names, or its param), or why it
    cannot be mapped (a sentence the task's error shows)."""
    source = f"param {over[len(MAP_PARAMS) :]!r}" if over.startswith(MAP_PARAMS) else repr(over)
    if not isinstance(value, list | tuple):
        return (
            f"map_over {source} gave {type(value).__name__}, not a list: a mapped task "
            "makes one instance per element of a list"
        )
    if len(value) > limit:
        return (
            f"map_over {source} gave {len(value):,} elements, over the task's map_max of "
            f"{limit:,}: raise map_max (at most {MAP_MAX_LIMIT:,}) or map over fewer "
            "(batch the elements)"
        )
    return list(value)
