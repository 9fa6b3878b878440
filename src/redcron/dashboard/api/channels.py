"""``/v1/channels``: notification channels (docs/api.md, Channels).

The admin sees and changes every channel, and makes its own (every tenant's
events) by leaving ``tenant`` out; a tenant token sees, makes and removes only
its own tenant's: another's, or the admin's, is a 404 exactly as an unknown id.
A webhook's signing secret is in the creation reply only.
"""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import body, only, redcron_app, reply
from redcron.dashboard.api.operation import UNAVAILABLE_CHANNELS, Operation, Routes, link
from redcron.dashboard.api.params import EMPTY_BODY, TENANT, IntParam
from redcron.dashboard.api.record_schema import ref
from redcron.errors import NotFound
from redcron.model.channels import ChannelInfo
from redcron.store import ChannelStore

bp = Routes("channels", __name__)

FIELDS = frozenset({"tenant", "kind", "url", "events", "name", "timeout_s"})
#: a delivery log page
DELIVERIES_LIMIT = IntParam("limit", 50, 1, 1000, "Lines")

_CHANNEL = {"channel_id": "$response.body#/channel/id"}
#: what a client can do next with the channel a reply holds
CHANNEL_LINKS = {
    "GetChannel": link("get_channel", _CHANNEL),
    "TestChannel": link("test_channel", _CHANNEL),
    "ChannelDeliveries": link("list_deliveries", _CHANNEL),
    "RemoveChannel": link("remove_channel", _CHANNEL),
}


def _store() -> ChannelStore:
    return ChannelStore(redcron_app().broker)


def channel(channel_id: str) -> ChannelInfo:
    """A channel the caller may see; 404 otherwise (the admin's are the admin's)."""
    info = _store().get(channel_id)
    only_tenant = auth.scope()
    if only_tenant is not None and info.tenant != only_tenant:
        raise NotFound(f"no channel {channel_id!r}")
    return info


@bp.get(
    "/channels",
    doc=Operation(
        "list_channels",
        "Notification channels (admin: every one, or tenant's; a tenant token: its own)",
        {
            "type": "object",
            "required": ["channels"],
            "properties": {
                "channels": {"type": "array", "items": ref("Channel")},
                "unavailable_channels": UNAVAILABLE_CHANNELS,
            },
        },
        query=(TENANT,),
        links={"GetChannel": link("get_channel", {"channel_id": "$response.body#/channels/0/id"})},
    ),
)
def list_channels() -> flask.Response:
    """The caller's channels (admin: every one, or ``tenant``'s)."""
    tenant = TENANT.read()
    if tenant is not None and not auth.may_see(tenant):
        return reply({"channels": []})
    return reply({"channels": _store().list(tenant or auth.scope())})


@bp.post(
    "/channels",
    doc=Operation(
        "add_channel",
        "Add a channel (a tenant token: for its tenant; the admin: for tenant, or every "
        "tenant's events without one); the secret is shown this once",
        {
            "type": "object",
            "required": ["channel", "secret"],
            "properties": {"channel": ref("Channel"), "secret": {"type": ["string", "null"]}},
        },
        ok="201",
        errors=(
            ("409", "A channel cap is reached (20 per tenant, 1,000 in all): remove one first"),
        ),
        body=ref("ChannelBody"),
        links=CHANNEL_LINKS,
    ),
)
def add_channel() -> flask.Response:
    data = body()
    only(data, FIELDS)
    auth.tenant_field(data)
    info, secret = _store().add(
        data.get("tenant"),
        data.get("kind", "webhook"),
        data.get("url", ""),  # checked by the store: a 400 naming url
        data.get("events"),
        data.get("name"),
        data.get("timeout_s"),
    )
    return reply({"channel": info, "secret": secret}, 201)


@bp.get(
    "/channels/<channel_id>",
    doc=Operation(
        "get_channel",
        "One channel and its pending deliveries",
        {
            "type": "object",
            "required": ["channel", "pending"],
            "properties": {"channel": ref("Channel"), "pending": {"type": "integer"}},
        },
        errors=("404",),
    ),
)
def get_channel(channel_id: str) -> flask.Response:
    info = channel(channel_id)
    return reply({"channel": info, "pending": _store().pending(channel_id)})


@bp.delete(
    "/channels/<channel_id>",
    doc=Operation(
        "remove_channel",
        "Remove a channel with what it still had to send",
        ref("Channel"),
        errors=("404",),
    ),
)
def remove_channel(channel_id: str) -> flask.Response:
    channel(channel_id)
    return reply(_store().remove(channel_id))


@bp.post(
    "/channels/<channel_id>/test",
    doc=Operation(
        "test_channel",
        "Queue a test message for the notifier to send",
        {
            "type": "object",
            "required": ["delivery"],
            "properties": {"delivery": {"type": "string"}},
        },
        ok="202",
        errors=("404",),
        body=EMPTY_BODY,
        body_required=False,
    ),
)
def test_channel(channel_id: str) -> flask.Response:
    """Queue a test message; the notifier sends it (see its deliveries)."""
    only(body(required=False), EMPTY_BODY["properties"])
    channel(channel_id)
    return reply({"delivery": _store().send_test(channel_id)}, 202)


@bp.get(
    "/channels/<channel_id>/deliveries",
    doc=Operation(
        "list_deliveries",
        "The channel's delivery log, newest first (bounded)",
        {
            "type": "object",
            "required": ["deliveries", "pending"],
            "properties": {
                "deliveries": {"type": "array", "items": ref("Delivery")},
                "pending": {"type": "integer"},
            },
        },
        errors=("404",),
        query=(DELIVERIES_LIMIT,),
    ),
)
def deliveries(channel_id: str) -> flask.Response:
    channel(channel_id)
    limit = DELIVERIES_LIMIT.read()
    store = _store()
    return reply(
        {"deliveries": store.deliveries(channel_id, limit), "pending": store.pending(channel_id)}
    )
