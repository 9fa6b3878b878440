"""Shared helpers for the Lua script tests: explicit-``now`` wrappers around the scripts.

Imported by name (``from lua_ops import ...``): pytest puts ``tests/lua`` on
``sys.path`` when it imports this directory's conftest and test modules (there is
no ``__init__.py``). The ``broker`` and ``ops`` fixtures are in ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redcron.broker import Broker
from redcron.clock import ulid

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
    prio: str = "normal",
    max_attempts: int = 3,
    base: int = 1000,
    cap: int = 60_000,
    delay: int = 0,
) -> list[Any]:
    return [
        iid,
        "job",
        "python",
        b"\x90",
        queue,
        tenant,
        prio,
        0,
        max_attempts,
        base,
        cap,
        delay,
        3600,
    ]


class Ops:
    """Script calls on one shard with an explicit, test-controlled ``now``."""

    def __init__(self, broker: Broker, shard: int = 0) -> None:
        self.b = broker
        self.r = broker.client
        self.shard = shard
        self.k = broker.keys
        self.kp = [broker.keys.shard(shard)]
        self.now = T0

    def run(self, name: str, args: list[Any]) -> Any:
        return self.b.scripts.run(name, self.kp, args)

    def enqueue(self, *rows: list[Any]) -> int:
        return int(self.run("enqueue", [self.now, 13, *(v for r in rows for v in r)]))

    def lease(
        self,
        worker: str = "w1",
        n: int = 1,
        ttl: int = 1000,
        queues: Sequence[str] = ("default",),
        tenants: Sequence[str] = (),
    ) -> list[Tok]:
        raw = self.run("lease", [worker, n, ttl, self.now, ",".join(tenants), "", "", "", *queues])
        return [Tok(x[0].decode(), str(x[1]), int(x[2]), worker) for x in raw]

    @staticmethod
    def _pairs(toks: Sequence[Tok]) -> list[str]:
        return [v for t in toks for v in (t.iid, t.epoch)]

    def start(self, worker: str, toks: Sequence[Tok]) -> int:
        return int(self.run("start", [worker, self.now, *self._pairs(toks)]))

    def heartbeat(
        self, worker: str, toks: Sequence[Tok], ttl: int = 1000
    ) -> tuple[list[str], list[str]]:
        lost, revoked = self.run("heartbeat", [worker, ttl, self.now, *self._pairs(toks)])
        return [x.decode() for x in lost], [x.decode() for x in revoked]

    def complete(self, worker: str, toks: Sequence[Tok]) -> list[int]:
        args: list[Any] = [worker, self.now]
        for t in toks:
            args += [t.iid, t.epoch, b"\xa2ok"]
        return list(self.run("complete", args))

    def fail(
        self,
        worker: str,
        tok: Tok,
        *,
        outcome: str = "failed",
        retryable: bool = True,
        delay: int | str = "",
        frac: float = 0.5,
        error: str = "boom",
    ) -> Any:
        [res] = self.run(
            "fail",
            [
                worker,
                self.now,
                tok.iid,
                tok.epoch,
                outcome,
                error,
                "1" if retryable else "0",
                delay,
                frac,
                "",
            ],
        )
        return res if res == 0 else res.decode()

    def release(self, worker: str, toks: Sequence[Tok]) -> int:
        return int(self.run("release", [worker, self.now, *self._pairs(toks)]))

    def reap(self, frac: float = 0.5) -> list[int]:
        return list(self.run("reap", [self.now, 500, frac]))

    def promote(self) -> list[int]:
        return list(self.run("promote", [self.now, 500]))

    def info(self, iid: str) -> dict[str, str]:
        raw = self.r.hgetall(self.k.ti(self.shard, iid))
        return {k.decode(): v.decode("utf-8", "replace") for k, v in raw.items()}

    def snapshot(self, iid: str, tenant: str = "acme") -> Any:
        r, k, s = self.r, self.k, self.shard
        return (
            r.hgetall(k.ti(s, iid)),
            r.zrange(k.leases(s), 0, -1, withscores=True),
            r.zrange(k.tleases(s, tenant), 0, -1, withscores=True),
            r.zrange(k.timers(s), 0, -1, withscores=True),
            r.xrange(k.q(s, "default", tenant, "normal")),
            r.xrange(k.dlq(s, tenant)),
            r.hgetall(k.stats(s)),
        )
