"""The systems ``python -m bench.compare`` measures, one adapter module each.

Each module names its system (``NAME``), says why it cannot run here
(``missing()``: not installed, no ``node``), describes itself as configured
(``describe()``: version, settings, delivery guarantee) and opens an
:class:`Adapter` on a Redis URL and a key namespace of its own.  A peer's
library is imported inside its functions only: ``--help`` and a checkout
without the ``bench`` extra never import Celery and the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any, Protocol

#: the benchmark's BLPOP: (key, timeout s) -> the float popped, None on timeout
Blpop = Callable[[str, float], "float | None"]

#: the systems, in the order they run in the first round, and their modules
SYSTEMS: dict[str, str] = {
    "redcron": "redcron_peer",
    "celery": "celery_peer",
    "dramatiq": "dramatiq_peer",
    "huey": "huey_peer",
    "rq": "rq_peer",
    "arq": "arq_peer",
    "bullmq": "bullmq_peer",
}

#: worker slots every peer with a concurrency setting gets: redcron's default
#: (config.WORKER_THREADS), so the comparison is at equal concurrency
PEER_SLOTS = 32

#: the extra the Python peers install from
EXTRA_HINT = "pip install -e '.[bench]'"


class Adapter(Protocol):
    """One system on one Redis, in its own key namespace.

    Task kinds: ``incr`` (one INCR of ``<ns>:bench:counter`` on the executing
    thread's own connection), ``noop`` (nothing) and ``now`` (RPUSH of the
    start time, seconds since the epoch, to ``<ns>:bench:stamps``)."""

    #: the key namespace the counter and stamps live under
    ns: str
    #: whether enqueue(..., bulk=True) uses a bulk API of the system's own
    has_bulk: bool

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        """Enqueue ``count`` tasks of ``kind``; seconds it took."""
        ...

    def worker(self) -> AbstractContextManager[Any]:
        """One worker process, running until the context exits (then stopped,
        killed if it does not stop)."""
        ...

    def latency(self, samples: int, blpop: Blpop) -> list[float]:
        """Enqueue → start (ms) of ``samples`` ``now`` tasks one at a time, the
        worker idle between them (``blpop(key, timeout)``: the benchmark's
        own read of a pushed start time, for the Python peers)."""
        ...


def module(name: str) -> ModuleType:
    """The adapter module of system ``name`` (cheap: peers import lazily)."""
    return importlib.import_module(f"{__name__}.{SYSTEMS[name]}")


class PeerModule(Protocol):  # pragma: no cover - the shape of each module, for readers
    NAME: str

    def missing(self) -> str | None: ...

    def describe(self) -> dict[str, str]: ...

    def session(self, url: str, ns: str) -> AbstractContextManager[Adapter]: ...


def counter_key(ns: str) -> str:
    return f"{ns}:bench:counter"


def stamps_key(ns: str) -> str:
    return f"{ns}:bench:stamps"


def iter_kinds(kind: str, count: int) -> Iterator[str]:
    """``kind`` ``count`` times (the shape every enqueue loop walks)."""
    for _ in range(count):
        yield kind
