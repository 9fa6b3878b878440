"""The broker's Redis client: a bad URL and an unreachable server become redcron
errors that name the URL (without its password) and the fix, not redis-py's
bare ``ValueError`` or ``ConnectionError`` from deep inside a call."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, cast
from urllib.parse import urlencode

import redis
import redis.backoff
import redis.client
import redis.cluster
import redis.connection
import redis.crc
import redis.retry
import redis.sentinel

from redcron.engine.replies import is_server_state, server_state_error
from redcron.errors import ConfigError, ConnectionLost, RedisUnavailable
from redcron.keys import glob_escape
from redcron.redact import masked_url
from redcron.serde import text as _s
from redcron.urls import (
    SENTINEL_SCHEME,
    ClusterURL,
    SentinelURL,
    is_cluster_url,
    parse_cluster_url,
    parse_sentinel_url,
)

#: what a user can do about an unreachable Redis
FIX = (
    "is it running? `redcron up` starts one; or point --redis or REDCRON_REDIS_URL "
    "(App(redis_url=...) in Python) at yours"
)

#: failures to reach the server; AuthenticationError is a ConnectionError too,
#: but the server was reached and said no: that one keeps its own type
_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)


def unavailable(url: str, exc: BaseException) -> RedisUnavailable:
    """The error for ``exc`` raised talking to ``url``."""
    return RedisUnavailable(f"cannot reach Redis at {masked_url(url)} ({exc}): {FIX}")


def _reraise(url: str, exc: BaseException) -> None:
    if is_server_state(exc):  # CLUSTERDOWN, LOADING, READONLY...: not run, try again later
        raise server_state_error(exc, url) from exc
    if isinstance(exc, _UNREACHABLE) and not isinstance(exc, redis.AuthenticationError):
        raise unavailable(url, exc) from exc
    if isinstance(exc, redis.ResponseError) and _BAD_DB in str(exc):
        # the SELECT of a new connection: bare, it named neither the URL nor the fix
        raise ConfigError(
            f"redis_url {masked_url(url)!r}: the server has no such database ({exc}); "
            "a server has 16 (0-15) unless its `databases` setting says more"
        ) from None


#: the server's reply to ``SELECT`` of a database it does not have
_BAD_DB = "DB index is out of range"


def _cluster_unreachable(exc: BaseException) -> bool:
    """Whether redis-py's cluster error (not a ``RedisError``, so no loop would
    retry it) says that the nodes cannot be reached: the slot map could not be
    re-read from any node after a connection failed (its cause is that
    ``ConnectionError``), or a slot has no master."""
    # redis-py 8 names the case itself (RedisClusterUnreachableError, when it
    # has one: older ones only chain the ConnectionError)
    named = getattr(redis.exceptions, "RedisClusterUnreachableError", ())
    return isinstance(exc, (redis.exceptions.SlotNotCoveredError, named)) or isinstance(
        exc.__cause__, _UNREACHABLE
    )


class Pipeline(redis.client.Pipeline):
    """A pipeline whose ``execute`` raises :class:`RedisUnavailable`."""

    url = ""

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        try:
            return super().execute(raise_on_error)
        except (*_UNREACHABLE, redis.ResponseError) as exc:
            _reraise(self.url, exc)
            raise


class Client(redis.Redis):
    """``redis.Redis`` whose commands and pipelines raise :class:`RedisUnavailable`
    once redis-py's own retries have given up."""

    url = ""
    #: the sentinels a ``redis+sentinel://`` client asks (closed with it)
    sentinels: redis.sentinel.Sentinel | None = None
    _next_look = 0.0

    def follow_master(self) -> None:
        """A sentinel client: at most every :data:`MASTER_LOOK_S`, ask the sentinels
        where the master is; if it moved, idle connections to the old one are
        closed, and busy ones when they come back to the pool.

        redis-py asks only when it opens a connection, so a steady pool would keep
        writing to a demoted master until it turns read-only (after a forced
        failover, up to the sentinels' 10-second INFO period): writes it takes
        then are lost when it resyncs from the new master.
        """
        if self.sentinels is None:
            return
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + MASTER_LOOK_S
        # no sentinel answers: the command's own connection attempt will say so
        with contextlib.suppress(redis.RedisError):
            self.connection_pool.get_master_address()  # type: ignore[attr-defined]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.follow_master()
        try:
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except (*_UNREACHABLE, redis.ResponseError) as exc:
            _reraise(self.url, exc)
            raise

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        self.follow_master()
        pipe = Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.url = self.url
        return pipe

    def close(self) -> None:
        super().close()
        if self.sentinels is not None:
            # each sentinel's client (``Sentinel.close`` does the same, from redis-py 8.1 only)
            for sentinel in self.sentinels.sentinels:
                sentinel.close()


def connect(url: str, **kwargs: Any) -> redis.Redis:
    """A client for ``url`` (no I/O yet: redis-py connects on first use).

    A ``redis+sentinel://`` URL gives a client of the master the sentinels name
    (redis-py's :meth:`~redis.sentinel.Sentinel.master_for`): each new
    connection asks them where the master is, and a connection to a master
    demoted by a failover is dropped (its READONLY reply becomes a
    ``ConnectionError``), so the caller's retry lands on the new master.

    A ``redis+cluster://`` URL gives a :class:`ClusterClient` (redis-py's
    :class:`~redis.cluster.RedisCluster`): each command goes to the master of
    its key's slot, ``MOVED``/``ASK`` are followed.  Unlike the others it reads
    the slot map here, so an unreachable cluster raises
    :class:`RedisUnavailable` at once.  It is typed here as a
    ``redis.Redis`` because the broker uses only the commands both share;
    what differs (pipelines of several slots, blocking pops, scans, the
    server's settings) is handled where it is used, asking :func:`is_cluster`.

    Raises:
        ConfigError: redis-py refuses the URL.
        RedisUnavailable: no node of a cluster URL answered.
    """
    try:
        if url.startswith(f"{SENTINEL_SCHEME}://"):
            client = _sentinel_master(parse_sentinel_url(url), kwargs)
        elif is_cluster_url(url):
            try:
                cluster = _cluster(parse_cluster_url(url), kwargs)
            except redis.exceptions.RedisClusterException as exc:
                # RedisCluster asks a startup node for the slot map at once: no
                # node answered (redis-py's message names each one tried)
                raise unavailable(url, exc) from exc
            cluster.url = url
            return cast(redis.Redis, cluster)
        else:
            client = cast(Client, Client.from_url(url, **kwargs))
    except ValueError as exc:
        raise ConfigError(f"redis_url {masked_url(url)!r}: {exc}") from None
    client.url = url
    return client


#: how long a cluster command that cannot run yet (``TRYAGAIN``: a multi-key call
#: whose keys are split between two nodes while their slot moves, or redirections
#: that never settled) is retried, with a backoff, after redis-py's own ~0.4 s
TRYAGAIN_BUDGET_S = 10.0
_TRYAGAIN_FIRST_S = 0.05
_TRYAGAIN_MAX_S = 0.5


def _not_run_yet(exc: BaseException) -> bool:
    """A cluster reply that says the command did nothing and may be sent again:
    ``TRYAGAIN``, or redis-py's "TTL exhausted" after 16 redirections/TRYAGAINs."""
    if isinstance(exc, redis.exceptions.TryAgainError):
        return True
    return isinstance(exc, redis.exceptions.ClusterError) and "TTL exhausted" in str(exc)


def retry_not_run(call: Callable[[], Any], budget_s: float = TRYAGAIN_BUDGET_S) -> Any:
    """``call()``, again with a doubling pause (50 ms to 0.5 s) while it raises a
    :func:`_not_run_yet` error, for at most ``budget_s``; then that error.

    redis-py follows ``MOVED``/``ASK`` and retries ``TRYAGAIN`` 16 times within
    ~0.4 s; a slot whose keys are being moved can take longer than that.
    """
    deadline = time.monotonic() + budget_s
    pause = _TRYAGAIN_FIRST_S
    while True:
        try:
            return call()
        except (redis.exceptions.TryAgainError, redis.exceptions.ClusterError) as exc:
            if not _not_run_yet(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, _TRYAGAIN_MAX_S)


def node_of_key(client: Any, key: str) -> Any:
    """The master of ``key``'s slot, as a cluster client's slot map has it now."""
    return client.nodes_manager.get_node_from_slot(client.keyslot(key), False)


def key_slot(key: str) -> int:
    """The Redis Cluster slot of ``key`` (CRC16 of its hash tag, as ``CLUSTER
    KEYSLOT`` computes it)."""
    return int(redis.crc.key_slot(key.encode()))


def is_cluster(client: Any) -> bool:
    """Whether ``client`` (a client or a pipeline) talks to a Redis Cluster."""
    return isinstance(client, redis.cluster.RedisCluster)


class ClusterPipeline(redis.cluster.ClusterPipeline):
    """redis-py's cluster pipeline (commands grouped per node, one round trip
    each, written to every node before any is read) as the broker uses a
    pipeline:

    - ``command_stack`` lists ``(args, options)`` as :class:`redis.client.Pipeline`
      does, so a ``NOSCRIPT`` reply is re-run the same way on both;
    - ``evalsha`` queues a script call routed by its keys (redis-py blocks the
      method on cluster pipelines, not the command);
    - ``transaction=True`` is a ``MULTI`` when every queued key maps to one slot
      (a shard's keys), else the commands go as a plain pipeline: a cluster
      cannot run one transaction over several slots.  The broker's only such
      pipelines write a record and its index (a worker registration, an API
      token), and every reader of those indexes already skips an entry whose
      record is gone;
    - a command that redis-py sends again on its own after a ``MOVED``, ``ASK``
      or ``TRYAGAIN`` reply is retried past redis-py's ~0.4 s with
      :func:`retry_not_run`, and :attr:`redirected` says it happened (it ran on
      another connection than the pipeline's: a ``WAIT`` queued in the pipeline
      does not cover it);
    - ``execute`` raises :class:`RedisUnavailable` once the retries gave up.
    """

    url = ""
    atomic = False
    factory: Any = None
    #: the last execute sent a command again on its own (see above)
    redirected = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        again = self.parent_execute_command

        def resend(*cargs: Any, **options: Any) -> Any:
            self.redirected = True
            return retry_not_run(lambda: again(*cargs, **options))  # type: ignore[no-untyped-call]

        self.parent_execute_command = resend

    @property
    def command_stack(self) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(c.args, c.options) for c in self._execution_strategy.command_queue]

    @command_stack.setter
    def command_stack(self, _value: Any) -> None:
        """redis-py's ``__init__`` sets a list it never uses again: ignored."""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)  # type: ignore[no-untyped-call]

    def _get_command_keys(self, *args: Any) -> Any:
        """The keys of a queued command: a script call's from its own arguments
        (``EVALSHA sha numkeys key...``).  redis-py 8.1 asks the client's default
        node (``COMMAND GETKEYS``, a round trip per script call) because their
        keys are "movable"; with that node down, every pipeline failed."""
        if args and str(args[0]).upper() in ("EVALSHA", "EVAL"):
            return list(args[3 : 3 + int(args[2])])
        return super()._get_command_keys(*args)  # type: ignore[no-untyped-call]

    def _slots(self) -> set[int]:
        slots: set[int] = set()
        for args, _options in self.command_stack:
            try:
                slots.add(int(self.determine_slot(*args) or 0))
            except redis.RedisError:
                slots.add(-1)  # a command of no key (WAIT): never inside MULTI
        return slots

    def _transaction(self, raise_on_error: bool) -> list[Any]:
        """The queued commands as one ``MULTI``/``EXEC`` on their slot's master.

        redis-py 8.1's cluster transaction parses the replies with the cluster's
        own callbacks only, not the commands' (an ``XRANGE`` comes back as raw
        nested lists, not ``(id, fields)``): the node client's are applied here,
        as :class:`redis.client.Pipeline` does inside ``EXEC``.
        """
        stack = self.command_stack
        tx = self.factory(True)
        for args, options in stack:
            tx.execute_command(*args, **options)
        self.reset()  # type: ignore[no-untyped-call]
        node = self.nodes_manager.get_node_from_slot(self._slot_of(stack), False)
        callbacks = self.get_redis_connection(node).response_callbacks
        replies = list(tx.execute(raise_on_error))
        for i, ((args, options), reply) in enumerate(zip(stack, replies, strict=True)):
            name = args[0]
            if isinstance(reply, Exception) or name in self.cluster_response_callbacks:
                continue
            if name in callbacks:
                options = {k: v for k, v in options.items() if k != "keys"}
                replies[i] = callbacks[name](reply, **options)
        return replies

    def _slot_of(self, stack: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> int:
        return int(self.determine_slot(*stack[0][0]) or 0)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        self.redirected = False
        try:
            if self.atomic and len(self._slots()) == 1:
                return self._transaction(raise_on_error)
            return super().execute(raise_on_error)
        except _UNREACHABLE as exc:
            # a node is down (a failover under way): read the slot map again now,
            # as redis-py does after a single command's, so that the caller's
            # retry goes to the promoted replica (a pipeline does not, for a
            # command sent to a named node: a strict write's WAIT)
            # (no node answering it: redis-py 8 raises RedisClusterUnreachableError,
            # no RedisError; the caller's error below says so all the same)
            with contextlib.suppress(redis.RedisError, redis.exceptions.RedisClusterException):
                self.nodes_manager.initialize()
            self._move_default_node()
            _reraise(self.url, exc)
            raise
        except (redis.ResponseError, redis.exceptions.ClusterError) as exc:
            _reraise(self.url, exc)  # raise_on_error: a CLUSTERDOWN reply, TTL exhausted...
            raise
        except redis.exceptions.RedisClusterException as exc:
            if _cluster_unreachable(exc):
                raise unavailable(self.url, exc) from exc
            raise

    def _move_default_node(self) -> None:
        """After a pipeline failed to reach a node: if the client's default node
        is down, make a master that answers the default.

        redis-py 8.1 asks the default node for the keys of pipelined commands
        whose keys are "movable" (``COMMAND GETKEYS``; script calls are read
        here, :meth:`_get_command_keys`), and replaces a dead default node only
        after a failed single command of no key."""
        node: Any = self.get_default_node()  # type: ignore[no-untyped-call]
        if node is None or _answers(node):
            return
        for other in self.get_primaries():  # type: ignore[no-untyped-call]
            if other.name != node.name and _answers(other):
                self.set_default_node(other)  # type: ignore[no-untyped-call]
                return


def _answers(node: Any) -> bool:
    """Whether a cluster node answers ``PING`` now."""
    client = node.redis_connection
    if client is None:
        return False
    try:
        client.ping()
    except _UNREACHABLE:
        return False
    return True


class ClusterClient(redis.cluster.RedisCluster):
    """``RedisCluster`` whose commands and pipelines raise :class:`RedisUnavailable`
    once redis-py's own retries have given up."""

    url = ""

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """redis-py's, with ``TRYAGAIN`` retried longer (:func:`retry_not_run`)."""
        run = super().execute_command
        try:
            return retry_not_run(lambda: run(*args, **dict(kwargs)))  # type: ignore[no-untyped-call]
        except (*_UNREACHABLE, redis.ResponseError, redis.exceptions.ClusterError) as exc:
            # CLUSTERDOWN after redis-py's retries, TRYAGAIN past retry_not_run's
            # budget, MOVED/ASK that never settled: RedisUnavailable, not a bug
            _reraise(self.url, exc)
            raise
        except redis.exceptions.RedisClusterException as exc:
            # every node down: redis-py's refresh of the slot map fails after the
            # ConnectionError, and raises this instead of it
            if _cluster_unreachable(exc):
                raise unavailable(self.url, exc) from exc
            raise

    def _pipe(self, transaction: bool) -> Any:
        pipe_class = ClusterPipeline if not transaction else redis.cluster.ClusterPipeline
        return pipe_class(
            nodes_manager=self.nodes_manager,
            commands_parser=self.commands_parser,
            startup_nodes=list(self.nodes_manager.startup_nodes.values()),
            result_callbacks=self.result_callbacks,
            cluster_response_callbacks=self.cluster_response_callbacks,
            read_from_replicas=self.read_from_replicas,
            load_balancing_strategy=self.load_balancing_strategy,
            reinitialize_steps=self.reinitialize_steps,
            retry=self.retry,
            lock=self._lock,
            transaction=transaction,
            event_dispatcher=self._event_dispatcher,
        )

    def pipeline(self, transaction: Any = True, shard_hint: Any = None) -> ClusterPipeline:
        pipe: ClusterPipeline = self._pipe(False)
        pipe.url = self.url
        pipe.atomic = bool(transaction)
        pipe.factory = self._pipe
        return pipe


#: how often a cluster call is tried again after a node error before it fails
CLUSTER_RETRIES = 3


def _cluster(target: ClusterURL, kwargs: dict[str, Any]) -> ClusterClient:
    """The client of a cluster URL; ``kwargs`` and the URL's query fields
    (redis-py's URL options, e.g. ``socket_timeout``) go to every node's connections."""
    query = f"redis://localhost/0?{urlencode(target.query)}"
    options: dict[str, Any] = redis.connection.parse_url(query)  # type: ignore[no-untyped-call]
    for name in ("host", "port", "db", "username", "password", "connection_class"):
        options.pop(name, None)
    options.update(kwargs)
    if target.tls:
        options["ssl"] = True
    # redis-py 8 retries a failing cluster call 10 times, with a backoff and a
    # 0.25 s pause per CLUSTERDOWN: ~4.7 s before a call to a dead master fails.
    # Our callers already go on without that shard (ShardGate, Backoff) and try
    # again; a beat stalled that long let its live shards' leases expire and lost
    # them (tests/cluster/test_master_down.py).  A few quick retries, as redis-py
    # 5-7 did, ride over a MOVED or a reconnect
    options.setdefault(
        "retry",
        redis.retry.Retry(
            redis.backoff.ExponentialWithJitterBackoff(base=0.01, cap=0.1), CLUSTER_RETRIES
        ),
    )
    return ClusterClient(
        startup_nodes=[
            redis.cluster.ClusterNode(host, port)  # type: ignore[no-untyped-call]
            for host, port in target.nodes
        ],
        username=target.username,
        password=target.password,
        **options,
    )


#: how often a sentinel client checks that the master has not moved (seconds)
MASTER_LOOK_S = 1.0

#: how long a sentinel may take to answer "where is the master?" before the next
#: one is asked (redis-py's default is to wait forever)
SENTINEL_TIMEOUT = 2.0


def _sentinel_master(target: SentinelURL, kwargs: dict[str, Any]) -> Client:
    """The master client of a sentinel URL; ``kwargs`` and the URL's query fields
    (redis-py's URL options, e.g. ``socket_timeout``) go to the master connections."""
    # redis-py parses and types the query fields of its own URLs: borrow that
    query = f"redis://localhost/0?{urlencode(target.query)}"
    options: dict[str, Any] = redis.connection.parse_url(query)  # type: ignore[no-untyped-call]
    for name in ("host", "port", "db", "username", "password"):
        options.pop(name, None)
    options.update(kwargs)
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": options.get("socket_timeout") or SENTINEL_TIMEOUT,
        "socket_connect_timeout": options.get("socket_connect_timeout") or SENTINEL_TIMEOUT,
    }
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password
    if target.sentinel_username is not None:
        sentinel_kwargs["username"] = target.sentinel_username
    sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call,unused-ignore]
        list(target.sentinels), sentinel_kwargs=sentinel_kwargs
    )
    client = cast(
        Client,
        sentinel.master_for(  # type: ignore[no-untyped-call,unused-ignore]
            target.master,
            redis_class=Client,
            db=target.db,
            username=target.username,
            password=target.password,
            **options,
        ),
    )
    client.sentinels = sentinel
    return client


#: keys a scan yields per batch, and asks the server for per SCAN call
SCAN_BATCH = 200
SCAN_COUNT = 1000


def scan_keys(
    r: redis.Redis, shard_prefix: str, kind: str, batch: int = SCAN_BATCH
) -> Iterator[list[str]]:
    """Batches of the shard's keys ``<shard prefix><kind>:*`` (the doctor's
    discovery, the attempt audit, the soak benchmark's key count).

    On a cluster only the master holding the shard's slot is scanned (redis-py
    would scan every master, once per shard and kind)."""
    pattern = glob_escape(shard_prefix + kind + ":") + "*"
    where: dict[str, Any] = {}
    if is_cluster(r):
        where["target_nodes"] = r.get_node_from_key(shard_prefix)  # type: ignore[attr-defined]
    keys: list[str] = []
    for key in r.scan_iter(match=pattern, count=SCAN_COUNT, **where):
        keys.append(_s(key))
        if len(keys) >= batch:
            yield keys
            keys = []
    if keys:
        yield keys


def raise_unreachable(results: list[Any]) -> None:
    """Raise the first connection failure or server-state reply among a pipeline's
    replies (a server-state reply, ``CLUSTERDOWN`` and the like, as
    :class:`RedisUnavailable`: :func:`redcron.engine.replies.is_server_state`).

    One server fails a pipeline as a whole; redis-py's cluster pipeline, run
    with ``raise_on_error=False``, puts a node's ``ConnectionError`` in place of
    each reply it could not get (a master down, a connection cut mid-way),
    which a caller would take for a reply (a worker's lease loop died of
    iterating one).  As on one server, which of the calls landed is unknown.
    """
    for reply in results:
        if isinstance(reply, Exception) and is_server_state(reply):
            raise server_state_error(reply) from reply
        if isinstance(reply, redis.ConnectionError | redis.TimeoutError):
            raise ConnectionLost(str(reply)) from reply
