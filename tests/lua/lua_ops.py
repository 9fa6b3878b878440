"""Shared helpers for the Lua script tests: explicit-``now`` wrappers around the scripts.

Imported by name (``from lua_ops import ...``): pytest puts ``tests/lua`` on
``sys.path`` when it imports this directory's conftest and test modules (there is
no ``__init__.py``). The ``broker`` and ``ops`` fixtures are in ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redcron.clock import ulid
from redcron.engine import Broker, FailItem, argv
from redcron.engine.argv import EnqueueRow
from redcron.keys import GROUP

T0 = 1_700_000_000_000


@dataclass(frozen=True)
class Tok:
    iid: str
    epoch: str
    attempt: int
    worker: str


def new_id(shard: int = 0) -> str:
    return f"{shard}-{ulid()}"


def row(
    iid: str,
    *,
    tenant: str = "acme",
    queue: str = "default",
    priority: str = "normal",
    max_attempts: int = 3,
    base: int = 1000,
    cap: int = 60_000,
    delay: int = 0,
    timeout: int = 0,
) -> EnqueueRow:
    return EnqueueRow(
        iid=iid,
        name="job",
        kind="python",
        args=b"\x90",
        queue=queue,
        tenant=tenant,
        priority=priority,
        timeout_ms=timeout,
        max_attempts=max_attempts,
        retry_base_ms=base,
        retry_cap_ms=cap,
        delay_ms=delay,
        result_ttl_s=3600,
    )


class Ops:
    """Script calls on one shard with an explicit, test-controlled ``now``."""

    #: the scripts whose follow-ups :meth:`run` applies right after them (as
    #: maintenance would within its interval), unless ``follow`` is off
    ENDING = frozenset({
        "complete", "fail", "release", "reap", "promote", "cancel", "dlq_discard",
        "run_cancel", "fire", "fire_batch", "doctor_place", "doctor_run",
    })  # fmt: skip

    def __init__(self, broker: Broker, shard: int = 0, follow: bool = True) -> None:
        self.b = broker
        self.r = broker.client
        self.shard = shard
        self.k = broker.keys
        self.kp = [broker.keys.shard(shard)]
        self.now = T0
        #: apply the follow-ups of each ending script at once (False: a test
        #: of the follow-ups themselves calls :meth:`follow`)
        self.auto_follow = follow

    def run(self, name: str, args: list[Any]) -> Any:
        out = self.b.scripts.run(name, self.kp, args)
        if self.auto_follow and name in self.ENDING:
            self.follow()
        return out

    def follow(self) -> int:
        """Apply the shard's follow-up entries, all of them (maintenance's part)."""
        n = 0
        while True:
            applied, left = self.b.maintenance.follow_up(self.shard)
            n += applied
            if not left:
                return n

    def enqueue(self, *rows: EnqueueRow) -> int:
        return int(self.run("enqueue", argv.enqueue(rows, self.now)))

    def lease(self, worker: str = "w1", n: int = 1, ttl: int = 1000, **kw: Any) -> list[Tok]:
        """Tokens of what lease.lua hands ``worker`` (``kw`` as :meth:`lease_raw`;
        the ``{name}`` rows of tasks it left ready are not tokens)."""
        return [
            Tok(x[0].decode(), str(x[1]), int(x[2]), worker)
            for x in self.lease_raw(worker, n, ttl, **kw)
            if len(x) > 1
        ]

    def lease_raw(
        self,
        worker: str = "w1",
        n: int = 1,
        ttl: int = 1000,
        queues: Sequence[str] = ("default",),
        tenants: Sequence[str] = (),
        quantum: float | str = "",
        aging_ms: int | str = "",
        tasks: Sequence[str] | None = None,
    ) -> Any:
        """lease.lua's reply as it is (iid, epoch, attempt, name, kind, args, ...;
        then a ``{name}`` row per task not in ``tasks`` it left ready)."""
        args = argv.lease(
            worker, n, ttl, queues, tenants=tenants, quantum=quantum, aging_ms=aging_ms,
            metrics=self.b.settings.metrics, tasks=tasks, now=self.now,
        )  # fmt: skip
        return self.run("lease", args)

    @staticmethod
    def _pairs(toks: Sequence[Tok]) -> list[tuple[str, str]]:
        return [(t.iid, t.epoch) for t in toks]

    def start(self, worker: str, toks: Sequence[Tok]) -> int:
        return int(self.run("start", argv.tokens(worker, self._pairs(toks), self.now)))

    def heartbeat(
        self, worker: str, toks: Sequence[Tok], ttl: int = 1000
    ) -> tuple[list[str], list[str]]:
        lost, revoked = self.run(
            "heartbeat", argv.heartbeat(worker, ttl, self._pairs(toks), self.now)
        )
        return [x.decode() for x in lost], [x.decode() for x in revoked]

    def complete(self, worker: str, toks: Sequence[Tok]) -> list[int]:
        items = [(t.iid, t.epoch, b"\xa2ok") for t in toks]
        return list(self.run("complete", argv.complete(worker, items, self.now)))

    def fail(
        self,
        worker: str,
        tok: Tok,
        *,
        outcome: str = "failed",
        retryable: bool = True,
        delay: int | None = None,
        frac: float = 0.5,
        error: str = "boom",
    ) -> Any:
        item = FailItem(tok.iid, tok.epoch, outcome, error, retryable, delay)
        [(state, _delay)] = self.run("fail", argv.fail(worker, [item], self.now, frac))
        return state if state == 0 else state.decode()

    def release(self, worker: str, toks: Sequence[Tok]) -> int:
        return int(self.run("release", argv.tokens(worker, self._pairs(toks), self.now)))

    def reap(self, frac: float = 0.5, min_idle_ms: int | None = None) -> list[int]:
        """reap.lua at ``now``; ``min_idle_ms`` defaults to the deployment's."""
        idle = self.b.min_idle_ms if min_idle_ms is None else min_idle_ms
        return list(self.run("reap", argv.reap(500, idle, self.now, frac)))

    def promote(self) -> list[int]:
        return list(self.run("promote", argv.promote(500, self.now)))

    def stream(self, tenant: str = "acme", queue: str = "default", priority: str = "normal") -> str:
        return self.k.q(self.shard, queue, tenant, priority)

    def pending(
        self, tenant: str = "acme", queue: str = "default", priority: str = "normal"
    ) -> dict[str, int]:
        """Entries pending in the stream's consumer group: entry id -> idle ms
        (on the server clock; scripts stamp a test's ``now`` as delivery time)."""
        key = self.stream(tenant, queue, priority)
        if not self.r.exists(key):
            return {}
        rows = self.r.xpending_range(key, GROUP, min="-", max="+", count=10_000)
        return {row["message_id"].decode(): int(row["time_since_delivered"]) for row in rows}

    def ready(self, tenant: str = "acme", queue: str = "default", priority: str = "normal") -> int:
        """Ready entries: the stream's length less its pending ones."""
        return int(self.r.xlen(self.stream(tenant, queue, priority))) - len(
            self.pending(tenant, queue, priority)
        )

    def info(self, iid: str) -> dict[str, str]:
        raw = self.r.hgetall(self.k.ti(self.shard, iid))
        return {k.decode(): v.decode("utf-8", "replace") for k, v in raw.items()}

    def snapshot(self, iid: str, tenant: str = "acme") -> Any:
        r, k, s = self.r, self.k, self.shard
        return (
            r.hgetall(k.ti(s, iid)),
            r.zrange(k.pending(s), 0, -1, withscores=True),
            sorted(self.pending(tenant)),
            r.zrange(k.leases(s, tenant), 0, -1, withscores=True),
            r.zrange(k.timers(s), 0, -1, withscores=True),
            r.xrange(k.q(s, "default", tenant, "normal")),
            r.xrange(k.dlq(s, tenant)),
            r.hgetall(k.counters(s)),
        )
