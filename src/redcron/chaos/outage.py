"""``redcron chaos --cluster``: which master serves which shard, the tenants that
spread the scenario over the masters, and the accounting of the master outage.

Pure: no Redis, times passed in.  A shard's keys all carry its hash tag
``{s<N>}``, so the shard lives in the slot of that tag (``CLUSTER KEYSLOT``,
:func:`redcron.engine.key_slot`); :class:`~redcron.embedded_cluster.EmbeddedCluster`
splits the 16,384 slots evenly, in order (master 0 the lowest), which
:func:`master_of_slot` mirrors.

The outage check, besides every invariant of the checker: while the killed
master was down, attempts kept ending on the shards of every live master (more
than 0 on each that ended any in as long a window just before; counted from
the instance histories' ``ended_at``, stamped by the server that wrote them)
and none ended on the dead one's; after it came back, attempts on its shards
ended again (work resumed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from redcron.embedded_cluster import SLOTS
from redcron.engine import key_slot
from redcron.keys import Keys, shard_of


def master_of_slot(slot: int, masters: int) -> int:
    """The master (index, in slot order) that holds ``slot`` in an
    :class:`~redcron.embedded_cluster.EmbeddedCluster` of ``masters``."""
    return min(slot // (SLOTS // masters), masters - 1)


def shard_masters(shards: int, masters: int, prefix: str = "rc") -> dict[int, int]:
    """shard -> the master that serves it (by the slot of its hash tag)."""
    keys = Keys(prefix)
    return {s: master_of_slot(key_slot(keys.shard(s)), masters) for s in range(shards)}


def spread_tenants(
    names: Sequence[str], shards: int, masters: int, prefix: str = "rc"
) -> tuple[str, ...]:
    """``names`` renamed so that name ``i`` lives on a shard of master
    ``i % masters``: the name itself when it does, else the first
    ``<name>-<k>`` that does (stable: the same inputs give the same names)."""
    where = shard_masters(shards, masters, prefix)
    out = []
    for i, name in enumerate(names):
        want = i % masters
        k, candidate = 0, name
        while where[shard_of(candidate, shards)] != want:
            k += 1
            candidate = f"{name}-{k}"
        out.append(candidate)
    return tuple(out)


@dataclass(frozen=True)
class MasterOutage:
    """What the tasks did while one master was down, and after it came back."""

    master: int
    #: the shards that master serves
    shards: tuple[int, ...]
    #: how long it was down: from its SIGKILL to its restart, seconds
    down_s: float
    #: attempts that ended during the outage, per master (every master listed)
    finishes: dict[int, int] = field(default_factory=dict)
    #: for comparison: attempts that ended in a window as long just before it
    finishes_before: dict[int, int] = field(default_factory=dict)
    #: attempts on the dead master's shards that ended after it came back
    finishes_after: int = 0
    #: seconds from its restart to the first of those (None: none)
    resumed_after_s: float | None = None

    @property
    def finishes_live(self) -> int:
        return sum(n for m, n in self.finishes.items() if m != self.master)

    @property
    def finishes_dead(self) -> int:
        return self.finishes.get(self.master, 0)


def account(
    ends: Iterable[tuple[int, int]],
    where: Mapping[int, int],
    master: int,
    down_ms: int,
    up_ms: int,
) -> MasterOutage:
    """The outage of ``master`` from ``down_ms`` to ``up_ms`` (wall ms), from the
    ``(shard, ended_ms)`` of every attempt that ended; ``where`` maps shard ->
    master."""
    masters = sorted(set(where.values()))
    finishes = dict.fromkeys(masters, 0)
    before = dict.fromkeys(masters, 0)
    after = 0
    first_after: int | None = None
    for shard, ended in ends:
        m = where[shard]
        if down_ms <= ended <= up_ms:
            finishes[m] += 1
        elif down_ms - (up_ms - down_ms) <= ended < down_ms:
            before[m] += 1
        elif ended > up_ms and m == master:
            after += 1
            first_after = ended if first_after is None else min(first_after, ended)
    return MasterOutage(
        master=master,
        shards=tuple(sorted(s for s, m in where.items() if m == master)),
        down_s=round((up_ms - down_ms) / 1000, 1),
        finishes=finishes,
        finishes_before=before,
        finishes_after=after,
        resumed_after_s=None if first_after is None else round((first_after - up_ms) / 1000, 1),
    )


def judge(outage: MasterOutage) -> list[str]:
    """The outage's violations (a sentence each): a live master whose shards
    ended attempts just before the outage and none during it (they paused
    too), an attempt the dead master ended, no work on its shards after it
    came back.

    A live master that ended nothing in the window before either (a starved
    machine, no work routed there yet) shows nothing either way: it is no
    violation, and the figures say so."""
    out: list[str] = []
    for m, n in sorted(outage.finishes.items()):
        before = outage.finishes_before.get(m, 0)
        if m != outage.master and n == 0 and before > 0:
            out.append(
                f"master {m}: no attempt ended on its shards while master {outage.master} was "
                f"down ({outage.down_s:g} s), {before} in as long a window just before: a "
                "live master's shards paused too"
            )
    if outage.finishes_dead:
        out.append(
            f"master {outage.master}: {outage.finishes_dead} attempts ended on its shards "
            "while it was down (its process was killed: it cannot have written them)"
        )
    if not outage.finishes_after:
        out.append(
            f"master {outage.master}: no attempt ended on its shards "
            f"{_list(outage.shards)} after it came back: work did not resume"
        )
    return out


def describe(outage: MasterOutage) -> str:
    """One line for the text report."""
    o = outage
    per = ", ".join(
        f"{m}: {n} (before {o.finishes_before.get(m, 0)})" for m, n in sorted(o.finishes.items())
    )
    resumed = "never" if o.resumed_after_s is None else f"{o.resumed_after_s:g} s after"
    return (
        f"master {o.master} (shards {_list(o.shards)}) down {o.down_s:g} s: attempts ended "
        f"during the outage on live masters {o.finishes_live}, on the dead one "
        f"{o.finishes_dead} (per master, and in as long a window just before: {per}); "
        "on its shards after it came back "
        f"{o.finishes_after} (first {resumed})"
    )


def _list(shards: Iterable[int]) -> str:
    return ",".join(str(s) for s in shards)
