"""The broker's core: the client, the scripts, how a script call is run (and,
under ``durability="strict"``, waited on), and the deployment's meta key.

Every protocol module of the broker (``enqueue``, ``leases``, ``maintenance``,
``dlq``, ``inspect``, ``beat``, ``jobs``...) runs its scripts through one
:class:`Core`; :class:`redcron.engine.Broker` is a :class:`Core` that also
holds them.  Ids carry their shard (``<shard>-<ulid>``), so any id routes to
its hash slot without a lookup.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import redis

from redcron.config import Settings
from redcron.engine.connection import connect, is_cluster, raise_unreachable
from redcron.engine.replies import error_of_reply
from redcron.engine.retry import Outage, ShardGate, is_unavailable
from redcron.engine.scripts import Scripts, Wait
from redcron.engine.upgrade import move_deployment_keys, upgrade_layout
from redcron.errors import ConfigError, ConnectionLost, NotReplicated, RedisUnavailable
from redcron.keys import LAYOUT, Keys

# shard_of_id lives in keys.py (ids and shards, DESIGN §2); re-exported from here
# for callers that import it by that name
from redcron.keys import shard_of_id as shard_of_id
from redcron.redact import masked_url
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: bounded work per script call: no script walks an unbounded set at once
MAX_BATCH = 256
MAX_MAINTENANCE = 500

#: scripts whose success a caller takes as an acknowledgement (a task is queued,
#: an attempt's result recorded, a fire or a job change stored...): under
#: durability="strict" they return only once replicas confirm them (WAIT)
ACKED = frozenset({
    "enqueue", "complete", "fail", "fire", "fire_batch", "job_put", "job_pause", "job_park",
    "job_delete", "cancel", "dlq_replay", "dlq_discard", "run_cancel", "run_retry",
})  # fmt: skip

#: the task hash fields that hold msgpack (every other field is plain text)
PAYLOADS = ("args", "result", "item")

#: a caller's shard gate (:meth:`Core.gated`): after a shard's node failed a call,
#: calls to its shards fail at once for this long, doubling up to the cap, then
#: the next call tries the node again (the worker's gate: 0.1 s to 2 s)
CALLER_GATE_FIRST_S = 0.5
CALLER_GATE_CAP_S = 2.0

T = TypeVar("T")


def fields_of(raw: Mapping[Any, Any], keep: Sequence[str] = ()) -> dict[str, str | bytes]:
    """A hash or stream entry from Redis: names as text, values as text except
    the ``keep`` fields (msgpack payloads stay bytes)."""
    out: dict[str, str | bytes] = {}
    for k, v in raw.items():
        name = _s(k)
        out[name] = v if name in keep else _s(v)
    return out


def time_ms(reply: Any) -> int:
    """A ``TIME`` reply (seconds, microseconds) in ms, as the scripts compute it."""
    sec, usec = reply
    return int(sec) * 1000 + int(usec) // 1000


class Core:
    """The client, scripts and meta of one deployment (one key prefix)."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.client: redis.Redis = client or connect(settings.redis_url, health_check_interval=30)
        self.scripts = Scripts(self.client)
        strict = settings.durability == "strict" and settings.durability_replicas > 0
        self._wait = (
            Wait(settings.durability_replicas, max(1, int(settings.durability_timeout * 1000)))
            if strict
            else None
        )
        self._acked = frozenset(self.scripts.script(name).sha for name in ACKED)
        #: the shards whose node failed a caller's call lately (:meth:`gated`)
        self.gate = ShardGate(
            CALLER_GATE_FIRST_S,
            CALLER_GATE_CAP_S,
            Outage(log, "client", doing="failing calls to its shards at once between tries"),
            self.shards_with,
        )
        self._gate_errors: dict[int, str] = {}
        self._shards: int | None = None
        self._min_idle_ms: int | None = None
        #: every shard's listing indexes are known to be built (store/listing.py)
        self.listing_indexed = False

    # -- deployment ---------------------------------------------------------

    @property
    def shards(self) -> int:
        """The deployment's shard count (stored in the meta key at first use)."""
        if self._shards is None:
            self._shards = self.ensure_meta()
        return self._shards

    @property
    def min_idle_ms(self) -> int:
        """The deployment's minimum lease TTL in ms: no live lease goes longer
        without a heartbeat, so the reaper looks only at entries idle this long."""
        if self._min_idle_ms is None:
            self.ensure_meta()
        assert self._min_idle_ms is not None
        return self._min_idle_ms

    def ensure_meta(self, check_policy: bool = True) -> int:
        """Create the meta key if missing; refuse an evicting Redis.

        Returns the deployment's shard count: the stored one; ``settings.shards``
        (else 1) when this call creates the deployment.

        Raises:
            ConfigError: ``settings.shards`` names another count than the stored
                one (a tenant's shard would change under its queued work).
        """
        if check_policy:
            self.check_eviction_policy()
            self.check_durability()
        meta = self.keys.meta()
        if not self.client.exists(meta) and self.client.exists(self.keys.legacy_deployment("meta")):
            # a deployment of layout 4 or older: its meta (and the other
            # deployment-wide keys) go to their slot first, so it is not taken for new
            move_deployment_keys(self.client, self.keys)
        pipe = self.client.pipeline(transaction=False)
        pipe.hsetnx(meta, "shards", self.settings.shards or 1)
        pipe.hsetnx(meta, "lease_ttl_s", self.settings.lease_ttl)
        pipe.hsetnx(meta, "min_lease_ttl_s", self.settings.min_lease_ttl)
        pipe.hmget(meta, ["shards", "min_lease_ttl_s", "layout"])
        replies = pipe.execute()
        shards, min_ttl, layout = replies[-1]
        if replies[0] and layout is None:
            # this call created the deployment: it is born at this release's layout
            # (an older deployment has shards but no layout: that one is upgraded)
            self.client.hsetnx(meta, "layout", LAYOUT)
            layout = self.client.hget(meta, "layout")
        asked = self.settings.shards
        if asked is not None and asked != int(shards):
            raise ConfigError(
                f"shards: the deployment at prefix {self.settings.prefix!r} has "
                f"{int(shards)} shard(s), not {asked}; a tenant's shard follows from the "
                "count, so changing it would strand every tenant's queued work, leases "
                "and schedules. Leave shards unset (REDCRON_SHARDS) to use the "
                "deployment's, or move to a new prefix with the new count "
                '(docs/operations.md, "Changing the shard count")'
            )
        # before any script runs: this release writes some keys with another type
        upgrade_layout(self.client, self.keys, int(shards), int(layout or 1))
        self._shards = int(shards)
        self._min_idle_ms = int(float(min_ttl) * 1000)
        return self._shards

    def shards_with(self, shard: int) -> list[int]:
        """The shards served by the node that serves ``shard``: on one server all
        of them; on a cluster those whose hash tag's slot has the same master
        in the client's slot map (no I/O)."""
        client: Any = self.client
        if not is_cluster(client):
            return list(range(self.shards))
        node = client.get_node_from_key(self.keys.shard(shard)).name
        return [
            s
            for s in range(self.shards)
            if client.get_node_from_key(self.keys.shard(s)).name == node
        ]

    def server_ms(self) -> int:
        """The Redis server's clock in ms: every process reads "now" from it (invariant 8)."""
        return time_ms(self.client.time())

    def config_get(self, pattern: str) -> list[dict[Any, Any]]:
        """``CONFIG GET`` of the server, or of every master of a cluster (each
        holds its own settings)."""
        if is_cluster(self.client):
            return self._config_get_masters(pattern)
        return [self.client.config_get(pattern)]

    def server_info(self, section: str) -> list[dict[str, Any]]:
        """``INFO <section>`` of the server, or of every master of a cluster (in
        the order of their addresses), for the benchmarks' CPU and memory figures."""
        if is_cluster(self.client):
            got: Any = self.client.info(section, target_nodes="primaries")
            return [got[node] for node in sorted(got)]
        return [self.client.info(section)]

    def _config_get_masters(self, pattern: str) -> list[dict[Any, Any]]:
        """``CONFIG GET`` of every master that answers: a master that is down
        (its shards pause until it is back) must not keep a process from
        starting on the others; it is logged, and checked when it answers at
        the next start.  Raises when no master answers."""
        cluster: Any = self.client
        out: list[dict[Any, Any]] = []
        failure: Exception | None = None
        for node in cluster.get_primaries():
            try:
                out.append(cluster.config_get(pattern, target_nodes=node))
            except (ConnectionLost, redis.ConnectionError, redis.TimeoutError) as exc:
                log.warning("master %s did not answer CONFIG GET %s (%s)", node.name, pattern, exc)
                failure = exc
        if not out and failure is not None:
            raise failure
        return out

    def check_eviction_policy(self) -> None:
        try:
            policies = [got.get("maxmemory-policy") for got in self.config_get("maxmemory-policy")]
        except redis.ResponseError:  # CONFIG disabled (managed Redis): cannot check
            log.warning("cannot read maxmemory-policy; make sure it is noeviction")
            return
        for policy in policies:
            if policy is not None and _s(policy) != "noeviction":
                raise ConfigError(
                    f"Redis maxmemory-policy is {_s(policy)!r}; redcron needs 'noeviction' "
                    "(an evicted key is lost work): CONFIG SET maxmemory-policy noeviction"
                    + (" on every master" if is_cluster(self.client) else "")
                )

    def check_durability(self) -> None:
        """``durability="strict"`` on one server (``durability_replicas`` 0) holds
        only if every write is fsynced before it is acknowledged: refuse a server
        that does not run ``appendonly yes`` with ``appendfsync always``."""
        if self.settings.durability != "strict" or self.settings.durability_replicas > 0:
            return
        try:
            every = self.config_get("append*")
        except redis.ResponseError:  # CONFIG disabled (managed Redis): cannot check
            log.warning("cannot read appendfsync; durability=strict needs appendfsync always")
            return
        if any(
            (_s(got.get("appendonly", b"")), _s(got.get("appendfsync", b""))) != ("yes", "always")
            for got in every
        ):
            raise ConfigError(
                "durability=strict with durability_replicas=0 needs a server with appendonly "
                "yes and appendfsync always (redcron up --fsync always); or name the "
                "replicas each write waits for with durability_replicas"
            )

    # -- a caller's shard gate -------------------------------------------------

    def gated(self, shards: Collection[int], what: str, call: Callable[[], T]) -> T:
        """``call()``, which talks to ``shards``, through the caller's shard gate.

        While a shard's node is known down (a call to it failed unavailable
        within its gate delay, :data:`CALLER_GATE_FIRST_S` doubling to
        :data:`CALLER_GATE_CAP_S`) this raises :class:`RedisUnavailable` at once,
        naming the shard and its node, without a connection attempt: a caller
        (``App.enqueue``, an API request) does not spend 0.3-2 s of its thread on
        each call to a dead master.  Once the delay is over the next call tries
        the node again.  Only a call to one shard closes the gate (a batch over
        several cannot say which failed); any success opens its shards.
        """
        wanted = sorted(set(shards))
        now = time.monotonic()
        open_ = set(self.gate.open(wanted, now))
        for shard in wanted:
            if shard not in open_:
                raise self._gate_closed(shard, what, now)
        try:
            result = call()
        except Exception as exc:
            if len(wanted) == 1 and is_unavailable(exc):
                (shard,) = wanted
                self._gate_errors[shard] = str(exc)
                self.gate.failed(shard, exc, what, time.monotonic())
                if isinstance(exc, RedisUnavailable) and exc.shard is None:
                    exc.shard = shard
            raise
        failing = self.gate.failing
        for shard in wanted:
            # its node answers again: so does every shard it serves
            back = self.shards_with(shard) if shard in failing else [shard]
            for s in back:
                self.gate.ok(s)
        return result

    def _gate_closed(self, shard: int, what: str, now: float) -> RedisUnavailable:
        node = self.node_name(shard)
        error = RedisUnavailable(
            f"{what}: shard {shard} ({node}) failed its last call "
            f"({self._gate_errors.get(shard, 'unavailable')}); it is tried again in "
            f"{self.gate.due(shard, now):.1f}s, failing at once until then"
        )
        error.shard = shard
        return error

    def node_name(self, shard: int) -> str:
        """Which server serves ``shard``: its master's ``host:port`` on a cluster
        (the client's slot map, no I/O), else the URL without its password."""
        client: Any = self.client
        if is_cluster(client):
            try:
                return f"master {client.get_node_from_key(self.keys.shard(shard)).name}"
            except Exception:  # no slot map entry: say the shard alone
                return "its master"
        return masked_url(self.settings.redis_url)

    # -- running scripts ----------------------------------------------------

    def _run(self, name: str, shard: int, args: list[Any], client: Any = None, *keys: str) -> Any:
        """Run ``lua/<name>.lua`` on ``shard`` (queued on ``client`` if it is a
        pipeline); an acknowledged write waits for its replicas under strict
        durability."""
        if client is None and self._wait is not None and name in ACKED:
            return self.scripts.run_replicated(
                name, [self.keys.shard(shard), *keys], args, self._wait
            )
        return self.scripts.run(name, [self.keys.shard(shard), *keys], args, client)

    def execute(self, pipe: Any, ordered: bool = False) -> list[Any]:
        """Execute a pipeline of script calls: every reply in order, a refused call's
        error in its place.

        A call that found no script (a flushed or restarted Redis) is loaded and
        run again *after* the rest of the pipeline.  That is harmless where the
        calls do not depend on each other's order (reports and a lease, fires of
        one script); a pipeline whose later calls rely on earlier ones having
        run (an admission check, then the writes it guards) passes ``ordered``,
        and its scripts are made sure of first (one more round trip).
        """
        stack = list(pipe.command_stack)
        wait = self._wait
        acked = [c for c in stack if c[0][0] == "EVALSHA" and c[0][1] in self._acked]
        if not acked:
            wait = None
        waited: list[Any] = []
        try:
            if ordered:
                self.scripts.ensure_loaded(stack)
            waits = self.scripts.queue_waits(pipe, acked, wait) if wait is not None else 0
            results: list[Any] = pipe.execute(raise_on_error=False)
            raise_unreachable(results)
            if wait is not None:
                waited = self.scripts.take_waits(pipe, results, waits)
            rewaited = self.scripts.rerun_missing(stack, results, wait)
        except redis.ConnectionError as exc:
            raise ConnectionLost(str(exc)) from exc
        if wait is not None:
            try:
                wait.check_all(waited + (rewaited or []), "a pipeline of writes")
            except NotReplicated as exc:
                exc.results = results
                raise
        return results

    def _execute(self, pipe: Any, ordered: bool = False) -> list[Any]:
        """Execute a pipeline; a script error becomes its exception (the first one)."""
        results = self.execute(pipe, ordered)
        for res in results:
            if isinstance(res, redis.ResponseError):
                raise error_of_reply(res) from res
        return results

    def close(self) -> None:
        self.client.close()
