"""What a notification says (pure: plain data in, plain data out).

A message is a dict: ``type``, ``tenant``, ``job``, ``run``, ``at`` (ISO-8601
UTC), ``detail``, ``link`` (the dashboard page, under ``base_url``) and
``text`` (one human line, what Slack shows).  A webhook body is the message
with its ``delivery`` id, as JSON; a Slack body is ``{"text": ...}``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from redcron.model.records import from_ms
from redcron.model.serialize import iso

#: at most one dead-letter digest per channel per this interval (ms)
DIGEST_EVERY_MS = 60_000
#: retries: min(RETRY_BASE_MS * 2^attempt, RETRY_CAP_MS), full jitter
RETRY_BASE_MS = 2_000
RETRY_CAP_MS = 3_600_000
#: a delivery not sent this long after it was made is given up (logged
#: ``expired``): a receiver that is down delays its messages up to this, never more
OUTBOX_RETENTION_MS = 3 * 86_400_000

_TITLES = {
    "breaker_opened": "circuit breaker opened",
    "breaker_reopened": "circuit breaker reopened",
    "breaker_closed": "circuit breaker closed",
    "breaker_trial": "circuit breaker trial",
    "run_failed": "run failed",
    "trigger_lag": "trigger lag over the threshold",
    "run_late": "run late (deadline missed)",
    "dead_lettered": "tasks dead-lettered",
}


def retry_delay_ms(attempt: int, rand: random.Random | None = None) -> int:
    """How long after failed attempt ``attempt`` (0-based) the next one goes."""
    ceiling = min(RETRY_BASE_MS * 2 ** min(attempt, 30), RETRY_CAP_MS)
    return max(1_000, int((rand or random).uniform(0, ceiling)))


def link(base_url: str, tenant: str, job: str, run: str) -> str:
    """The dashboard page of what an event is about: its run, else its job, else
    its tenant's."""
    base = base_url.rstrip("/")
    if run:
        return f"{base}/runs/{run}"
    if job:
        return f"{base}/jobs/{job}"
    return f"{base}/tenants/{tenant}" if tenant else f"{base}/"


def _at(ms: str | int) -> str:
    value = int(ms) if str(ms).isdigit() else 0
    stamp = from_ms(value)
    return iso(stamp) if stamp is not None else ""


def event_message(fields: Mapping[str, str], base_url: str) -> dict[str, Any]:
    """The message of one event (the events stream's fields)."""
    kind = fields.get("type", "")
    tenant, job, run = fields.get("tenant", ""), fields.get("job", ""), fields.get("run", "")
    detail = fields.get("detail", "")
    where = f"tenant {tenant}" + (f", job {job}" if job else "") + (f", run {run}" if run else "")
    url = link(base_url, tenant, job, run)
    text = f"[redcron] {_TITLES.get(kind, kind)}: {where}" + (f": {detail}" if detail else "")
    return {
        "type": kind,
        "tenant": tenant,
        "job": job,
        "run": run,
        "at": _at(fields.get("at", "0")),
        "detail": detail,
        "link": url,
        "text": f"{text} <{url}>",
    }


def dead_letter_detail(fields: Mapping[str, str]) -> dict[str, Any]:
    """A dead_lettered event's detail (JSON: task, name, outcome, error)."""
    try:
        got = json.loads(fields.get("detail", "") or "{}")
    except ValueError:
        got = {"error": fields.get("detail", "")}
    out = got if isinstance(got, dict) else {"error": str(got)}
    out.setdefault("tenant", fields.get("tenant", ""))
    out.setdefault("job", fields.get("job", ""))
    out.setdefault("run", fields.get("run", ""))
    return out


def digest_message(fields: Mapping[str, str], now: int, base_url: str) -> dict[str, Any]:
    """The one message of a channel's dead-letter digest (its hash's fields):
    the count, the count per (tenant, job), the first errors."""
    count = int(fields.get("count", "0") or 0)
    groups: list[dict[str, Any]] = []
    for name, value in fields.items():
        if name.startswith("j:"):
            tenant, _, job = name[2:].partition("|")
            groups.append({"tenant": tenant, "job": job, "count": int(value)})
    groups.sort(key=lambda g: (-g["count"], g["tenant"], g["job"]))
    errors = []
    for i in range(1, 100):
        raw = fields.get(f"e{i}")
        if raw is None:
            break
        errors.append(json.loads(raw))
    tenants = sorted({g["tenant"] for g in groups if g["tenant"]})
    first = errors[0] if errors else {}
    tenant = tenants[0] if len(tenants) == 1 else ""
    url = link(base_url, "", "", "") + "dlq"
    if tenant:
        url = link(base_url, tenant, "", "") + "/dlq"
    lines = [f"[redcron] {count} task(s) dead-lettered since {_at(fields.get('first_at', '0'))}"]
    lines += [f"  {g['tenant']} {g['job'] or '(one-off)'}: {g['count']}" for g in groups[:10]]
    lines += [f"  first error: {e.get('task', '')}: {e.get('error', '')}" for e in errors[:3]]
    return {
        "type": "dead_lettered",
        "digest": True,
        "tenant": tenant,
        "job": first.get("job", "") if len(groups) == 1 else "",
        "run": first.get("run", "") if count == 1 else "",
        "at": _at(now),
        "since": _at(fields.get("first_at", "0")),
        "count": count,
        "by_job": groups,
        "first_errors": errors,
        "detail": f"{count} task(s) dead-lettered",
        "link": url,
        "text": "\n".join(lines) + f"\n<{url}>",
    }


def body_of(kind: str, delivery_id: str, message: Mapping[str, Any]) -> bytes:
    """The bytes a channel of ``kind`` POSTs for a message."""
    if kind == "slack":
        return json.dumps({"text": message.get("text", "")}).encode()
    return json.dumps({"delivery": delivery_id, **message}, sort_keys=True).encode()
