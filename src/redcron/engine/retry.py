"""What a loop that talks to Redis retries, and how long it waits in between.

Workers and beats never die of Redis going away: they catch :data:`TRANSIENT`,
wait a :class:`Backoff` delay and try again.  The exception types live here so
that nothing outside ``engine/`` needs to import ``redis``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable

import redis
import redis.exceptions

from redcron.errors import BrokerError, ConnectionLost

#: failures a loop retries: Redis unreachable or erroring, a script refused, a socket error
TRANSIENT: tuple[type[Exception], ...] = (redis.RedisError, BrokerError, OSError)

#: failures that mean Redis cannot serve now but will again: down or unreachable
#: (redcron's :class:`ConnectionLost` and :class:`RedisUnavailable`, redis-py's
#: ``ConnectionError`` and ``TimeoutError``), loading its data after a restart
#: (``BusyLoadingError``, a ``ConnectionError``), or in a failover (``READONLY``
#: from a demoted master, ``CLUSTERDOWN``/``MASTERDOWN``, ``TRYAGAIN``).  A face
#: answers these "try again later" (HTTP 503), never as a bug; see
#: :func:`is_unavailable` for the two ``ConnectionError`` kinds that are not.
UNAVAILABLE: tuple[type[Exception], ...] = (
    ConnectionLost,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.ReadOnlyError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)

#: ``ConnectionError`` kinds where the server answered, and said no: wrong
#: credentials or ACL stay wrong after a wait, so they are no outage
_REFUSED = (redis.AuthenticationError, redis.exceptions.AuthorizationError)


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says Redis cannot serve for now (:data:`UNAVAILABLE`), not
    that a command or the credentials were refused."""
    return isinstance(exc, UNAVAILABLE) and not isinstance(exc, _REFUSED)


#: one error reply in the results of a pipeline run with ``raise_on_error=False``
#: (:meth:`Broker.execute`): the call it answers was refused, the others ran
ErrorReply = redis.ResponseError


class Outage:
    """Whether Redis is failing, as the loops of one process see it, logged once:
    a WARNING at the first failure, an INFO at the first success after it (with
    how long it lasted), and the failures in between at DEBUG only, so a
    10-second outage is two lines, not one per retry of every loop.

    Args:
        logger: where the lines go.
        who: names the process in them (``worker <id>``).
        doing: what the process does meanwhile, for the WARNING line.
    """

    def __init__(
        self,
        logger: logging.Logger | None = None,
        who: str = "",
        doing: str = "retrying with back-off",
    ) -> None:
        self.log = logger or logging.getLogger(__name__)
        self.who = f"{who}: " if who else ""
        self.doing = doing
        self._since: float | None = None
        self._failures = 0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException, what: str) -> None:
        """``what`` failed with ``exc``."""
        with self._lock:
            self._failures += 1
            first = self._since is None
            if first:
                self._since = time.monotonic()
        if first:
            self.log.warning(
                "%s%s failed (%s); %s until Redis answers", self.who, what, exc, self.doing
            )
        else:
            self.log.debug("%s%s failed again (%s)", self.who, what, exc)

    def ok(self) -> None:
        """A call went through: if Redis was failing, it is back."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, failures = self._since, self._failures
            self._since, self._failures = None, 0
        if since is not None:
            self.log.info(
                "%sRedis answers again after %.1fs (%d failed tries)",
                self.who,
                time.monotonic() - since,
                failures,
            )


class Backoff:
    """Doubling delays between retries: ``first`` after a failure, twice the last
    one after each further failure, never more than ``cap``; :meth:`reset` after a
    success starts over.

    Args:
        first: seconds to wait after the first failure.
        cap: the longest wait, seconds.
        logger: where failures are logged (through ``outage``).
        outage: shared by the loops of one process, so that an outage is logged
            once (:class:`Outage`); default: this back-off's own.
    """

    def __init__(
        self,
        first: float = 0.1,
        cap: float = 5.0,
        logger: logging.Logger | None = None,
        outage: Outage | None = None,
    ) -> None:
        self.first = first
        self.cap = cap
        self.delay = first
        self.log = logger or logging.getLogger(__name__)
        self.outage = outage or Outage(self.log)

    def failed(self, exc: BaseException, what: str) -> float:
        """Note that ``what`` failed with ``exc``; returns the seconds to wait before
        the next try (and doubles the wait after that one)."""
        delay = self.delay
        self.outage.failed(exc, what)
        self.delay = min(delay * 2, self.cap)
        return delay

    def reset(self) -> None:
        """The last try succeeded: the next failure waits ``first`` again."""
        self.delay = self.first
        self.outage.ok()


class ShardGate:
    """Which shards a loop should leave alone for now, because their last call
    failed: on a Redis Cluster a master that is down fails only the calls of its
    own shards, and the loop must go on serving the others instead of backing off
    as a whole.  Each shard has its own doubling delay (``first`` .. ``cap``),
    started by :meth:`failed` and cleared by :meth:`ok`; the failures go to
    ``outage`` (one WARNING for the process), and its recovery line is written
    only once no shard is failing any more.  On one server every shard fails
    together, so the loop sees what a :class:`Backoff` gave it: every shard
    closed, the next try after the delay.

    ``siblings(shard)`` names the shards served by the same node (on one
    server, all of them): a failure closes them all, so a master that is down
    costs one failed call per delay, not one per shard it serves.

    Times are ``time.monotonic()`` seconds, passed in (``now``).
    """

    def __init__(
        self,
        first: float = 0.1,
        cap: float = 2.0,
        outage: Outage | None = None,
        siblings: Callable[[int], Iterable[int]] | None = None,
    ) -> None:
        self.first = first
        self.cap = cap
        self.outage = outage or Outage()
        self.siblings = siblings
        #: shard -> (when it may be tried again, the delay after its next failure)
        self._closed: dict[int, tuple[float, float]] = {}
        self._lock = threading.Lock()

    @property
    def failing(self) -> frozenset[int]:
        """The shards whose last call failed."""
        with self._lock:
            return frozenset(self._closed)

    def open(self, shards: list[int], now: float) -> list[int]:
        """Of ``shards`` (in order), those to call now: not failing, or due a retry."""
        with self._lock:
            closed = self._closed
            return [s for s in shards if s not in closed or closed[s][0] <= now]

    def failed(self, shard: int, exc: BaseException, what: str, now: float) -> None:
        """A call of ``what`` on ``shard`` failed with ``exc``: close it, and the
        shards on its node, for its delay."""
        together = {shard}
        if self.siblings is not None:
            # the slot map cannot say (SlotNotCoveredError...): this shard alone
            with contextlib.suppress(Exception):
                together.update(self.siblings(shard))
        with self._lock:
            _at, delay = self._closed.get(shard, (0.0, self.first))
            for s in together:
                self._closed[s] = (now + delay, min(delay * 2, self.cap))
        self.outage.failed(exc, f"{what} on shard {shard}")

    def ok(self, shard: int) -> None:
        """A call on ``shard`` went through; once none is failing, Redis is back."""
        if not self._closed:  # the common case, without the lock
            return
        with self._lock:
            self._closed.pop(shard, None)
            clear = not self._closed
        if clear:
            self.outage.ok()

    def due(self, shard: int, now: float) -> float:
        """Seconds until ``shard`` may be tried again (0: open now)."""
        with self._lock:
            at = self._closed.get(shard, (now, 0.0))[0]
        return max(0.0, at - now)

    def wait(self, now: float) -> float:
        """Seconds until the next failing shard is due a retry (0: none failing)."""
        with self._lock:
            if not self._closed:
                return 0.0
            return max(0.0, min(at for at, _delay in self._closed.values()) - now)
