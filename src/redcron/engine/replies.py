"""Which error replies say "the server cannot serve this now", and what they become.

Redis answers a command it did not run because of its own state (or the
cluster's) with an error reply: ``CLUSTERDOWN`` while a restarted master
rejoins (~2 s) or a slot has no live master, ``TRYAGAIN`` while a slot's keys
move, ``MOVED``/``ASK`` that never settled, ``LOADING`` while a restart reads
its data back, ``MASTERDOWN`` (a replica that lost its master), ``READONLY``
(a demoted master), ``NOREPLICAS`` (``min-replicas-to-write`` unmet), ``BUSY``
(a script ran past ``busy-reply-threshold``).  None of these is a bug or a
refusal of the call: the same call goes through once the server has settled.

:func:`error_of_reply` is the one place that tells them apart from a script's
own error code (``"CODE message"``, :func:`redcron.errors.from_script_error`):
the former become :class:`RedisUnavailable` (HTTP 503 with ``Retry-After``;
workers and beats back off and retry), the latter the exception their code
maps to.  redis-py strips the code off the replies it knows
(``ClusterDownError("The cluster is down")``), so the class is asked first,
then the ``status_code`` redis-py keeps, then the text.
"""

from __future__ import annotations

import redis
import redis.exceptions

from redcron.errors import RedcronError, RedisUnavailable, from_script_error
from redcron.redact import masked_url

#: the reply codes of a server (or cluster) that cannot serve the call now
UNAVAILABLE_CODES: frozenset[str] = frozenset({
    "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "LOADING", "MASTERDOWN", "READONLY",
    "NOREPLICAS", "BUSY",
})  # fmt: skip

#: redis-py's classes for those codes, most specific first (it strips the code
#: from the message of these): MasterDownError is a ClusterDownError, MovedError
#: an AskError
_CLASSES: tuple[tuple[type[Exception], str], ...] = (
    (redis.exceptions.MasterDownError, "MASTERDOWN"),
    (redis.exceptions.ClusterDownError, "CLUSTERDOWN"),
    (redis.exceptions.TryAgainError, "TRYAGAIN"),
    (redis.exceptions.MovedError, "MOVED"),
    (redis.exceptions.AskError, "ASK"),
    (redis.exceptions.BusyLoadingError, "LOADING"),
    (redis.exceptions.ReadOnlyError, "READONLY"),
)


def reply_code(exc: BaseException) -> str:
    """The error code of an error reply (``"CLUSTERDOWN"``, ``"NOTFOUND"``...): from
    redis-py's class, its ``status_code``, or the first word of the text.  A
    ``ClusterError`` "TTL exhausted" (redis-py gave up following ``MOVED``/``ASK``
    and ``TRYAGAIN``) counts as ``TRYAGAIN``."""
    for cls, code in _CLASSES:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, redis.exceptions.ClusterError) and "TTL exhausted" in str(exc):
        return "TRYAGAIN"
    status = getattr(exc, "status_code", None)
    if isinstance(status, str) and status:
        return status
    return str(exc).lstrip().partition(" ")[0]


def is_server_state(exc: BaseException) -> bool:
    """Whether ``exc`` is an error reply of :data:`UNAVAILABLE_CODES`: the call did
    not run, and will once the server or cluster has settled."""
    if not isinstance(exc, redis.RedisError):
        return False
    return reply_code(exc) in UNAVAILABLE_CODES


def server_state_error(exc: BaseException, url: str = "") -> RedisUnavailable:
    """The :class:`RedisUnavailable` for a server-state reply ``exc`` (it names the
    code, the server's words and, given, the URL without its password)."""
    code = reply_code(exc)
    text = str(exc).strip()
    said = text if text.startswith(code) else f"{code} {text}".strip()
    where = f" at {masked_url(url)}" if url else ""
    error = RedisUnavailable(
        f"Redis{where} cannot serve this call now ({said}): a restart, failover or "
        "slot move is under way; nothing was done, try again shortly"
    )
    error.reply_code = code
    return error


def error_of_reply(exc: BaseException, url: str = "") -> RedcronError:
    """The redcron exception for an error reply: :class:`RedisUnavailable` for a
    server-state one (:func:`is_server_state`), else the exception its Lua
    error code maps to (:func:`~redcron.errors.from_script_error`; an unknown
    code is a :class:`~redcron.errors.ScriptError`, a bug)."""
    if is_server_state(exc):
        return server_state_error(exc, url)
    return from_script_error(str(exc))
