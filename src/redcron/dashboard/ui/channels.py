"""``/channels``: notification channels (docs/operations.md, Notifications):
the viewer's channels with what each still has to send and its last
deliveries; add one (its signing secret shown on the reply page, once: never
in a flash message, which would put it in the session cookie), send a test
message, remove one.  A tenant sees and changes only its own; the admin every
channel, and adds its own by leaving the tenant empty."""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.channels import channel
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.render import Reply
from redcron.errors import Conflict, ValidationError
from redcron.model.channels import EVENT_TYPES, KINDS
from redcron.store import ChannelStore

bp = flask.Blueprint("channels", __name__)

#: delivery log lines shown per channel
LOG_LINES = 5


def _store() -> ChannelStore:
    return ChannelStore(redcron_app().broker)


def _page(status: int = 200, **context: object) -> Reply:
    store = _store()
    found = store.list(auth.scope())
    rows = [(c, store.pending(c.id), store.deliveries(c.id, LOG_LINES)) for c in found]
    return render.page(
        "channels.html",
        title="Channels",
        status=status,
        rows=rows,
        kinds=KINDS,
        event_types=EVENT_TYPES,
        scoped=auth.scope() is not None,
        allow=store.allow(),
        **context,
    )


@bp.get("/channels")
def index() -> Reply:
    return _page()


@bp.post("/channels")
def add() -> Reply:
    form = flask.request.form
    tenant = auth.scope() or (form.get("tenant") or "").strip() or None
    events = form.getlist("events") or None
    timeout = (form.get("timeout_s") or "").strip()
    typed = {k: form.get(k, "") for k in ("tenant", "kind", "url", "name", "timeout_s")}
    try:
        seconds = float(timeout) if timeout else None
    except ValueError:
        return _page(400, error="timeout_s: give seconds, e.g. 5", typed=typed)
    try:
        info, secret = _store().add(
            tenant, form.get("kind", "webhook"), (form.get("url") or "").strip(), events,
            (form.get("name") or "").strip() or None, seconds,
        )  # fmt: skip
    except ValidationError as exc:
        return _page(400, error=str(exc), typed=typed)
    except Conflict as exc:  # a cap reached
        return _page(409, error=str(exc), typed=typed)
    return _page(created=info, secret=secret)


@bp.post("/channels/<channel_id>/test")
def test(channel_id: str) -> Reply:
    channel(channel_id)
    delivery = _store().send_test(channel_id)
    flask.flash(f"queued test delivery {delivery}: the notifier sends it", "info")
    return render.go("ui.channels.index")


@bp.post("/channels/<channel_id>/remove")
def remove(channel_id: str) -> Reply:
    channel(channel_id)
    info = _store().remove(channel_id)
    flask.flash(f"removed {info.kind} channel {info.id}", "info")
    return render.go("ui.channels.index")
