"""Reads over every shard that answer with what the live shards hold
(issue 30 §2.5).  On a Redis Cluster one master down used to take every
cross-tenant view with it (the tenant list, the runs list, a tenant's share of
the last minute's dispatches, the overview page), a 503 for all.

A face opens :func:`partial_reads` around a request; inside it, the readers
that visit every shard (:func:`read_shards`) leave out a shard whose master
does not answer (unreachable, ``CLUSTERDOWN``, a shard the caller gate knows
is down: :meth:`Core.gated`) and note it; :func:`unavailable_shards` names them
for the reply (``unavailable_shards``).  Outside it (the Python API, the CLI,
the processes) such a read raises :class:`RedisUnavailable` as before: a
caller that did not ask for a partial answer never gets one silently.  A read
of one tenant's own shard is never partial: that shard down, it raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import redis

from redcron.engine.connection import is_cluster, raise_unreachable
from redcron.engine.core import Core
from redcron.engine.replies import is_server_state
from redcron.engine.retry import is_unavailable

T = TypeVar("T")

_UNAVAILABLE: ContextVar[set[int] | None] = ContextVar("redcron_unavailable_shards", default=None)
#: the channels whose own keys (a slot each, ``{c<id>}``) did not answer, beside
#: the shards: set with them by :func:`begin_partial_reads`
_CHANNELS: ContextVar[set[str] | None] = ContextVar("redcron_unavailable_channels", default=None)


@contextmanager
def partial_reads() -> Iterator[set[int]]:
    """Within: cross-shard reads leave out the shards that do not answer, named in
    the set yielded (and by :func:`unavailable_shards`)."""
    noted: set[int] = set()
    token = _UNAVAILABLE.set(noted)
    try:
        yield noted
    finally:
        _UNAVAILABLE.reset(token)


def begin_partial_reads() -> Any:
    """:func:`partial_reads` for a face whose start and end are two hooks (a Flask
    request): returns the token to pass to :func:`end_partial_reads`."""
    return _UNAVAILABLE.set(set()), _CHANNELS.set(set())


def end_partial_reads(token: Any) -> None:
    shards, channels = token
    _CHANNELS.reset(channels)
    _UNAVAILABLE.reset(shards)


def unavailable_channels() -> list[str]:
    """The channels left out so far in the current request (sorted)."""
    return sorted(_CHANNELS.get() or ())


def may_leave_out_channels(core: Core, exc: BaseException) -> bool:
    """Is ``exc`` a channel read's that a request's partial reads on a cluster
    answer without (a master that does not answer)?"""
    return _CHANNELS.get() is not None and is_cluster(core.client) and is_unavailable(exc)


def note_channel_unavailable(core: Core, channel_id: str, exc: BaseException) -> bool:
    """In a request's partial reads, on a cluster: note that ``channel_id``'s keys
    did not answer (``exc``) and return True (leave it out); else False (raise)."""
    noted = _CHANNELS.get()
    if noted is None or not may_leave_out_channels(core, exc):
        return False
    noted.add(channel_id)
    return True


def unavailable_shards() -> list[int]:
    """The shards left out so far in the current :func:`partial_reads` (sorted)."""
    return sorted(_UNAVAILABLE.get() or ())


def _down(reply: Any) -> bool:
    return isinstance(reply, Exception) and (
        is_server_state(reply) or isinstance(reply, redis.ConnectionError | redis.TimeoutError)
    )


def read_shards(
    core: Core, shards: Sequence[int], queue: Callable[[Any, int], None], what: str = "read"
) -> dict[int, list[Any]]:
    """Each of ``shards``' replies to the commands ``queue(pipe, shard)`` adds, in
    one pipeline (one round trip per master).

    In :func:`partial_reads`: a shard the caller gate knows is down is not asked,
    and a shard whose replies say its master does not answer is left out of the
    result; both are noted (and the latter closes the gate).  Outside, either
    raises.  Any other error reply is raised, as ``pipe.execute()`` would.
    """
    noted = _UNAVAILABLE.get()
    wanted = shards_to_read(core, shards)
    pipe = core.client.pipeline(transaction=False)
    counts: list[int] = []
    for shard in wanted:
        before = len(pipe.command_stack)
        queue(pipe, shard)
        counts.append(len(pipe.command_stack) - before)
    if not wanted:
        return {}
    try:
        replies: list[Any] = pipe.execute(raise_on_error=False)
    except Exception as exc:
        if noted is None or not is_cluster(core.client) or not is_unavailable(exc):
            raise
        if len(wanted) == 1:
            note_unavailable(core, wanted[0], exc, what)
            return {}
        # the pipeline failed as a whole (a node it needed is down): shard by shard
        out: dict[int, list[Any]] = {}
        for shard in wanted:
            try:
                out.update(read_shards(core, [shard], queue, what))
            except Exception as one:
                if not note_unavailable(core, shard, one, what):
                    raise
        return out
    out = {}
    at = 0
    for shard, n in zip(wanted, counts, strict=True):
        mine, at = replies[at : at + n], at + n
        down = next((r for r in mine if _down(r)), None)
        if down is not None:
            if noted is None or not is_cluster(core.client):
                raise_unreachable([down])
                raise down
            noted.add(shard)
            core.gate.failed(shard, down, what, time.monotonic())
            continue
        for reply in mine:
            if isinstance(reply, Exception):
                raise reply
        out[shard] = mine
    return out


def per_shard(
    core: Core, shards: Iterable[int], read: Callable[[int], T], what: str = "read"
) -> dict[int, T]:
    """``read(shard)`` of each of ``shards``, for readers that take several round
    trips per shard.  In :func:`partial_reads` on a cluster, a shard the caller
    gate knows is down is not read, and one whose read fails unavailable is left
    out; both are noted.  Outside, either raises."""
    out: dict[int, T] = {}
    for shard in shards_to_read(core, list(shards)):
        try:
            out[shard] = read(shard)
        except Exception as exc:
            if not note_unavailable(core, shard, exc, what):
                raise
    return out


def note_left_out(shards: Iterable[int]) -> None:
    """In :func:`partial_reads`: name ``shards`` as left out of this answer too (a
    snapshot read earlier, without them, that the answer shows)."""
    noted = _UNAVAILABLE.get()
    if noted is not None:
        noted.update(shards)


def note_unavailable(core: Core, shard: int, exc: BaseException, what: str = "read") -> bool:
    """In :func:`partial_reads`, on a cluster: note that ``shard``'s read failed
    unavailable (``exc``) and return True (leave it out); else False (raise it)."""
    noted = _UNAVAILABLE.get()
    if noted is None or not is_cluster(core.client) or not is_unavailable(exc):
        return False
    noted.add(shard)
    core.gate.failed(shard, exc, what, time.monotonic())
    return True


def shards_to_read(core: Core, shards: Sequence[int]) -> list[int]:
    """Of ``shards``, those to read now: in :func:`partial_reads` on a cluster, a
    shard the caller gate knows is down is left out (and noted)."""
    noted = _UNAVAILABLE.get()
    if noted is None or not is_cluster(core.client):
        return list(shards)
    open_ = set(core.gate.open(list(shards), time.monotonic()))
    noted.update(s for s in shards if s not in open_)
    return [s for s in shards if s in open_]
