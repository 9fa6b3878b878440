"""Who did what (issue 21 §5): every state-changing action through the API,
the pages or the CLI, appended to an action stream.

Named *actions*, not *audit*: :mod:`redcron.store.audit` and ``rc:{sN}:audit``
already hold the chaos checker's attempt audit (``Worker(audit=True)``), which
is another thing (one entry per attempt start and end, written by workers).
Here an entry is one person's or program's request: who (a token id, never a
secret; ``admin`` for the dashboard's configured admin token; ``cli:<user>``
for the local CLI), what (``job.pause``...), on which ids, when (the entry id:
the Redis server's clock) and the outcome (``ok``, ``refused`` for a token
that may not, ``error`` for anything else the request failed on).

Two streams get each entry: the tenant's own, ``rc:{sN}:actions:<tenant>``
(under the tenant's shard hash tag; a tenant token reads only that one), and
the deployment's, ``rc:actions`` (the admin's view of everything; an action on
no tenant, such as creating an admin token, lands only there).  They are two
writes, not one transaction (the keys live in different cluster slots): a
crash between them can leave an entry in the deployment's stream only, which an
audit trail of people's clicks can bear.

One action has one entry id in both streams (the deployment stream's, reused
in the tenant's).  Retention: each stream keeps at most ``maxlen`` entries (exact ``MAXLEN``; at
the rate people click, each append trims at most one entry) and nothing older
than ``max_age_s`` (``XTRIM MINID`` from the new entry's server time).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis

from redcron.keys import shard_of
from redcron.model import validation
from redcron.model.records import EPOCH, from_ms
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

log = logging.getLogger(__name__)

#: entries kept per tenant, and in the deployment-wide stream
TENANT_MAXLEN = 10_000
ALL_MAXLEN = 100_000
#: entries older than this (seconds) are trimmed when the next one is appended
MAX_AGE_S = 90 * 86_400
OUTCOMES = ("ok", "refused", "error")
#: a detail longer than this is cut (an error message, the settings changed)
DETAIL_MAX = 300
#: what an API token looks like (``<12 hex id>.<secret>``): masked wherever it
#: would be written, so a token pasted into a job name or a message never lands
#: in the stream
_TOKEN = re.compile(r"\b([0-9a-f]{12})\.[A-Za-z0-9_-]{16,}")
_ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts: ``who`` is a token id, ``admin`` (the configured admin token) or
    ``cli:<user>``; ``kind`` ``admin``, ``tenant`` or ``cli``; ``role``
    ``operator`` or ``viewer``; ``via`` ``api``, ``page`` or ``cli``."""

    who: str
    kind: str
    role: str
    via: str


@dataclass(frozen=True, slots=True)
class Action:
    """One recorded action, as ``redcron audit list`` and ``GET /v1/audit`` show it."""

    id: str
    at: datetime
    who: str
    kind: str
    role: str
    via: str
    action: str
    tenant: str | None
    ids: tuple[str, ...]
    outcome: str
    status: int | None
    detail: str


@dataclass(frozen=True, slots=True)
class ActionPage:
    """Newest first; ``next_cursor``: the entry id to page on from, None at the end."""

    actions: list[Action]
    next_cursor: str | None


def scrub(text: str) -> str:
    """``text`` with anything shaped like an API token masked (``<id>.***``)."""
    return _TOKEN.sub(lambda m: f"{m.group(1)}.***", text)


def valid_action_cursor(cursor: str) -> bool:
    return bool(_ENTRY_ID.fullmatch(cursor))


class ActionLog:
    """Append to and read the action streams."""

    def __init__(
        self,
        broker: Core,
        tenant_maxlen: int = TENANT_MAXLEN,
        all_maxlen: int = ALL_MAXLEN,
        max_age_s: float = MAX_AGE_S,
    ) -> None:
        self.broker = broker
        self.keys = broker.keys
        self.tenant_maxlen = tenant_maxlen
        self.all_maxlen = all_maxlen
        self.max_age_ms = int(max_age_s * 1000)

    def _stream(self, tenant: str | None) -> str:
        if tenant is None:
            return self.keys.actions_all()
        return self.keys.actions(shard_of(tenant, self.broker.shards), tenant)

    def record(
        self,
        actor: Actor,
        action: str,
        tenant: str | None,
        ids: Sequence[str] = (),
        outcome: str = "ok",
        status: int | None = None,
        detail: str = "",
    ) -> str:
        """Append one action; returns its entry id (the server time it was recorded)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        if tenant is not None:
            validation.name("tenant", tenant)  # it names a key
        fields: dict[Any, Any] = {
            "who": scrub(actor.who),
            "kind": actor.kind,
            "role": actor.role,
            "via": actor.via,
            "action": action,
            "tenant": tenant or "",
            "ids": scrub(" ".join(ids)),
            "outcome": outcome,
            "status": "" if status is None else str(status),
            "detail": scrub(detail)[:DETAIL_MAX],
        }
        everyone = self.keys.actions_all()
        eid = _s(self.broker.client.xadd(everyone, dict(fields), maxlen=self.all_maxlen,
                                         approximate=False))  # fmt: skip
        # MINID from the entry just added: the server's clock, not this process's
        oldest = f"{max(0, int(eid.partition('-')[0]) - self.max_age_ms)}-0"
        pipe = self.broker.client.pipeline(transaction=False)
        pipe.xtrim(everyone, minid=oldest, approximate=False)
        if tenant:
            # the same id in the tenant's stream, so one action is one id in both
            # views; it is above the tenant stream's top, which holds only ids of
            # the deployment's stream, unless a failover lost the latter's newest
            # entries: then the tenant's stream numbers it itself (below)
            own = self._stream(tenant)
            pipe.xadd(own, dict(fields), id=eid, maxlen=self.tenant_maxlen, approximate=False)
            pipe.xtrim(own, minid=oldest, approximate=False)
        replies = pipe.execute(raise_on_error=False)
        if tenant and isinstance(replies[1], redis.ResponseError):
            self.broker.client.xadd(own, dict(fields), maxlen=self.tenant_maxlen,
                                    approximate=False)  # fmt: skip
        for reply in replies:
            if isinstance(reply, Exception) and not isinstance(reply, redis.ResponseError):
                raise reply
        log.info(
            "action %s by %s on %s: %s", action, fields["who"], tenant or "(deployment)", outcome
        )
        return eid

    def page(
        self, tenant: str | None = None, limit: int = 50, before: str | None = None
    ) -> ActionPage:
        """Actions newest first: of ``tenant`` (its own stream), or every tenant's
        and the deployment's (None); ``before``: a ``next_cursor``."""
        key = self._stream(tenant)
        top = f"({before}" if before else "+"
        rows: Any = self.broker.client.xrevrange(key, top, "-", count=limit + 1)
        shown = [_action(eid, raw) for eid, raw in rows[:limit]]
        more = len(rows) > limit
        return ActionPage(shown, shown[-1].id if more and shown else None)


def record_action(
    broker: Core,
    actor: Actor,
    action: str,
    tenant: str | None,
    ids: Sequence[str] = (),
    outcome: str = "ok",
    status: int | None = None,
    detail: str = "",
) -> str:
    """Record one state-changing action (see the module's docstring): what any
    face that changes state calls, e.g. a notification channel's create or
    delete.  ``tenant`` None: an action on the deployment (it goes to the
    admin's stream only).  Never pass a secret in ``ids`` or ``detail``;
    anything shaped like an API token is masked regardless."""
    return ActionLog(broker).record(actor, action, tenant, ids, outcome, status, detail)


def _action(eid: Any, raw: dict[Any, Any]) -> Action:
    fields = {_s(k): _s(v) for k, v in raw.items()}
    entry = _s(eid)
    status = fields.get("status", "")
    return Action(
        id=entry,
        at=from_ms(int(entry.partition("-")[0])) or EPOCH,
        who=fields.get("who", ""),
        kind=fields.get("kind", ""),
        role=fields.get("role", ""),
        via=fields.get("via", ""),
        action=fields.get("action", ""),
        tenant=fields.get("tenant") or None,
        ids=tuple(i for i in fields.get("ids", "").split(" ") if i),
        outcome=fields.get("outcome", ""),
        status=int(status) if status.isascii() and status.isdigit() else None,
        detail=fields.get("detail", ""),
    )
