"""Notification channels as data: their kinds, the events they take, and the
checks a channel's URL goes through (pure; no Redis, no network).

A channel URL is a request our own process makes, so it is an SSRF exposure
(docs/operations.md, Notifications): only ``http``/``https`` are taken, and
only to hosts the admin allowed (``Settings.notify_allow_hosts``).  The host
is checked when the channel is made and again before every send.
"""

from __future__ import annotations

import ipaddress
import math
import re
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redcron.errors import ValidationError
from redcron.model import validation

#: what a channel sends: a signed JSON POST, or Slack's incoming-webhook ``{"text"}``
KINDS = ("webhook", "slack")
#: the event types a channel may take (the events stream's ``type``); dead letters
#: come as a digest (at most one message per channel per DIGEST_EVERY_MS)
EVENT_TYPES = (
    "breaker_opened",
    "breaker_reopened",
    "breaker_closed",
    "dead_lettered",
    "run_failed",
    "trigger_lag",
    "run_late",
)
#: the owner of the admin's channels (every tenant's events); no tenant name holds '*'
ADMIN_OWNER = "*"
#: a channel's request timeout: default and bounds (seconds)
TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 30.0
SCHEMES = ("http", "https")
#: what a host name may hold: the sender connects to exactly these characters
#: (no ``%xx`` that urllib would decode, no control character that ``urlsplit``
#: would strip, no backslash or non-ASCII a resolver might read its own way)
HOST_NAME = re.compile(r"[A-Za-z0-9._-]+")
#: anywhere in a URL: a control character, a space or non-ASCII is refused
#: (``urlsplit`` strips tab/CR/LF before it parses; ``urllib.request`` does not)
_UNSAFE_CHAR = re.compile(r"[^\x21-\x7e]")


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """A notification channel as the API and ``redcron channels list`` show it:
    never its secret, and its URL without path (``slack``) or query (``webhook``),
    which may carry a credential.

    ``tenant`` is None for the admin's channels (they take every tenant's events).
    """

    id: str
    kind: str
    name: str
    tenant: str | None
    url: str
    events: tuple[str, ...]
    timeout_s: float
    created_at: datetime | None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One line of a channel's delivery log: what became of one attempt to send."""

    id: str
    delivery: str
    type: str
    outcome: str
    status: int | None
    attempt: int
    error: str
    at: datetime | None


def allowed_hosts(raw: str) -> tuple[str, ...]:
    """The allowlist from its setting: comma-separated hosts (``hooks.slack.com``),
    ``.example.com`` for a domain and its subdomains, ``*`` for any host."""
    return tuple(h.strip().lower() for h in raw.split(",") if h.strip())


def host_allowed(host: str, allow: Sequence[str]) -> bool:
    host = host.lower().rstrip(".")
    for entry in allow:
        if entry == "*" or entry == host:
            return True
        if entry.startswith(".") and (host.endswith(entry) or host == entry[1:]):
            return True
    return False


def check_url(url: object, allow: Sequence[str]) -> str:
    """A channel URL, or a ValidationError naming ``url`` and the fix.

    The host checked is the one the sender connects to: ``urlsplit`` (what we
    parse with) and ``urllib.request`` (what sends) disagree on a URL holding
    ``%xx`` in its host (urllib decodes it) or tab/CR/LF (urlsplit drops them),
    so such URLs are refused, and the host urllib would read is compared with
    the one checked.
    """
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise ValidationError("url", "give the receiver's URL, at most 2048 characters")
    bad = _UNSAFE_CHAR.search(url)
    if bad is not None:
        raise ValidationError(
            "url",
            f"character {bad.group()!r} refused: no space, control character or non-ASCII "
            "(percent-encode it in the path; give an international host as xn--…)",
        )
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port  # a port that is no number raises here
    except ValueError as exc:
        raise ValidationError("url", f"{url!r} is not a URL ({exc})") from None
    if parts.scheme.lower() not in SCHEMES:
        raise ValidationError(
            "url", f"scheme {parts.scheme or '(none)'!r} refused: use http:// or https://"
        )
    if not host:
        raise ValidationError("url", "the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise ValidationError("url", "no user or password in the URL: put a token in its path")
    if not _plain_host(host):
        raise ValidationError(
            "url",
            f"host {host!r} refused: letters, digits, '.', '-' and '_' only, or an IP address "
            "(no %-escapes)",
        )
    if urllib.request.Request(url).host.lower() != parts.netloc.lower():
        # unreachable with the checks above; kept so that a change to either parser
        # cannot open a gap between the host checked and the host connected to
        raise ValidationError("url", "the URL's host reads differently to the sender")
    if not host_allowed(host, allow):
        raise ValidationError(
            "url",
            f"host {host!r} is not in the admin's allowlist of notification hosts "
            "(REDCRON_NOTIFY_ALLOW_HOSTS, comma-separated; '.example.com' for a domain)",
        )
    return url


def _plain_host(host: str) -> bool:
    """A DNS name of plain characters, or an IP literal (``[::1]`` comes as ``::1``)."""
    if HOST_NAME.fullmatch(host):
        return True
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


def shown_url(kind: str, url: str) -> str:
    """What listings show of a URL: a Slack webhook's path is its credential, a
    webhook's query may hold one."""
    parts = urllib.parse.urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    return f"{base}/…" if kind == "slack" else base + parts.path


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise ValidationError("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    return str(kind)


def check_events(events: object) -> tuple[str, ...]:
    """The event types a channel takes (None or empty: all of them)."""
    if events is None or events == [] or events == ():
        return EVENT_TYPES
    if isinstance(events, str):
        events = [e.strip() for e in events.split(",") if e.strip()]
    if not isinstance(events, list | tuple):
        raise ValidationError("events", "give a list of event types")
    out: list[str] = []
    for e in events:
        if e not in EVENT_TYPES:
            raise ValidationError(
                "events", f"{e!r} is not an event type; use some of {', '.join(EVENT_TYPES)}"
            )
        if e not in out:
            out.append(e)
    return tuple(out)


def check_timeout(value: object) -> float:
    if value is None:
        return TIMEOUT_S
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_TIMEOUT_S
    ):
        raise ValidationError("timeout_s", f"give seconds in (0, {MAX_TIMEOUT_S:g}]")
    return float(value)


def check_name(value: object) -> str:
    if value is None or value == "":
        return "channel"
    return validation.name("name", value)


def url_pattern(allow: Sequence[str]) -> str:
    """A JSON Schema ``pattern`` of the URLs :func:`check_url` takes with this
    allowlist (stricter where a regex cannot follow it: lowercase hosts, no
    trailing dot); an empty allowlist takes none."""
    hosts: list[str] = []
    for entry in allow:
        if entry == "*":
            hosts = ["[A-Za-z0-9._-]+"]
            break
        if entry.startswith("."):
            hosts.append(f"(?:[A-Za-z0-9._-]+\\.)?{re.escape(entry[1:])}")
        else:
            hosts.append(re.escape(entry))
    if not hosts:
        return "^(?!)"  # matches nothing: no host is allowed yet
    port = (
        "(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}"
        "|655[0-2][0-9]|6553[0-5]))?"
    )
    return f"^[hH][tT][tT][pP][sS]?://(?:{'|'.join(hosts)}){port}(?:[/?#][!-~]*)?$"


def body_properties(allow: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON Schema of each field a new channel takes (``POST /v1/channels``)
    on a server with the allowlist ``allow``, beside the checks above."""
    seconds = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_S}
    events = {"type": "array", "items": {"enum": list(EVENT_TYPES)}}
    return {
        "tenant": {"anyOf": [validation.name_schema(), {"type": "null"}]},
        "kind": {"enum": list(KINDS)},
        "url": {"type": "string", "maxLength": 2048, "pattern": url_pattern(allow),
                "description": "http(s) to a host of the admin's allowlist "
                "(REDCRON_NOTIFY_ALLOW_HOSTS)"},
        "events": {"anyOf": [events, {"type": "null"}],
                   "description": "event types; none: every type"},
        "name": {"anyOf": [validation.name_schema(optional=True), {"type": "null"}]},
        "timeout_s": {"anyOf": [seconds, {"type": "null"}]},
    }  # fmt: skip
