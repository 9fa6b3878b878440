"""What a loop that talks to Redis retries, and how long it waits in between.

Workers and beats never die of Redis going away: they catch :data:`TRANSIENT`,
wait a :class:`Backoff` delay and try again.  The exception types live here so
that nothing outside ``broker/`` needs to import ``redis``.
"""

from __future__ import annotations

import logging

import redis

from redcron.errors import BrokerError

#: failures a loop retries: Redis unreachable or erroring, a script refused, a socket error
TRANSIENT: tuple[type[Exception], ...] = (redis.RedisError, BrokerError, OSError)

#: one error reply in the results of a pipeline run with ``raise_on_error=False``
#: (:meth:`Broker.execute`): the call it answers was refused, the others ran
ErrorReply = redis.ResponseError


class Backoff:
    """Doubling delays between retries: ``first`` after a failure, twice the last
    one after each further failure, never more than ``cap``; :meth:`reset` after a
    success starts over.

    Args:
        first: seconds to wait after the first failure.
        cap: the longest wait, seconds.
        logger: where :meth:`failed` logs its warning.
    """

    def __init__(
        self, first: float = 0.1, cap: float = 5.0, logger: logging.Logger | None = None
    ) -> None:
        self.first = first
        self.cap = cap
        self.delay = first
        self.log = logger or logging.getLogger(__name__)

    def failed(self, exc: BaseException, what: str) -> float:
        """Log that ``what`` failed with ``exc``; returns the seconds to wait before the
        next try (and doubles the wait after that one)."""
        delay = self.delay
        self.log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)
        self.delay = min(delay * 2, self.cap)
        return delay

    def reset(self) -> None:
        """The last try succeeded: the next failure waits ``first`` again."""
        self.delay = self.first
