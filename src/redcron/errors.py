"""The redcron exception tree, and the map from Lua error codes to it.

Scripts fail with ``{err = "CODE message"}``; :func:`from_script_error` turns
that into the matching exception so callers never parse strings.
"""

from __future__ import annotations

import math


class RedcronError(Exception):
    """Base class of every error redcron raises."""


class ConfigError(RedcronError):
    """Bad settings, or a Redis server we refuse to run on."""


class BrokerError(RedcronError):
    """Talking to Redis failed."""


class ConnectionLost(BrokerError):
    """The Redis connection dropped; callers may retry."""


class RedisUnavailable(ConnectionLost):
    """Redis cannot be reached (down, wrong address, timed out), or cannot serve
    the call now (a server-state reply: ``CLUSTERDOWN``, ``TRYAGAIN``,
    ``LOADING``, ``READONLY``...); the call did nothing and may be sent again
    later.  The message names the URL (without its password) and the fix, or
    the reply.  HTTP 503 with ``Retry-After``."""

    #: the server-state reply's code (``"CLUSTERDOWN"``...), None: not reached
    reply_code: str | None = None
    #: the shard whose master failed the call, where the caller knew it
    shard: int | None = None


class NotReplicated(BrokerError):
    """``durability="strict"``: the master did the write, but no replica (not
    as many as asked) confirmed it in time.  It may be lost if the master fails
    now.  Workers and beats retry; an enqueue or a trigger that raises it was
    written on the master, so sending it again may run the work twice: look
    up :attr:`ids` instead (docs/api.md, "Not replicated").  HTTP 202 with
    ``replicated: false``."""

    #: the replies of a pipeline whose WAIT fell short (the writes did happen)
    results: list[object] | None = None
    #: an enqueue's task ids (queued on the master; a row that folded into an
    #: existing task, unique key or debounce: that task's id), in row order
    task_ids: list[str] | None = None
    #: a trigger's run id (created on the master)
    run_id: str | None = None

    @property
    def ids(self) -> list[str]:
        """The ids of what was written unconfirmed (tasks, or a run); [] when the
        caller already holds them (a cancel, a replay, a job put...)."""
        return [*(self.task_ids or []), *([self.run_id] if self.run_id else [])]


class ScriptError(BrokerError):
    """A Lua script failed in a way that is a bug, not a user error."""


class NotFound(RedcronError):
    """The task, job, run or DLQ entry does not exist (HTTP 404)."""


class Conflict(RedcronError):
    """The object is not in a state that allows the operation (HTTP 409)."""


class LeaseLost(RedcronError):
    """The lease token is stale: the instance was reassigned or ended."""


class ShardLeaseLost(LeaseLost):
    """A beat's shard lease was taken over: its fencing epoch is not the owner's,
    so ``fire`` refused to write (Lua code ``STALE``)."""


class Rejected(RedcronError):
    """Input refused: validation failure or quota (HTTP 400/429)."""


class ValidationError(Rejected, ValueError):
    """A field failed validation; the message names the field and the fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class QuotaExceeded(Rejected):
    """Admission control refused the submission (HTTP 429)."""


class Forbidden(Rejected):
    """The tenant lacks a grant the submission needs, e.g. ``allow_commands`` for
    command and container tasks (HTTP 403); the message names the setting and
    the admin command that grants it."""


class TaskFailed(RedcronError):
    """A task ended without success; carries the remote error text."""

    def __init__(self, task_id: str, state: str, error: str | None) -> None:
        super().__init__(f"task {task_id} ended {state}: {error or '(no error recorded)'}")
        self.task_id = task_id
        self.state = state
        self.error = error


class TaskTimeout(RedcronError, TimeoutError):
    """Waiting for a result took longer than the caller allowed."""


class Retry(Exception):
    """Raised by task code to ask for a retry, optionally after ``delay`` seconds."""

    def __init__(self, message: str = "retry requested", delay: float | None = None) -> None:
        super().__init__(message)
        if delay is not None:
            _check_delay(delay)
        self.delay = delay


#: the longest ``Retry`` delay: ``model.validation.MAX_SECONDS`` (100 years),
#: repeated so that this module stays a leaf (DESIGN §2: the model imports
#: errors, never the reverse); tests/unit/test_validation.py keeps the two equal
_MAX_DELAY_S = 100 * 365 * 86_400


def _check_delay(value: object) -> None:
    """``model.validation.seconds(value, "delay")``, same verdict and message: a
    finite number of seconds (not a bool, not NaN, not an infinity), 0..100 years."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        try:
            ok = math.isfinite(value)  # type: ignore[arg-type]
        except OverflowError:  # an int too large for a float
            ok = False
    if ok and not 0 <= value <= _MAX_DELAY_S:  # type: ignore[operator]
        ok = False
    if not ok:
        raise ValidationError(
            "delay",
            f"{value!r} must be a finite number of seconds >= 0 and <= {_MAX_DELAY_S:g}, e.g. 30",
        )


class Permanent(Exception):
    """Raised by task code to fail at once, without retrying."""


#: every code a script returns (``err('CODE', ...)`` in ``lua/``) and its exception;
#: ``tests/lua/test_error_codes.py`` keeps this and the scripts in step
CODES: dict[str, type[RedcronError]] = {
    "NOTFOUND": NotFound,
    "CONFLICT": Conflict,
    "REJECTED": Rejected,
    "QUOTA": QuotaExceeded,
    "FORBIDDEN": Forbidden,
    "STALE": ShardLeaseLost,
    # "INVALID <field> <message>": a ValidationError naming the field
    "INVALID": ValidationError,
}


def from_script_error(text: str) -> RedcronError:
    """Map a script error ``"CODE message"`` to an exception instance."""
    code, _, message = text.strip().partition(" ")
    cls = CODES.get(code)
    if cls is ValidationError:
        field, _, detail = message.partition(" ")
        return ValidationError(field or "job", detail or message)
    if cls is None:
        return ScriptError(text)
    return cls(message or code)
