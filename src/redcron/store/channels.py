"""Notification channels in Redis: create, list, show, remove, and read a
channel's URL and secret back for sending.

A webhook is signed with its channel's secret (HMAC-SHA256), so the secret
itself must be kept, not only a hash of it.  It is stored encrypted, and so is
the URL (a Slack webhook's URL is its credential): sealed under keys derived
from the deployment's channel master key (``Keys.channel_secret()``, made once
as the other shared secrets are: :mod:`redcron.store.shared_secrets`) with
HMAC-SHA256 as a keystream and a MAC over the channel id, nonce and
ciphertext (encrypt-then-MAC), so a sealed value neither reads nor moves to
another channel.  What this protects and what it cannot is in
docs/operations.md (Notifications): a dump of channel hashes shows no secret,
but whoever reads all of Redis reads the master key too.

The secret is returned once, by :meth:`ChannelStore.add`; nothing here logs it.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis

from redcron.engine.partial import may_leave_out_channels, note_channel_unavailable
from redcron.errors import Conflict, NotFound, ValidationError
from redcron.keys import NOTIFY_GROUP
from redcron.model import validation
from redcron.model.channels import (
    ADMIN_OWNER,
    ChannelInfo,
    Delivery,
    allowed_hosts,
    check_events,
    check_kind,
    check_name,
    check_timeout,
    check_url,
    shown_url,
)
from redcron.model.records import from_ms
from redcron.model.serialize import iso
from redcron.serde import text as _s
from redcron.store.outbox import Outbox
from redcron.store.shared_secrets import shared_secret

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: random bytes behind a channel id (public) and a webhook secret
ID_BYTES = 6
SECRET_BYTES = 32
#: channels a deployment holds: the notifier reads them all every pass
MAX_CHANNELS = 1000
#: channels one tenant may hold, so no tenant uses up the deployment's
MAX_TENANT_CHANNELS = 20
NONCE_BYTES = 16
TAG_BYTES = 16
SEALED_PREFIX = "v1:"


def _derive(master: bytes, purpose: bytes) -> bytes:
    return hmac.new(master, b"redcron channel " + purpose, hashlib.sha256).digest()


def _keystream(key: bytes, nonce: bytes, size: int) -> bytes:
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hmac.new(key, nonce + block.to_bytes(4, "big"), hashlib.sha256).digest()
        block += 1
    return bytes(out[:size])


def seal(master: bytes, channel_id: str, plain: str) -> str:
    """``plain`` encrypted and authenticated for ``channel_id`` (text, for a hash field)."""
    data = plain.encode()
    nonce = secrets.token_bytes(NONCE_BYTES)
    ks = _keystream(_derive(master, b"enc v1"), nonce, len(data))
    ct = bytes(a ^ b for a, b in zip(data, ks, strict=True))
    tag = hmac.new(
        _derive(master, b"mac v1"), channel_id.encode() + b"\0" + nonce + ct, hashlib.sha256
    ).digest()[:TAG_BYTES]
    return SEALED_PREFIX + base64.urlsafe_b64encode(nonce + ct + tag).decode()


def unseal(master: bytes, channel_id: str, sealed: str) -> str:
    """The text :func:`seal` sealed; ValueError if it was not sealed for this channel."""
    if not sealed.startswith(SEALED_PREFIX):
        raise ValueError("not a sealed value")
    raw = base64.urlsafe_b64decode(sealed[len(SEALED_PREFIX) :])
    nonce, ct, tag = raw[:NONCE_BYTES], raw[NONCE_BYTES:-TAG_BYTES], raw[-TAG_BYTES:]
    want = hmac.new(
        _derive(master, b"mac v1"), channel_id.encode() + b"\0" + nonce + ct, hashlib.sha256
    ).digest()[:TAG_BYTES]
    if len(nonce) != NONCE_BYTES or not hmac.compare_digest(tag, want):
        raise ValueError("sealed value fails its check")
    ks = _keystream(_derive(master, b"enc v1"), nonce, len(ct))
    return bytes(a ^ b for a, b in zip(ct, ks, strict=True)).decode()


class ChannelStore:
    """The admin's and the tenants' notification channels."""

    def __init__(self, broker: Core) -> None:
        self.broker = broker
        self.keys = broker.keys

    def _master(self) -> bytes:
        return bytes.fromhex(shared_secret(self.broker, self.keys.channel_secret()))

    def allow(self) -> tuple[str, ...]:
        """The admin's allowlist of hosts a channel may name (from the settings)."""
        return allowed_hosts(self.broker.settings.notify_allow_hosts)

    def add(
        self,
        tenant: str | None,
        kind: str,
        url: str,
        events: Sequence[str] | str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> tuple[ChannelInfo, str | None]:
        """A new channel for ``tenant``'s events (None: the admin's, every
        tenant's).  Returns it with its signing secret (webhooks; None for
        Slack), which is shown this once: afterwards it is only ever used to sign.

        Raises:
            ValidationError: a field is wrong (the message names it and the fix),
                or the deployment holds MAX_CHANNELS already, or the tenant
                MAX_TENANT_CHANNELS (checked and written in one script).
        """
        owner = ADMIN_OWNER if tenant is None else validation.name("tenant", tenant)
        kind = check_kind(kind)
        url = check_url(url, self.allow())
        chosen = check_events(events)
        label = check_name(name)
        timeout = check_timeout(timeout_s)
        channel_id = secrets.token_hex(ID_BYTES)
        secret = "whsec_" + secrets.token_urlsafe(SECRET_BYTES) if kind == "webhook" else None
        master = self._master()
        created = self.broker.server_ms()
        record = {
            "id": channel_id,
            "kind": kind,
            "owner": owner,
            "name": label,
            "events": ",".join(chosen),
            "shown_url": shown_url(kind, url),
            "url": seal(master, channel_id, url),
            "secret": seal(master, channel_id, secret) if secret else "",
            "timeout_s": f"{timeout:g}",
            "created": str(created),
        }
        self.ensure_groups()
        # the hash first, then the index entry with the caps checked in the same
        # script (lua/channel_add.lua): counting here and writing after let
        # concurrent adds all pass one count.  The two keys have different slots;
        # a crash between them leaves a hash no index names, which nothing reads.
        self.broker.client.hset(
            self.keys.channel(channel_id), mapping={k: v for k, v in record.items()}
        )
        try:
            self.broker.scripts.run(
                "channel_add",
                [self.keys.channels()],
                [channel_id, owner, MAX_CHANNELS, MAX_TENANT_CHANNELS, ADMIN_OWNER],
            )
        except (Conflict, ValidationError):
            self.broker.client.delete(self.keys.channel(channel_id))
            raise
        return _info(record, channel_id), secret

    def ensure_groups(self) -> None:
        """The notifier's consumer group on every shard's events stream, made at the
        stream's end the first time: events from before any channel existed are
        nobody's to deliver; every one after it waits for the notifier."""
        for shard in range(self.broker.shards):
            try:
                self.broker.client.xgroup_create(
                    self.keys.events(shard), NOTIFY_GROUP, id="$", mkstream=True
                )
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def owners(self) -> dict[str, str]:
        """Every channel id -> its owner (a tenant, or ``*``)."""
        raw: Any = self.broker.client.hgetall(self.keys.channels())
        return {_s(k): _s(v) for k, v in raw.items()}

    def list(self, tenant: str | None = None) -> list[ChannelInfo]:
        """Channels oldest first: every one (None), or ``tenant``'s own only."""
        return [info for info, _raw in self.rows(tenant)]

    def rows(self, tenant: str | None = None) -> builtins.list[tuple[ChannelInfo, dict[str, str]]]:
        """Channels oldest first with their hashes as text (sealed fields still
        sealed), in one round trip: what the notifier routes with."""
        ids = [i for i, owner in self.owners().items() if tenant is None or owner == tenant]
        out = []
        for channel_id, got in zip(ids, self._hashes(ids), strict=True):
            if got:
                raw = {_s(k): _s(v) for k, v in got.items()}
                out.append((_info(raw, channel_id), raw))
        out.sort(key=lambda row: (row[0].created_at is None, row[0].created_at, row[0].id))
        return out

    def _hashes(self, ids: Sequence[str]) -> builtins.list[Any]:
        """The channels' hashes in one pipeline.  In a request's partial reads on
        a Redis Cluster with a master down, one by one when the pipeline fails:
        a channel whose slot's master does not answer reads as none, named by
        :func:`~redcron.engine.partial.unavailable_channels`."""
        client = self.broker.client
        pipe = client.pipeline(transaction=False)
        for channel_id in ids:
            pipe.hgetall(self.keys.channel(channel_id))
        try:
            return list(pipe.execute())
        except Exception as exc:
            if not may_leave_out_channels(self.broker, exc):
                raise
        got: builtins.list[Any] = []
        for channel_id in ids:
            try:
                got.append(client.hgetall(self.keys.channel(channel_id)))
            except Exception as exc:
                if not note_channel_unavailable(self.broker, channel_id, exc):
                    raise
                got.append(None)
        return got

    def raw(self, channel_id: str) -> dict[str, str]:
        """A channel's hash as text (sealed fields still sealed); NotFound if none."""
        got: Any = self.broker.client.hgetall(self.keys.channel(channel_id)) if channel_id else {}
        if not got:
            raise NotFound(f"no channel {channel_id!r}")
        return {_s(k): _s(v) for k, v in got.items()}

    def get(self, channel_id: str) -> ChannelInfo:
        return _info(self.raw(channel_id), channel_id)

    def credentials(self, channel_id: str, raw: Mapping[str, str] | None = None) -> tuple[str, str]:
        """(url, secret) of a channel, unsealed for sending; never log them."""
        fields = raw if raw is not None else self.raw(channel_id)
        master = self._master()
        url = unseal(master, channel_id, fields.get("url", ""))
        sealed = fields.get("secret", "")
        return url, unseal(master, channel_id, sealed) if sealed else ""

    def remove(self, channel_id: str) -> ChannelInfo:
        """Delete a channel with what it still had to send and its delivery log."""
        info = self.get(channel_id)
        k = self.keys
        pipe = self.broker.client.pipeline(transaction=False)
        pipe.hdel(k.channels(), channel_id)
        for key in (k.channel, k.outbox, k.outmsg, k.digest, k.dlog):
            pipe.delete(key(channel_id))
        pipe.execute()
        return info

    def deliveries(self, channel_id: str, count: int = 50) -> builtins.list[Delivery]:
        """The channel's delivery log, newest first."""
        entries: Any = self.broker.client.xrevrange(self.keys.dlog(channel_id), count=count)
        out = []
        for eid, raw in entries:
            f = {_s(a): _s(b) for a, b in raw.items()}
            status = f.get("status", "")
            at = f.get("at", "")
            out.append(
                Delivery(
                    id=_s(eid),
                    delivery=f.get("delivery", ""),
                    type=f.get("type", ""),
                    outcome=f.get("outcome", ""),
                    status=int(status) if status.isdigit() else None,
                    attempt=int(f.get("attempt", "0") or 0),
                    error=f.get("error", ""),
                    at=from_ms(int(at)) if at.isdigit() else None,
                )
            )
        return out

    def send_test(self, channel_id: str) -> str:
        """Queue a test message on the channel (the notifier sends it, as any other,
        so it tests the whole path); returns its delivery id, which its line in
        :meth:`deliveries` names."""
        info = self.get(channel_id)
        now = self.broker.server_ms()
        delivery_id = f"{channel_id}-test-{now}"
        stamp = from_ms(now)
        owner = info.tenant or "(admin)"
        message = {
            "type": "test",
            "tenant": info.tenant or "",
            "job": "",
            "run": "",
            "at": iso(stamp) if stamp is not None else "",
            "detail": f"a test message for channel {info.name} ({channel_id})",
            "link": self.broker.settings.dashboard_url,
            "text": f"[redcron] test message for channel {info.name} of {owner}",
        }
        Outbox(self.broker).enqueue(channel_id, delivery_id, message, now)
        return delivery_id

    def pending(self, channel_id: str) -> int:
        """Deliveries of the channel still to send."""
        return int(self.broker.client.zcard(self.keys.outbox(channel_id)))


def _info(raw: Mapping[Any, Any], channel_id: str) -> ChannelInfo:
    f = {_s(k): _s(v) for k, v in raw.items()}
    owner = f.get("owner", "")
    created = f.get("created", "")
    try:
        timeout = float(f.get("timeout_s", "") or 5.0)
    except ValueError:
        timeout = 5.0
    return ChannelInfo(
        id=channel_id,
        kind=f.get("kind", ""),
        name=f.get("name", ""),
        tenant=None if owner == ADMIN_OWNER else owner,
        url=f.get("shown_url", ""),
        events=tuple(e for e in f.get("events", "").split(",") if e),
        timeout_s=timeout,
        created_at=from_ms(int(created)) if created.isascii() and created.isdigit() else None,
    )
